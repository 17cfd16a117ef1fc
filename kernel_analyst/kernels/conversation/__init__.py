"""conversation: one persistent kernel per conversation, and everything that happens to it.

:class:`SessionManager` maps conversation ids to :class:`KernelSession` objects (a warm
pool, idle culling, resuming a conversation found on disk, branches). A session runs one
execution in this order: the turn (``turn.py``), a ready kernel with the namespace the
conversation expects (``lifecycle.py``, ``restoring.py``), the cell under the timeout
policy (``runner.py``, ``cell.py``), the record in the audit trail (``recording.py``).
Beside it: background runs (``runs.py``), checkpoints and undo (``checkpoints.py``),
branches (``branches.py``) and keeping one (``keeping.py``), files and the disk quota
(``workdir.py``, ``quota.py``), variables and values asked for without a cell (``queries.py``).

May import: ``launch`` (through its package face: the backend interface, the request
path, diagnosis, checkpoints of a process), ``trail``, and the value modules of
``kernels``. Nothing in ``launch`` or ``trail`` imports it.
"""

from ._support import OutputCallback
from .branches import BranchInfo
from .checkpoints import DEFAULT_CHECKPOINTS, CheckpointInfo, FileMode, UndoReport, enable_checkpoints
from .keeping import DiscardReport, FileMerge, KeepReport, parent_of
from .manager import ConversationInfo, SessionManager, directory_name, read_notebook_head
from .runs import KEEP_FINISHED, Run, Runs, RunState, RunStatus
from .session import KernelSession

__all__ = [
    "DEFAULT_CHECKPOINTS",
    "KEEP_FINISHED",
    "BranchInfo",
    "CheckpointInfo",
    "ConversationInfo",
    "DiscardReport",
    "FileMerge",
    "FileMode",
    "KeepReport",
    "KernelSession",
    "OutputCallback",
    "Run",
    "RunState",
    "RunStatus",
    "Runs",
    "SessionManager",
    "UndoReport",
    "directory_name",
    "enable_checkpoints",
    "parent_of",
    "read_notebook_head",
]
