"""The template: a process with IPython, ipykernel and the preload list imported and a
kernel built (startup files run, namespace empty), but nothing bound; it serves fork
requests until the host closes its control socket."""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import threading
import traceback
from typing import Any, NoReturn

from . import pools
from .kernel import serve
from .state import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PR_SET_PDEATHSIG, STATE, prctl
from .wire import send_msg

_KERNEL_FLAGS = ("--HistoryManager.hist_file=:memory:", "--Application.log_level=WARN")
# Modules a kernel imports while its application initialises, imported once here
# instead of in every child (about 50 ms of imports, measured).
_WARM_IMPORTS = (
    "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.iostream", "ipykernel.heartbeat",
    "ipykernel.control", "ipykernel.shellchannel", "ipykernel.subshell_manager",
    "ipykernel.debugger", "ipykernel.comm", "IPython.core.completerlib", "IPython.core.debugger",
    "IPython.core.oinspect", "IPython.extensions.storemagic", "IPython.utils.wildcard", "pdb",
    "sqlite3", "faulthandler", "tornado.gen", "tornado.locks", "tornado.queues",
    "zmq.eventloop.zmqstream", "encodings.idna", "random", "resource", "tornado.platform.asyncio",
    "traitlets.utils.importstring",
)


def main(argv: list[str]) -> NoReturn:
    """``template CTL_FD PRELOAD STARTUP [STARTUP ...]`` (see ``__main__``): build the
    template and serve."""
    ctl = socket.socket(fileno=int(argv[0]))
    code = 1
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the host's death ends the template ...
        if os.getppid() == 1:
            os._exit(1)  # ... also if it came before the line above
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphaned checkpoints come back here to be reaped
        # Same-uid code (another conversation under isolation="process") must not be able
        # to trace the template: every later conversation is a copy of it.
        prctl(PR_SET_DUMPABLE, 0)
        info = _build_template(argv[2:], argv[1])
        send_msg(ctl, {"ready": True, **info})
        gc.collect()
        gc.freeze()  # the cycle collector never touches these pages: they stay shared
        serve(ctl, role="template")
    except BaseException as exc:  # report why, then end: the host falls back to cold starts
        traceback.print_exc()
        try:
            send_msg(ctl, {"ready": False, "reason": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
    finally:
        os._exit(code)


def _ipykernel_version() -> str:
    import ipykernel

    return str(getattr(ipykernel, "__version__", "0"))


def _supported() -> str | None:
    """Why this interpreter's ipykernel cannot be forked (None: it can)."""
    from ipykernel.kernelapp import IPKernelApp

    version = _ipykernel_version()
    if version.split(".")[0] != "7" or not hasattr(IPKernelApp, "shell_channel_thread"):
        return f"ipykernel {version} (forking supports ipykernel 7)"
    if not hasattr(socket, "send_fds") or not hasattr(os, "register_at_fork"):
        return f"Python {sys.version.split()[0]} (forking needs 3.9 or newer)"
    return None


def _build_template(startup: list[str], preload: str) -> dict[str, Any]:
    """The kernel application, kernel object and shell, with nothing bound; ``startup``:
    the files a kernel runs at start, in order."""
    reason = _supported()
    if reason is not None:
        raise RuntimeError(f"cannot fork kernels with {reason}")
    import importlib

    for name in _WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    from ipykernel.kernelapp import IPKernelApp
    from IPython.core.application import BaseIPythonApplication

    os.environ["KERNEL_ANALYST_PRELOAD"] = preload
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    app: Any = IPKernelApp.instance()
    base: Any = BaseIPythonApplication
    base.initialize(app, [*_KERNEL_FLAGS, *(f"--IPKernelApp.exec_files={path}" for path in startup)])
    app.init_pdb()
    app.kernel = app.kernel_class.instance(parent=app, session=app.session, log=app.log,
                                           profile_dir=app.profile_dir, user_ns=app.user_ns)
    app.init_path()
    app.init_shell()
    app.init_gui_pylab()
    app.init_extensions()
    app.patch_io()
    # Runs the startup files (their shell-level part: the stream caps wait for streams)
    # and the preload imports, with the shell in place, as a cold kernel does.
    app.init_code()
    del os.environ["KERNEL_ANALYST_PRELOAD"]
    _warm_libraries()
    pools.warm()
    _warm_zmq()
    STATE.app = app
    STATE.helper = app.shell.user_ns.get("_kernel_analyst")
    _warm_cell(app.shell)
    _warm_traceback(app.shell)
    if STATE.helper is not None:
        try:  # the package versions every first cell reports (importlib.metadata: ~20 ms)
            STATE.helper.versions()
        except Exception:
            traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    import importlib.util

    launcher = importlib.util.find_spec("ipykernel_launcher")
    versions = getattr(STATE.helper, "versions_found", None)
    return {"pid": os.getpid(), "python": sys.version.split()[0], "ipykernel": _ipykernel_version(),
            "threads": threading.active_count(), "launcher": launcher.origin if launcher else None,
            "versions": versions if isinstance(versions, dict) else None}


def _warm_libraries() -> None:
    """Do once, outside the namespace, what a first cell makes pandas and matplotlib do
    lazily (imports, caches, the font and the renderer): every kernel forked from the
    template starts with them done instead of doing them itself."""
    try:
        import io

        pandas = sys.modules.get("pandas")
        if pandas is not None:
            frame = pandas.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"]})
            repr(frame.describe(include="all"))
            frame._repr_html_()
            repr(frame.a.sum())
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            figure, axes = pyplot.subplots()
            axes.plot([1, 2, 3])
            axes.set_title("warm")
            figure.savefig(io.BytesIO(), format="png")
            pyplot.close("all")
    except Exception:
        traceback.print_exc()  # only slower first cells


# A first cell as the host sends one (code with a frame, then the user expression that
# reports the variables), run once here so that every kernel's first cell finds IPython's
# cell machinery and the reporting code already run (about 3 ms of a first cell, measured).
_WARM_CELL = (
    "import pandas as pd\n"
    "_ka_warm = pd.DataFrame({'a': range(10), 'b': [0.5] * 10, 'c': list('abcdefghij')})\n"
    "_ka_warm_total = _ka_warm['b'].sum()\n"
    "_ka_warm.head()"
)
_STEP = "_kernel_analyst.step()"


def _warm_cell(shell: Any) -> None:
    """Run :data:`_WARM_CELL` silently (no history, no output, no cell events) and leave
    the namespace, and the variable report's baseline, as they were."""
    if "pandas" not in sys.modules or STATE.helper is None:
        return
    before = set(shell.user_ns)
    try:
        shell.run_cell(_WARM_CELL, store_history=False, silent=True)
        shell.user_expressions({"step": _STEP})
    except Exception:
        traceback.print_exc()  # only a slower first cell
    finally:
        for name in set(shell.user_ns) - before:
            del shell.user_ns[name]
        try:
            shell.user_expressions({"step": _STEP})  # the baseline: the namespace as it was
        except Exception:
            traceback.print_exc()


# An error in a function of a cell, as a first failing cell raises one.
_WARM_ERROR = "def _ka_warm():\n    return 1 / 0\n_ka_warm()\n"
_WARM_ERROR_FILE = "<kernel-analyst warm traceback>"


def _warm_traceback(shell: Any) -> None:
    """Format one traceback as IPython reports a cell's error. Its first one imports and
    sets up what it writes with (stack_data, executing, pygments' lexer and formatter):
    about 100 ms, measured, that every kernel's first error, and its first interrupt's
    KeyboardInterrupt, no longer pays. On a busy machine that is the part of stopping a
    cancelled cell that could outlast the interrupt grace. Nothing is printed or kept:
    the source is in linecache only while it is formatted, and the traceback is let go."""
    import linecache

    linecache.cache[_WARM_ERROR_FILE] = (len(_WARM_ERROR), None, _WARM_ERROR.splitlines(True),
                                         _WARM_ERROR_FILE)
    try:
        exec(compile(_WARM_ERROR, _WARM_ERROR_FILE, "exec"), {})
    except ZeroDivisionError:
        etype, value, tb = sys.exc_info()
        try:
            shell.InteractiveTB.structured_traceback(etype, value, tb)
        except Exception:
            traceback.print_exc()  # only a slower first error
        if getattr(shell.InteractiveTB, "tb", None) is tb:
            shell.InteractiveTB.tb = None  # it keeps the last one it formatted (for %debug)
        del tb, value
    finally:
        linecache.cache.pop(_WARM_ERROR_FILE, None)


def _warm_zmq() -> None:
    """libzmq initialises itself on its first socket (about 6 ms, measured): do that here,
    with a context that is closed again (no ZMQ context or thread is left behind)."""
    import tempfile

    import zmq

    with tempfile.TemporaryDirectory(prefix="ka-warm-") as directory:
        context = zmq.Context()
        sock = context.socket(zmq.ROUTER)
        sock.bind(f"ipc://{directory}/warm")
        sock.close(linger=0)
        context.term()
