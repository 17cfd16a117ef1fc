"""The built-in EDA playbook: a fixed, well-made first look at a table, no LLM needed.

Every step is a real cell run through :meth:`KernelSession.execute`, so it lands in the
audit notebook with its outputs, and ``kernel-analyst verify`` can re-run it. Headings
and the summary of findings are markdown cells; :func:`~kernel_analyst.eda.report.write_notebook`
puts the summary first in the exported report. How the file is read is decided on the
host from its bytes (see :mod:`.loader`) and written out as one plain pandas call.

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
from . import _cells as cells
from . import _cells_plots as plots
from . import _cells_relations as relations
from ._delimited import LoadPlan
from ._outofcore import EngineChoice, choose_engine, load_code, pandas_names
from ._source import sniff
from .exceptions import UnreadableFileError
from .loader import Plan, detect
from .options import PlaybookOptions
from .summary import summary_markdown

__all__ = ["STEPS", "EdaReport", "PlannedCell", "PlaybookOptions", "Progress", "StepResult",
           "UnreadableFileError", "plan_cells", "run_playbook", "selected_steps"]


@dataclass(frozen=True)
class _Step:
    name: str
    title: str
    intro: str
    code: Callable[[PlaybookOptions, Plan, str], str]
    """The step's cell for an engine (``pandas`` or ``duckdb``): one template, each engine's holes."""
    needs: tuple[str, ...] = ()


_STEPS: tuple[_Step, ...] = (
    _Step("overview", "Overview", "Size, and one row per column: type, kind, present, missing and distinct "
          "values.", lambda o, p, e: cells.overview(o, e)),
    _Step("alerts", "Alerts", "The checks profiling tools make, each with the rule it applies, most severe "
          "first.", lambda o, p, e: cells.alerts(o, e)),
    _Step("missing", "Missing values", "Missing cells per column, where they fall, and which columns go "
          "missing together.", lambda o, p, e: cells.missing(o, e)),
    _Step("duplicates", "Duplicate rows", "Rows identical in every column.",
          lambda o, p, e: cells.duplicates(o, e)),
    _Step("numeric", "Numeric summary", "Counts, quantiles, share of zeros and skewness.",
          lambda o, p, e: cells.numeric(o, e)),
    _Step("distributions", "Distributions", "Histograms of the numeric columns; skewed columns on a log "
          "axis (all values positive) or their 1-99% range.", lambda o, p, e: plots.distributions(o, e)),
    _Step("categories", "Top values", "The most frequent values of the categorical columns; missing values "
          "are a bar of their own.", lambda o, p, e: plots.categories(o, e)),
    _Step("dates", "Dates", "Date ranges, rows over time, and numeric columns over time.",
          lambda o, p, e: plots.dates(o, e, (*p.dates, *p.utc_dates))),
    _Step("associations", "Associations", "Pearson r and Spearman ρ (numeric pairs), Cramér's V "
          "(categorical pairs), correlation ratio η (categorical-numeric), each with its row count n.",
          lambda o, p, e: relations.associations(o, e)),
    _Step("scatter", "Strongest pairs", "Scatter plots of the most strongly associated numeric pairs.",
          lambda o, p, e: relations.scatter(o, e), needs=("associations",)),
    _Step("outliers", "Outliers", "Values outside the interquartile-range fences, per numeric column.",
          lambda o, p, e: plots.outliers(o, e)),
    _Step("profiles", "Column profiles", "The columns with alerts or strong associations, in full.",
          lambda o, p, e: plots.profiles(o, e), needs=("alerts", "associations")),
    _Step("target", "Target", "The target's distribution and every feature against it, ranked by "
          "strength of association.", lambda o, p, e: relations.target(o, e)),
)
STEPS: tuple[str, ...] = tuple(s.name for s in _STEPS)
"""Names of the analysis steps, in order (setup, loading and the overview always run;
``target`` only with ``PlaybookOptions.target``)."""
_ALIASES = {"shape": "overview", "dtypes": "overview", "histograms": "distributions",
            "correlations": "associations"}
"""Step names of earlier versions, still accepted."""


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
    plan: Plan | None = None
    """How the file was read (None when it could not be)."""
    steps: list[StepResult] = field(default_factory=list)
    """Every cell's outcome, in order."""
    findings: dict[str, Any] = field(default_factory=dict)
    """The numbers the steps recorded (shape, alerts, missing, associations ...)."""
    summary_markdown: str = ""
    """The summary of findings, as written to the notebook."""
    error: str | None = None
    """Why the file could not be read, or which step failed."""
    engine: str = "pandas"
    """``pandas`` (the table was loaded) or ``duckdb`` (profiled out of core)."""

    @property
    def ok(self) -> bool:
        """True when the file was read and every step ran without error."""
        return self.error is None and all(s.ok for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        data = asdict(self)
        data["plan"] = self.plan.to_dict() if self.plan is not None else None
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
    plan: Plan | None = None,
) -> EdaReport:
    """Upload ``source`` into ``session`` and run the EDA playbook on it.

    ``name`` is the file's name in the session (default: its own name); ``plan`` a
    loading plan already made by :func:`detect` for it (default: made here). A file that
    is not a readable table gets a markdown cell saying why and ``report.error``; no code
    cell fails. Raises only for infrastructure failures (closed session, dead kernel
    that cannot restart, unsafe name, missing source file) and for unknown steps.
    """
    opts = options or PlaybookOptions()
    _selected(opts)  # refuse unknown steps before anything runs
    path = Path(source)
    info = await session.upload(path, name=name)
    report = EdaReport(file=info.name, notebook_path=session.notebook_path)
    await session.add_markdown(f"# Exploratory analysis of `{info.name}`\n\n"
                               "Written by the kernel-analyst EDA playbook: every code cell below ran "
                               "in this notebook's kernel, in order.", playbook="eda", step="title")
    try:
        chosen = plan if plan is not None else await asyncio.to_thread(detect, path, name=info.name,
                                                                       sheet=opts.sheet)
    except UnreadableFileError as exc:
        report.error = str(exc)
        await session.add_markdown(f"**Could not read `{info.name}` as a table.** {exc}", playbook="eda")
        return report
    report.plan = chosen
    await _run_steps(session, report, chosen, opts, on_progress, path)
    await _summarise(session, report)
    return report


def selected_steps(options: PlaybookOptions) -> list[str]:
    """The steps a run with ``options`` executes, in order (ValueError for unknown names)."""
    return [s.name for s in _selected(options)]


def _selected(opts: PlaybookOptions) -> list[_Step]:
    wanted_steps = [s for s in _STEPS if s.name != "target" or opts.target is not None]
    if opts.steps is None:
        return wanted_steps
    names = {_ALIASES.get(n, n) for n in opts.steps}
    unknown = names - set(STEPS)
    if unknown:
        raise ValueError(f"unknown playbook steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    names |= {"overview"} | {need for s in _STEPS if s.name in names for need in s.needs}
    return [s for s in wanted_steps if s.name in names]


@dataclass(frozen=True)
class PlannedCell:
    """One step of a run, before it runs: its heading and its code."""

    step: str
    """Step name (``setup``, ``load``, then names from ``STEPS``)."""
    title: str
    """The heading of the step's markdown cell."""
    intro: str
    """Markdown under the heading."""
    code: str
    """The code cell's source."""


def plan_cells(plan: Plan, options: PlaybookOptions | None = None, *, engine: EngineChoice | None = None,
               names: list[str] | None = None) -> list[PlannedCell]:
    """The cells a run with ``options`` executes for a file read by ``plan``, in order.

    ``engine`` (from :func:`~kernel_analyst.eda._outofcore.choose_engine`) says whether
    pandas loads the table (the default) or DuckDB profiles it out of core; ``names`` are
    the columns as pandas names them, for the out-of-core reader."""
    opts = options or PlaybookOptions()
    notes = _loading_markdown(plan, engine.reason if engine is not None else "")
    if engine is None or engine.engine == "pandas":
        kind, setup_intro, load = "pandas", _SETUP_INTRO, plan.code()
    else:
        kind, setup_intro, load = "duckdb", _SETUP_INTRO + _LARGE_INTRO, load_code(plan, engine, names)
    return [PlannedCell("setup", "Setup", setup_intro, cells.setup(opts, kind)),
            PlannedCell("load", "Loading", notes, load),
            *(PlannedCell(s.name, s.title, s.intro, s.code(opts, plan, kind)) for s in _selected(opts))]


def _engine(path: Path, plan: Plan, opts: PlaybookOptions,
            memory_mb: int | None) -> tuple[EngineChoice, list[str] | None]:
    """Which engine profiles the file, and (out of core) the columns as pandas names them."""
    choice = choose_engine(plan, path=path, memory_mb=memory_mb, engine=opts.engine,
                           threshold_bytes=opts.out_of_core_bytes)
    names = None
    if choice.engine == "duckdb" and isinstance(plan, LoadPlan):
        names = pandas_names(plan, sniff(path)[0])
    return choice, names


async def _run_steps(session: KernelSession, report: EdaReport, plan: Plan, opts: PlaybookOptions,
                     on_progress: ProgressCallback | None, path: Path) -> None:
    engine, names = await asyncio.to_thread(_engine, path, plan, opts, session.limits.memory_mb)
    report.engine = engine.engine
    planned = plan_cells(plan, opts, engine=engine, names=names)
    for index, cell in enumerate(planned, start=1):
        if cell.step == "target" and not await _target_exists(session, report, opts):
            return
        await _notify(on_progress, Progress(index, len(planned), cell.title))
        heading = f"## {cell.title}" + (f"\n\n{cell.intro}" if cell.intro else "")
        await session.add_markdown(heading, playbook="eda", step=cell.step)
        ex = await session.execute(cell.code, timeout=opts.cell_timeout_s)
        result = _result(cell.step, cell.title, ex)
        report.steps.append(result)
        await _notify(on_progress, Progress(index, len(planned), cell.title, result))
        if not result.ok and cell.step in ("setup", "load", "overview"):
            report.error = f"step {cell.title!r} failed: {result.error}"
            return


async def _target_exists(session: KernelSession, report: EdaReport, opts: PlaybookOptions) -> bool:
    """The target column must exist; a clear message (not an error cell) when it does not."""
    try:
        columns = (await session.fetch("findings")).get("columns", [])
    except VariableFetchError:
        columns = []
    if opts.target in columns:
        return True
    shown = ", ".join(f"`{c}`" for c in columns[:30])
    report.error = f"no column named {opts.target!r} for --target; the columns are {shown}"
    await session.add_markdown(f"**Target:** {report.error}.", playbook="eda", step="target")
    return False


def _result(step: str, title: str, ex: Execution) -> StepResult:
    error = str(ex.error) if ex.error else (None if ex.ok else f"cell {ex.status}")
    return StepResult(step, title, ex.status, round(ex.duration_s, 3), error)


async def _notify(callback: ProgressCallback | None, progress: Progress) -> None:
    if callback is None:
        return
    outcome = callback(progress)
    if asyncio.iscoroutine(outcome):
        await outcome


_SETUP_INTRO = ("Imports, the thresholds every alert below applies, and small helpers (one PNG per figure, "
                "Cramér's V, the correlation ratio).")


_LARGE_INTRO = (" Out of core: DuckDB, inside this kernel, computes the report's numbers in four passes over "
                "the file, in bounded memory; each cell says which numbers are exact, approximate or from "
                "the sample.")


def _loading_markdown(plan: Plan, engine_note: str = "") -> str:
    notes = "\n".join(f"- {note}" for note in (*plan.notes, engine_note) if note)
    return ("How to read the file was decided from its bytes; the cell states each choice, so "
            f"rerunning it loads the file the same way.\n\n{notes}")


async def _summarise(session: KernelSession, report: EdaReport) -> None:
    try:
        found = await session.fetch("findings")
    except VariableFetchError:
        found = {}
    report.findings = found if isinstance(found, dict) else {}
    report.summary_markdown = summary_markdown(report.file, report.findings, plan=report.plan,
                                               steps=report.steps, error=report.error)
    await session.add_markdown(report.summary_markdown, playbook="eda", step="summary")
