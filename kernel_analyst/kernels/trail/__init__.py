"""trail: the audit notebook, and what is read back from it.

Every cell a conversation runs lands in one ``.ipynb`` per session, valid on disk after
every cell (:class:`AuditTrail`). What the trail records is enough to bring a
conversation's variables back after a loss (``restore.py``: replay, snapshots), and to
check that a cell, or a whole notebook, reproduces (``reproduce.py``; the whole re-run is
``kernels/verify.py``).

May import: the value modules of ``kernels`` (``execution``, ``recovery``, ``files``,
``exceptions``) and its own modules. It talks to a kernel only through the callables it
is given (``Recoverer``), so it imports neither ``launch`` nor ``conversation``.
"""

from .audit import AuditTrail, cell_meta, code_cell, markdown_cell, new_cell_id, repair_notebook, stands
from .reproduce import check_inputs, compare_cell, join_text
from .restore import (
    LOSS_MARKERS,
    NO_REPLAY,
    SNAPSHOT_DIR,
    Evaluate,
    Recoverer,
    RunCell,
    cells_to_restore,
    expected_variables,
    marker_text,
    replayable,
)

__all__ = [
    "LOSS_MARKERS",
    "NO_REPLAY",
    "SNAPSHOT_DIR",
    "AuditTrail",
    "Evaluate",
    "Recoverer",
    "RunCell",
    "cell_meta",
    "cells_to_restore",
    "check_inputs",
    "code_cell",
    "compare_cell",
    "expected_variables",
    "join_text",
    "markdown_cell",
    "marker_text",
    "new_cell_id",
    "repair_notebook",
    "replayable",
    "stands",
]
