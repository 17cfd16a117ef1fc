"""Moved to :mod:`kernel_analyst.eda` (which imports no LangChain); these names stay
importable from here for code written against earlier versions."""

from ..eda import (
    STEPS,
    EdaReport,
    PlannedCell,
    PlaybookOptions,
    Progress,
    StepResult,
    plan_cells,
    run_playbook,
)
from ..eda.exceptions import UnreadableFileError

__all__ = ["STEPS", "EdaReport", "PlannedCell", "PlaybookOptions", "Progress", "StepResult",
           "UnreadableFileError", "plan_cells", "run_playbook"]
