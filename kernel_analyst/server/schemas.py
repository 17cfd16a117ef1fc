"""Request and response bodies of the HTTP API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_MAX_CODE = 1_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionCreate(_Strict):
    """Body of ``POST /sessions`` (optional)."""

    label: str = Field("", max_length=200, description="Free text to recognise the session by.")


class SessionOut(BaseModel):
    """A session as the API shows it."""

    id: str
    label: str
    created_at: str
    state: Literal["open", "dormant"] = Field(
        description="`open`: live (a kernel runs, or starts at its next use); `dormant`: its kernel "
                    "was let go of (idle, or a server stop) and the conversation kept; its files and "
                    "notebook stay readable and its next execute, ask or EDA wakes it.")
    dormant_since: str | None = Field(None, description="When it went dormant (ISO-8601 UTC).")
    dormant_reason: str | None = Field(None, description="Why: `idle` or `shutdown`.")
    closed_at: str | None = Field(None, description="Deprecated: the same as `dormant_since`.")
    closed_reason: str | None = Field(None, description="Deprecated: the same as `dormant_reason`.")
    busy: bool = False
    idle_s: float = 0.0
    last_used_at: str | None = None
    disk_bytes: int | None = Field(None, description="A dormant session's size on disk (what the stored "
                                                      "limit counts).")
    enforced: dict[str, str] | None = Field(
        None, description="While its kernel runs here: what enforces each limit, e.g. `cpu` (its CPU share "
                          "and the tenant's budget, or why it is not limited), `syscalls` (the sandbox's "
                          "system-call filter), `memory`, `processes`, `network`.")


class SessionList(BaseModel):
    """``GET /sessions``."""

    sessions: list[SessionOut]


class ExecuteRequest(_Strict):
    """Body of the execute endpoints."""

    code: str = Field(..., max_length=_MAX_CODE, description="Python source to run in the session's kernel.")
    timeout: float | None = Field(
        None, gt=0, le=86_400,
        description="Seconds before the cell is interrupted; at most the server's ceiling.")


class VariableChangesOut(BaseModel):
    """What one execution created, changed or deleted."""

    created: list[dict[str, Any]]
    changed: list[dict[str, Any]]
    deleted: list[str]
    truncated: bool


class ErrorOut(BaseModel):
    """The exception a cell raised."""

    ename: str
    evalue: str
    traceback: list[str]


class ExecutionOut(BaseModel):
    """``Execution.to_dict()``: the outcome of one cell."""

    code: str
    status: Literal["ok", "error", "timeout", "died"]
    state: Literal["kept", "lost"]
    outputs: list[dict[str, Any]]
    execution_count: int | None
    started_at: str
    duration_s: float
    error: ErrorOut | None
    variables: VariableChangesOut
    truncated_bytes: int
    events: list[str]
    text: str
    ending: dict[str, Any] | None = Field(
        None, description="Why the kernel ended during this cell (status `died`) or just before it: "
                          "`cause` (memory_limit, system_oom, signal, exit, killed, connection_lost, "
                          "unknown), `detail` (one line), `signal`, `exit_code`, `memory_bytes` (the last "
                          "measurement), `memory_limit_bytes`.")
    peak_memory_bytes: int | None = Field(None, description="The most resident memory the kernel held "
                                                            "during the cell.")
    cpu_time_s: float | None = Field(None, description="CPU seconds the cell used.")
    recovery: dict[str, Any] | None = Field(
        None, description="Set when this cell's session first had its variables brought back (a "
                          "dormant session woken, a restart, a crash or a kernel death): reason, method "
                          "(snapshot or replay), cells replayed and skipped, variables restored, "
                          "whether it is complete.")


class FileOut(BaseModel):
    """A file in a session's working directory."""

    name: str
    size: int
    sha256: str = ""


class FileList(BaseModel):
    """``GET /sessions/{id}/files``."""

    files: list[FileOut]


class VariableOut(BaseModel):
    """A summary of one variable (never its full value)."""

    name: str
    type: str
    shape: list[int] | None = None
    columns: list[str] | None = None
    dtypes: dict[str, str] | None = None
    summary: str = ""


class VariableList(BaseModel):
    """``GET /sessions/{id}/variables``."""

    variables: list[VariableOut]
    dormant: bool = Field(False, description="True: the session is dormant and was not woken; these are "
                                             "its variables as its notebook recorded them, which come "
                                             "back when it wakes.")


class StopOut(BaseModel):
    """``POST /sessions/{id}/interrupt``: what was stopped."""

    stopped: Literal["run", "cell", "idle"] = Field(
        description="`run`: an EDA or agent run was stopped; `cell`: the running cell was interrupted; "
                    "`idle`: nothing was running.")


class UndoRequest(_Strict):
    """Body of ``POST /sessions/{id}/undo`` (optional)."""

    to: int | None = Field(
        default=None, ge=1,
        description="Go back to before the cell with this prompt number (a checkpoint must have been "
                    "taken before it); default: before the last checkpointed cell.")
    files: Literal["keep", "remove_new"] = Field(
        default="keep",
        description="`keep`: files the undone cells wrote stay; `remove_new`: the ones they created "
                    "are removed.")


class UndoOut(BaseModel):
    """What an undo did (``UndoReport``)."""

    restored_to: int = Field(description="The variables are as they were before this cell.")
    undone_cells: list[int] = Field(description="Cells undone; they stay in the notebook, marked undone.")
    lost_threads: list[str] = []
    removed_files: list[str] = []
    changed_files: list[str] = []
    duration_s: float = 0.0
    text: str = Field("", description="One paragraph saying what was undone.")


class ForkRequest(_Strict):
    """Body of ``POST /sessions/{id}/fork`` (optional)."""

    id: str | None = Field(
        default=None,
        description="The new session's id (letters, digits, `-`, `_`; at most 64); default: a new random id.")
    label: str | None = Field(default=None, max_length=200, description="Its label (default: the source's).")


class DiscardRequest(_Strict):
    """Body of ``POST /sessions/{id}/discard`` (optional)."""

    record_cells: bool = Field(
        default=False,
        description="Also copy the branch's own cells into its parent's notebook, marked abandoned (the "
                    "parent must be live on this server), so every attempt stays in the audit trail.")


class KeepOut(BaseModel):
    """``POST /sessions/{id}/keep``: the parent session, which goes on with the branch's state."""

    session: SessionOut = Field(description="The parent session (the branch is deleted).")
    kept: dict[str, Any] = Field(
        description="What keeping did (``KeepReport``): `method` (`forked` or `copied`), `after_cell`, "
                    "`abandoned_cells` and `kept_cells` (positions in the notebook), `files` (`copied`, "
                    "`replaced` with the versions moved `aside`, `kept`), `duration_s`.")
    text: str = Field(description="One paragraph saying what was kept.")


class DiscardOut(BaseModel):
    """``POST /sessions/{id}/discard``: what discarding did (the branch is deleted)."""

    branch: str
    parent: str | None
    cells: int = Field(description="Cells of the branch's own.")
    recorded: bool = Field(description="The parent's notebook says so (it was live here).")
    removed: bool = True
    text: str = ""


class CellOut(BaseModel):
    """One audit-notebook cell as the web page shows it."""

    index: int
    cell_type: Literal["code", "markdown", "raw"]
    source: str
    html: str = Field(description="Sanitised HTML: the outputs of a code cell, or the rendered markdown.")
    execution_count: int | None = None
    status: Literal["ok", "error", "timeout", "died"] | None = None
    duration_s: float | None = None
    error: dict[str, str] | None = None
    role: str | None = None
    id: str = Field("", description="A code cell's nbformat id: the page anchors it as `cell-id=<id>`, "
                                    "which an answer's cited numbers link to.")
    undone: bool = Field(False, description="An undo took the variables back to before this cell.")
    by: Literal["person"] | None = Field(
        None, description="`person`: run by hand from a Jupyter client (JupyterLab, VS Code) attached to "
                          "the conversation.")


class CellList(BaseModel):
    """``GET /sessions/{id}/cells``."""

    session: SessionOut
    cells: list[CellOut]


class AskRequest(_Strict):
    """Body of ``POST /sessions/{id}/ask``."""

    question: str = Field(..., min_length=1, max_length=20_000)
    files: list[str] = Field(default_factory=list, max_length=50,
                             description="Names of files already uploaded to the session.")


class EdaRequest(_Strict):
    """Body of ``POST /sessions/{id}/eda``."""

    file: str = Field(..., min_length=1, max_length=500, description="An uploaded file's name.")
    target: str | None = Field(None, max_length=500, description="A column to explain (optional).")
    sheet: str | None = Field(None, max_length=500, description="The Excel sheet to profile (optional).")


class ServerInfo(BaseModel):
    """``GET /api/info``: what this server offers."""

    version: str
    ask_available: bool
    max_upload_bytes: int
    max_timeout_s: float
    default_timeout_s: float
    auth: bool = True
    max_background_timeout_s: float = Field(86_400.0, description="How long a background run may last.")
    cpus: float | None = Field(None, description="Each session's CPU share in cores (null: none).")
    tenant_cpus: float | None = Field(None, description="The CPU of all of one tenant's sessions together, "
                                                        "in cores (null: no budget).")
    cpu_policy: str = Field("quota", description="How the shares are enforced: quota, weight or burst.")


class Problem(BaseModel):
    """An error response."""

    detail: str
