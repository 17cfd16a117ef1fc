"""Thread pools of forked kernels, sized to each kernel's CPU share.

The template imported numpy, pandas and Arrow, whose pools (OpenBLAS's, Arrow's CPU
pool) took their size from the machine, not from a share no template can know. Just
before it forks a kernel, the template sets them to that kernel's size
(``{"spawn": ..., "threads": N}``), and the child inherits the setting; pools built later
(OpenMP's, numexpr's, joblib's) read the variables of the kernel's environment.

Why not in the child: OpenBLAS shuts its worker threads down before every fork (its
``pthread_atfork`` handler) and starts them again at the next call that needs them; a
child that set its size would start them at once, and they spin for about 0.1 s before
they sleep (``OPENBLAS_THREAD_TIMEOUT``), taking a core from the kernel's own start (30
ms more to a first result, measured). In the template they are joined again by the
fork itself. threadpoolctl (scikit-learn's own way to do this) finds every BLAS and
OpenMP library loaded; where the kernel's Python lacks it, the variables still size
whatever is built from then on.
"""

from __future__ import annotations

import sys
from typing import Any

from .state import STATE

_sized: list[Any] = [None]  # the size the template's pools are set to now (None: their own)
_defaults: dict[str, Any] = {}


def warm() -> None:
    """In the template: find the loaded BLAS and OpenMP libraries once (about 10 ms) and
    note their own sizes."""
    try:
        from threadpoolctl import ThreadpoolController

        STATE.pools = ThreadpoolController()
        _defaults["libraries"] = [lib.num_threads for lib in STATE.pools.lib_controllers]
    except Exception:  # not installed here, or a library it cannot read: variables only
        STATE.pools = None
    arrow = sys.modules.get("pyarrow")
    if arrow is not None and hasattr(arrow, "cpu_count"):
        _defaults["arrow"] = arrow.cpu_count()


def before_fork(threads: int | None) -> None:
    """Set every pool to ``threads`` (None: back to its own size) for the next child."""
    if threads == _sized[0]:
        return
    _sized[0] = threads
    try:
        if STATE.pools is not None:
            own = _defaults.get("libraries", [])
            for index, lib in enumerate(STATE.pools.lib_controllers[:len(own)]):
                lib.set_num_threads(threads or own[index])
        arrow = sys.modules.get("pyarrow")
        if arrow is not None and "arrow" in _defaults:
            arrow.set_cpu_count(threads or _defaults["arrow"])
    except Exception:
        pass  # the child's variables still size what it builds
