"""Thread pools sized to a kernel's CPU share.

A kernel under a quota of one core that runs OpenBLAS with a thread per core of the
machine only makes its threads wait for each other (and for the quota). Every library
of the data stack reads a variable for its pool size when it builds the pool; the
kernel's environment carries them all. A cold kernel builds its pools after it starts,
so that is enough; a kernel forked from a template inherits pools the template built
already (numpy's OpenBLAS, Arrow's), which the kernel resizes itself at start
(``_inkernel/_forkkernel/pools.py``, with threadpoolctl where the kernel's Python has it).
"""

from __future__ import annotations

import math
import os

from ..limits import Limits

THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "LOKY_MAX_CPU_COUNT",
    "POLARS_MAX_THREADS", "RAYON_NUM_THREADS",
)
"""OpenMP (and Arrow, which reads OMP_NUM_THREADS), OpenBLAS, MKL, BLIS, Accelerate,
numexpr, joblib's process pools (scikit-learn's ``n_jobs=-1``), Polars and Rust's rayon."""
KERNEL_VARIABLE = "KERNEL_ANALYST_THREADS"
"""The size a forked kernel resizes its inherited pools to."""


def thread_count(limits: Limits, *, budgeted: bool) -> int | None:
    """Threads per pool for a kernel under ``limits`` (``budgeted``: it runs for an owner
    with a CPU budget): its share in whole cores, rounded up, at most the machine's;
    None when there is no hard share (no ``cpus``, or ``cpu_policy="weight"``, where
    idle cores are the kernel's to use)."""
    shares = [limits.cpus, limits.tenant_cpus if budgeted else None]
    cpus = min((s for s in shares if s is not None), default=None)
    if cpus is None or limits.cpu_policy == "weight":
        return None
    return max(1, min(math.ceil(cpus), os.cpu_count() or 1))


def thread_environment(count: int | None) -> dict[str, str]:
    """The variables that size every pool to ``count`` threads (none for None)."""
    if count is None:
        return {}
    return {**dict.fromkeys(THREAD_VARIABLES, str(count)), KERNEL_VARIABLE: str(count)}


__all__ = ["KERNEL_VARIABLE", "THREAD_VARIABLES", "thread_count", "thread_environment"]
