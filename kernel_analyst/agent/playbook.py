"""The built-in EDA playbook: a fixed, well-made first look at a table, no LLM needed.

Every step is a real cell run through :meth:`KernelSession.execute`, so it lands in the
audit notebook with its outputs, and ``kernel-analyst verify`` can re-run it. Headings
and the closing summary of findings are markdown cells. How the file is read is decided
on the host from its bytes (see ``_loader``) and written out as one plain
``pd.read_csv(...)`` call.

    async with SessionManager("runs") as manager:
        session = await manager.session("eda-penguins")
        report = await run_playbook(session, "penguins.csv")
        print(report.summary_markdown)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..kernels import Execution, KernelSession, VariableFetchError
from . import _eda_cells as cells
from ._eda_cells import PlaybookOptions
from ._loader import LoadPlan, UnreadableFileError, detect

__all__ = ["STEPS", "EdaReport", "PlannedCell", "PlaybookOptions", "Progress", "StepResult",
           "UnreadableFileError", "plan_cells", "run_playbook"]


@dataclass(frozen=True)
class _Step:
    name: str
    title: str
    intro: str
    code: Callable[[PlaybookOptions, LoadPlan], str]


_STEPS: tuple[_Step, ...] = (
    _Step("shape", "Shape and memory", "", lambda o, p: cells.shape(o)),
    _Step("dtypes", "Column types", "", lambda o, p: cells.dtypes(o)),
    _Step("missing", "Missing values", "Missing cells per column.", lambda o, p: cells.missing(o)),
    _Step("duplicates", "Duplicate rows", "Rows identical in every column.",
          lambda o, p: cells.duplicates(o)),
    _Step("numeric", "Numeric summary", "", lambda o, p: cells.numeric(o)),
    _Step("histograms", "Distributions", "Histograms of the numeric columns.",
          lambda o, p: cells.histograms(o)),
    _Step("categories", "Top values", "The most frequent values of the categorical columns.",
          lambda o, p: cells.categories(o)),
    _Step("dates", "Date ranges", "", lambda o, p: cells.dates(o, (*p.dates, *p.utc_dates))),
    _Step("correlations", "Correlations", "Pearson correlation of the numeric columns.",
          lambda o, p: cells.correlations(o)),
    _Step("outliers", "Outliers", "Values outside the interquartile-range fences, per numeric column.",
          lambda o, p: cells.outliers(o)),
)
STEPS: tuple[str, ...] = tuple(s.name for s in _STEPS)
"""Names of the analysis steps, in order (setup and loading always run first)."""
_NEEDS_SAMPLE = ("histograms", "correlations")  # they use the `sample` that "shape" defines


@dataclass(frozen=True)
class StepResult:
    """The outcome of one playbook cell."""

    name: str
    """Step name (``setup``, ``load``, then names from ``STEPS``)."""
    title: str
    """Heading shown in the notebook."""
    status: str
    """``Execution.status``: ``ok``, ``error``, ``timeout`` or ``died``."""
    duration_s: float
    """Wall-clock seconds of the cell."""
    error: str | None = None
    """``ename: evalue`` when the cell failed."""

    @property
    def ok(self) -> bool:
        """True when the cell ran without error."""
        return self.status == "ok"


@dataclass(frozen=True)
class Progress:
    """Sent to ``on_progress`` before (``result is None``) and after each step."""

    index: int
    """1-based position of the step."""
    total: int
    """Number of steps in this run."""
    title: str
    """The step's heading."""
    result: StepResult | None = None
    """None when the step starts; its result when it has finished."""


@dataclass
class EdaReport:
    """What one playbook run did and found."""

    file: str
    """The data file's name in the session."""
    notebook_path: Path
    """The session's live audit notebook."""
    plan: LoadPlan | None = None
    """How the file was read (None when it could not be)."""
    steps: list[StepResult] = field(default_factory=list)
    """Every cell's outcome, in order."""
    findings: dict[str, Any] = field(default_factory=dict)
    """The numbers the steps recorded (shape, missing, duplicates, correlations ...)."""
    summary_markdown: str = ""
    """The closing summary, as written to the notebook."""
    error: str | None = None
    """Why the file could not be read, or which step failed."""

    @property
    def ok(self) -> bool:
        """True when the file was read and every step ran without error."""
        return self.error is None and all(s.ok for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        data = asdict(self)
        data["notebook_path"] = str(self.notebook_path)
        data["ok"] = self.ok
        return data


ProgressCallback = Callable[[Progress], Any]


async def run_playbook(
    session: KernelSession,
    source: str | Path,
    *,
    name: str | None = None,
    options: PlaybookOptions | None = None,
    on_progress: ProgressCallback | None = None,
) -> EdaReport:
    """Upload ``source`` into ``session`` and run the EDA playbook on it.

    ``name`` is the file's name in the session (default: its own name). A file that is
    not a readable table gets a markdown cell saying why and ``report.error``; no code
    cell fails. Raises only for infrastructure failures (closed session, dead kernel
    that cannot restart, unsafe name, missing source file).
    """
    opts = options or PlaybookOptions()
    _selected(opts)  # refuse unknown steps before anything runs
    path = Path(source)
    info = await session.upload(path, name=name)
    report = EdaReport(file=info.name, notebook_path=session.notebook_path)
    await session.add_markdown(f"# Exploratory analysis of `{info.name}`\n\n"
                               "Written by the kernel-analyst EDA playbook: every code cell below ran "
                               "in this notebook's kernel, in order.", playbook="eda")
    try:
        plan = await asyncio.to_thread(detect, path, name=info.name)
    except UnreadableFileError as exc:
        report.error = str(exc)
        await session.add_markdown(f"**Could not read `{info.name}` as a table.** {exc}", playbook="eda")
        return report
    report.plan = plan
    await _run_steps(session, report, plan, opts, on_progress)
    await _summarise(session, report)
    return report


def _selected(opts: PlaybookOptions) -> list[_Step]:
    if opts.steps is None:
        return list(_STEPS)
    unknown = set(opts.steps) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown playbook steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    wanted = set(opts.steps) | ({"shape"} if set(opts.steps) & set(_NEEDS_SAMPLE) else set())
    return [s for s in _STEPS if s.name in wanted]


@dataclass(frozen=True)
class PlannedCell:
    """One step of a run, before it runs: its heading and its code."""

    step: str
    """Step name (``setup``, ``load``, then names from ``STEPS``)."""
    title: str
    """Heading (no heading cell for ``setup``)."""
    intro: str
    """Markdown under the heading."""
    code: str
    """The code cell's source."""


def plan_cells(plan: LoadPlan, options: PlaybookOptions | None = None) -> list[PlannedCell]:
    """The cells a run with ``options`` executes for a file read by ``plan``, in order."""
    opts = options or PlaybookOptions()
    return [
        PlannedCell("setup", "Setup", "", cells.SETUP),
        PlannedCell("load", "Loading", _loading_markdown(plan), plan.code()),
        *(PlannedCell(s.name, s.title, s.intro, s.code(opts, plan)) for s in _selected(opts)),
    ]


async def _run_steps(session: KernelSession, report: EdaReport, plan: LoadPlan,
                     opts: PlaybookOptions, on_progress: ProgressCallback | None) -> None:
    planned = plan_cells(plan, opts)
    for index, cell in enumerate(planned, start=1):
        await _notify(on_progress, Progress(index, len(planned), cell.title))
        if cell.step != "setup":
            heading = f"## {cell.title}" + (f"\n\n{cell.intro}" if cell.intro else "")
            await session.add_markdown(heading, playbook="eda", step=cell.step)
        ex = await session.execute(cell.code, timeout=opts.cell_timeout_s)
        result = _result(cell.step, cell.title, ex)
        report.steps.append(result)
        await _notify(on_progress, Progress(index, len(planned), cell.title, result))
        if not result.ok and cell.step in ("setup", "load", "shape"):
            report.error = f"step {cell.title!r} failed: {result.error}"
            return


def _result(step: str, title: str, ex: Execution) -> StepResult:
    error = str(ex.error) if ex.error else (None if ex.ok else f"cell {ex.status}")
    return StepResult(step, title, ex.status, round(ex.duration_s, 3), error)


async def _notify(callback: ProgressCallback | None, progress: Progress) -> None:
    if callback is None:
        return
    outcome = callback(progress)
    if asyncio.iscoroutine(outcome):
        await outcome


def _loading_markdown(plan: LoadPlan) -> str:
    notes = "\n".join(f"- {note}" for note in plan.notes if note)
    return ("Read options detected from the file's bytes; the cell states each one, so "
            f"rerunning it loads the file the same way.\n\n{notes}")


async def _summarise(session: KernelSession, report: EdaReport) -> None:
    if report.error is not None:
        await session.add_markdown(f"## Summary\n\nThe playbook stopped: {report.error}", playbook="eda")
        return
    try:
        found = await session.fetch("findings")
    except VariableFetchError:
        found = {}
    report.findings = found if isinstance(found, dict) else {}
    report.summary_markdown = summary_markdown(report)
    await session.add_markdown(report.summary_markdown, playbook="eda", step="summary")


# -- the summary ------------------------------------------------------------------------


def summary_markdown(report: EdaReport) -> str:
    """The closing "Summary of findings" markdown for a finished run."""
    f = report.findings
    lines = [f"## Summary of findings: `{report.file}`", ""]
    for item in (_size(f), _types(f), _missing(f), _duplicates(f), _correlations(f), _outliers(f),
                 _dates(f), _loading(report.plan), _failed(report.steps)):
        if item:
            lines.append(f"- {item}")
    return "\n".join(lines)


def _size(f: dict[str, Any]) -> str:
    if "shape" not in f:
        return ""
    rows, cols = f["shape"]
    return f"**Size:** {rows:,} rows x {cols:,} columns ({f.get('memory_mib', 0):,.1f} MiB in memory)."


def _types(f: dict[str, Any]) -> str:
    kinds: dict[str, int] = f.get("dtypes", {})
    if not kinds:
        return ""
    ordered = sorted(kinds.items(), key=lambda kv: -kv[1])
    return "**Column types:** " + ", ".join(f"{n} {k}" for k, n in ordered) + "."


def _missing(f: dict[str, Any]) -> str:
    if "missing_cells" not in f:
        return ""
    if not f["missing_cells"]:
        return "**Missing values:** none."
    rows = max(f.get("shape", [1])[0], 1)
    worst = ", ".join(f"`{c}` {n:,} ({100 * n / rows:.1f}%)" for c, n in f.get("missing", {}).items())
    return (f"**Missing values:** {f['missing_cells']:,} cells in {f.get('missing_columns', 0)} column(s); "
            f"most in {worst}.")


def _duplicates(f: dict[str, Any]) -> str:
    if "duplicates" not in f:
        return ""
    n = f["duplicates"]
    return "**Duplicate rows:** none." if not n else f"**Duplicate rows:** {n:,}."


def _correlations(f: dict[str, Any]) -> str:
    pairs = f.get("correlations") or []
    strong = [p for p in pairs if abs(p[2]) >= 0.5][:3]
    if not pairs:
        return ""
    if not strong:
        return "**Correlations:** no pair of numeric columns has |r| >= 0.5."
    shown = "; ".join(f"`{a}` ~ `{b}` r = {r:+.2f}" for a, b, r in strong)
    return f"**Strongest correlations:** {shown}."


def _outliers(f: dict[str, Any]) -> str:
    if "outliers" not in f:
        return ""
    flagged = f["outliers"]
    if not flagged:
        return "**Outliers (IQR rule):** none."
    return "**Outliers (IQR rule):** " + "; ".join(f"`{c}` {n:,} ({p:g}%)" for c, n, p in flagged) + "."


def _dates(f: dict[str, Any]) -> str:
    spans: dict[str, list[str]] = f.get("dates") or {}
    if not spans:
        return ""
    return "**Dates:** " + "; ".join(f"`{c}` from {a} to {b}" for c, (a, b) in spans.items()) + "."


def _loading(plan: LoadPlan | None) -> str:
    if plan is None:
        return ""
    parts = [f"encoding {plan.encoding}", f"delimiter {plan.sep!r}"]
    if plan.decimal != ".":
        parts.append("decimal comma")
    if plan.skiprows:
        parts.append(f"{plan.skiprows} line(s) above the header skipped")
    if plan.ragged is not None:
        parts.append(f"{plan.ragged.count:,} ragged row(s) kept (see Loading)")
    return "**Loading:** " + ", ".join(parts) + "."


def _failed(steps: list[StepResult]) -> str:
    failed = [s for s in steps if not s.ok]
    if not failed:
        return ""
    return "**Steps that failed:** " + "; ".join(f"{s.title} ({s.error})" for s in failed) + "."

