"""``python <this directory> template CTL_FD PRELOAD STARTUP [STARTUP ...]``: run the template.

Its modules import each other as a package, so the directory's parent is put on the path
to import it, and taken off again before anything else runs: a script's directory is not
on a kernel's path.
"""

import importlib
import os
import sys

if __name__ == "__main__":
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[0] = os.path.dirname(_here)
    _template = importlib.import_module(os.path.basename(_here) + ".template")
    del sys.path[0]
    if len(sys.argv) >= 2 and sys.argv[1] == "template":
        _template.main(sys.argv[2:])
    sys.exit("usage: python _forkkernel template CTL_FD PRELOAD STARTUP [STARTUP ...]")
