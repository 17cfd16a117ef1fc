"""Thread pools a forked kernel inherited, sized to its CPU share.

The template imported numpy, pandas and Arrow, whose pools (OpenBLAS's, Arrow's CPU
pool) took their size from the machine, not from a share no template can know. A
kernel whose spec says ``KERNEL_ANALYST_THREADS`` resizes them at start, before any
code of the user's; pools built later (OpenMP's, numexpr's, joblib's) read the
variables of its environment themselves. threadpoolctl (scikit-learn's own way to do
this) finds every BLAS and OpenMP library loaded; where the kernel's Python lacks it,
the variables still size whatever is built from then on."""

from __future__ import annotations

import sys

from .state import STATE


def warm() -> None:
    """In the template: find the loaded BLAS and OpenMP libraries once (about 10 ms),
    so a kernel only sets their sizes."""
    try:
        from threadpoolctl import ThreadpoolController

        STATE.pools = ThreadpoolController()
    except Exception:  # not installed here, or a library it cannot read: variables only
        STATE.pools = None


def size(count: int) -> None:
    """Every pool of this process to ``count`` threads."""
    if STATE.pools is not None:
        try:
            STATE.pools.limit(limits=count)
        except Exception:
            pass
    arrow = sys.modules.get("pyarrow")
    if arrow is not None and hasattr(arrow, "set_cpu_count"):
        try:
            arrow.set_cpu_count(count)
        except Exception:
            pass
    numexpr = sys.modules.get("numexpr")
    if numexpr is not None and hasattr(numexpr, "set_num_threads"):
        try:
            numexpr.set_num_threads(count)
        except Exception:
            pass
