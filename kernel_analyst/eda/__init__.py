"""The EDA playbook, no LLM needed: load any tabular file, profile it, write the report.

- :func:`detect` decides how to read a file (CSV and other delimited text, Excel,
  Parquet, JSON, each optionally compressed) from its bytes;
- :func:`run_playbook` runs the profiling cells in a kernel session;
- :func:`write_notebook` and :func:`write_html` write the report, summary first;
- :func:`profile` is a compact text overview of a table, for a model's context.

Imports no LangChain: ``kernel-analyst eda`` and ``verify`` stay light.
"""

from ._outofcore import over_pandas_share, text_bytes
from .exceptions import EdaError, ReaderMissingError, UnreadableFileError
from .html import notebook_html, write_html
from .loader import ExcelPlan, JsonPlan, LoadPlan, ParquetPlan, Plan, TableShape, detect
from .options import PlaybookOptions
from .playbook import (
    STEPS,
    EdaReport,
    PlannedCell,
    Progress,
    StepResult,
    plan_cells,
    run_playbook,
    selected_steps,
)
from .report import summary_first, write_notebook
from .summary import summary_markdown

__all__ = [
    "STEPS",
    "EdaError",
    "EdaReport",
    "ExcelPlan",
    "JsonPlan",
    "LoadPlan",
    "ParquetPlan",
    "Plan",
    "PlannedCell",
    "PlaybookOptions",
    "Progress",
    "ReaderMissingError",
    "StepResult",
    "TableShape",
    "UnreadableFileError",
    "detect",
    "notebook_html",
    "over_pandas_share",
    "plan_cells",
    "run_playbook",
    "selected_steps",
    "summary_first",
    "summary_markdown",
    "text_bytes",
    "write_html",
    "write_notebook",
]
