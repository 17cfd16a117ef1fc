"""The ``kernel-analyst`` command: parses arguments, calls the library, prints.

Commands: ``eda`` (the built-in playbook, no LLM), ``verify`` (re-run an audit notebook),
``ask`` (the agent answers one question), ``chat`` (a code console, or the agent with
``--model``), plus ``serve`` and ``mcp`` when the server package is installed. Flags
shared with ``serve`` and ``mcp`` come from :mod:`kernel_analyst.frontend.flags`.

Exit codes: 0 success, 1 failure (an error, a notebook that does not reproduce, an
unreadable file, a model that cannot be reached), 2 bad usage, 130 interrupted. Every
error is one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import re
import sys
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from .frontend.errors import RunFailedError, UsageError, classify
from .frontend.flags import add_debug_flag, add_kernel_flags, add_model_flags, kernel_settings, model_settings
from .frontend.models import build_analyst, describe_model_failure, load_model
from .frontend.outcomes import eda_outcome
from .frontend.sessions import need_file, open_manager, upload_limit_mb
from .frontend.settings import ModelSettings, package_version
from .frontend.terminal import StepPrinter, answer_text, progress_line
from .kernels import ConversationInfo, KernelSession, Limits

PROG = "kernel-analyst"


# -- parsing -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(prog=PROG, description="A stateful Jupyter-kernel data-analysis "
                                     "agent with an .ipynb audit trail.")
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    add_debug_flag(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    shared = argparse.ArgumentParser(add_help=False)
    add_kernel_flags(shared)
    add_debug_flag(shared)
    _add_eda(commands, shared)
    _add_verify(commands, shared)
    _add_ask(commands, shared)
    _add_chat(commands, shared)
    _add_server_commands(commands)
    return parser


def _add_eda(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("eda", parents=[shared], help="exploratory analysis of a data file (no LLM)",
                            description="Run the built-in EDA playbook on a table and write the report "
                                        "notebook (summary first), and optionally an HTML report.")
    p.add_argument("data", type=Path, metavar="DATA", help="CSV / TSV / delimited text, .xlsx / .xls, "
                   ".parquet, .json / .jsonl; any of them .gz / .bz2 / .xz / .zip")
    p.add_argument("-o", "--output", type=Path, metavar="OUT.ipynb",
                   help="notebook to write (default: DATA's name + -eda.ipynb, in the current directory)")
    p.add_argument("--html", type=Path, metavar="OUT.html",
                   help="also write an HTML report (code folded away)")
    p.add_argument("--steps", metavar="NAMES", help="comma-separated subset of the playbook's steps")
    p.add_argument("--target", metavar="COLUMN", help="a column to explain: every feature against it, ranked")
    p.add_argument("--sheet", metavar="NAME", help="the Excel sheet to profile (name or 0-based position)")
    p.add_argument("--engine", choices=("auto", "pandas", "duckdb"), default="auto",
                   help="pandas loads the table; duckdb profiles it out of core, in bounded memory; auto "
                        "(default) uses duckdb for files over an eighth of the kernel's memory limit")
    p.set_defaults(func=_cmd_eda)


def _add_verify(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("verify", parents=[shared], help="re-run an audit notebook and compare",
                            description="Re-execute the notebook's code cells in a fresh session with "
                                        "the same input files; exit 0 only if every cell reproduces.")
    p.add_argument("notebook", type=Path, metavar="AUDIT.ipynb")
    p.add_argument("-o", "--output", type=Path, metavar="RERUN.ipynb", help="write the re-executed notebook")
    p.add_argument("--data-dir", type=Path, action="append", default=[], metavar="DIR",
                   help="where to find the input files (repeatable; the notebook's folder is searched too)")
    p.add_argument("--rerun-changed", action="store_true",
                   help="re-run even when an input file changed, and report the cells and the answers' "
                        "numbers that moved")
    p.set_defaults(func=_cmd_verify)


def _add_ask(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("ask", parents=[shared], help="answer one question about data files",
                            description="The agent answers QUESTION, running code in a kernel; steps "
                                        "stream to the terminal.")
    p.add_argument("items", nargs="+", metavar="DATA... QUESTION", help="data files, then the question")
    add_model_flags(p, required=True)
    p.add_argument("-o", "--output", type=Path, metavar="OUT.ipynb", help="write the audit notebook here")
    p.add_argument("--conversation", default="ask", metavar="ID",
                   help="the conversation to continue under --session-dir (its notebook, files and "
                        "variables; default: %(default)s)")
    p.set_defaults(func=_cmd_ask)


def _add_chat(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("chat", parents=[shared], help="a code console, or the agent with --model",
                            description="One kernel for a whole conversation. Without --model every "
                                        "input runs as a cell; with --model it is a question for the "
                                        "agent. Commands: /files, /vars, /save [PATH], /eda FILE, "
                                        "/traceback, /reset, /undo [N], /help, /quit.")
    p.add_argument("data", nargs="*", type=Path, metavar="DATA", help="data files to upload first")
    p.add_argument("--resume", type=Path, metavar="CONVERSATION_DIR",
                   help="continue the conversation kept in this directory (one under --session-dir): "
                        "the same notebook, files and variables")
    add_model_flags(p, required=False, purpose="without it, chat is a code console")
    p.set_defaults(func=_cmd_chat)


def _add_server_commands(commands: Any) -> None:
    """``serve`` and ``mcp`` come from ``kernel_analyst.server`` when it is installed."""
    try:
        server = importlib.import_module("kernel_analyst.server")
    except ImportError:
        return
    add_cli = getattr(server, "add_cli", None)
    if callable(add_cli):
        add_cli(commands)


# -- entry points --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    debug = bool(getattr(args, "debug", False))
    with _logging(debug):
        try:
            return int(args.func(args))
        except (Exception, KeyboardInterrupt) as exc:
            failure = classify(exc)
            if debug:
                traceback.print_exc()
            hint = "" if failure.expected or debug else " (run with --debug for the traceback)"
            _err(failure.message + hint)
            return failure.exit_code


def main_entry() -> None:
    """The console script."""
    sys.exit(main())


def _err(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


class _OneLine(logging.Formatter):
    """Log records as one line each: no traceback (``--debug`` shows them)."""

    def formatException(self, ei: Any) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        record.exc_text = ""
        return super().format(record).split("\n", 1)[0]


@contextlib.contextmanager
def _logging(debug: bool) -> Iterator[None]:
    """Log to stderr for one command: everything with tracebacks under ``--debug``, else
    errors only, one line each (a model call that fails is reported once, by the command)."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    if debug:
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        handler.setLevel(logging.DEBUG)
    else:
        handler.setFormatter(_OneLine(f"{PROG}: %(levelname)s: %(message)s"))
        handler.setLevel(logging.ERROR)
    old_level = root.level
    root.addHandler(handler)
    if debug:
        root.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


# -- eda ----------------------------------------------------------------------------------------


def _cmd_eda(args: argparse.Namespace) -> int:
    from .eda import PlaybookOptions, selected_steps

    data = need_file(args.data, max_upload_mb=upload_limit_mb(kernel_settings(args)))
    steps = tuple(s.strip() for s in args.steps.split(",") if s.strip()) if args.steps else None
    options = PlaybookOptions(steps=steps, target=args.target, sheet=args.sheet, engine=args.engine)
    selected_steps(options)  # unknown step names fail before a kernel starts
    output = args.output or Path(f"{data.name.split('.')[0] or data.stem}-eda.ipynb")
    return asyncio.run(_eda(args, data, output, options))


async def _eda(args: argparse.Namespace, data: Path, output: Path, options: Any) -> int:
    from .eda import detect, run_playbook, write_notebook

    # The file is read on the host while the kernel starts; the report's writers are
    # imported while the cells run (the host is idle then). A file that cannot be read
    # stops the run before anything is written.
    async with open_manager(kernel_settings(args)) as manager:
        starting = asyncio.create_task(manager.session(f"eda-{uuid.uuid4().hex[:8]}"))
        try:
            plan = await asyncio.to_thread(detect, data, sheet=options.sheet)
        finally:
            session = await starting
        warming = asyncio.create_task(asyncio.to_thread(_warm_report_imports, html=bool(args.html)))
        report = await run_playbook(session, data, options=options, on_progress=_print_progress, plan=plan)
        outcome = eda_outcome(report)
        if not all(s.ok for s in report.steps if s.name in ("setup", "load")):
            raise RunFailedError(outcome.summary)
        await warming
        written = await write_notebook(session, output)
        # The report is written and the kernel was only this run's: no polite shutdown.
        await manager.close(session.id, reason=None, now=True)
        page = _to_html(written, args.html) if args.html else None
    print(_plain(report.summary_markdown) or outcome.summary)
    print(f"\nnotebook: {written}")
    if page is not None:
        print(f"html: {page}")
    if outcome.status != "ok":
        _err(outcome.summary)
    return 0 if outcome.status == "ok" else 1


def _warm_report_imports(*, html: bool) -> None:
    """Import what writing the report needs (nbformat's schema checks take ~1 s to import)."""
    for name in ("nbformat", *(("markdown_it", "pygments.lexers.python") if html else ())):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _print_progress(progress: Any) -> None:
    line = progress_line(progress)
    if line:
        print(line, file=sys.stderr, flush=True)


def _plain(markdown: str) -> str:
    """Markdown made readable on a terminal: no ``**`` or backticks, headings bare, tables as rows."""
    text = re.sub(r"\*\*|`", "", markdown)
    text = re.sub(r"^\| --- .*\n", "", text, flags=re.MULTILINE)
    text = re.sub(r"^\| (.*) \|$", lambda m: "  " + m.group(1).replace(" | ", "  "), text, flags=re.MULTILINE)
    return re.sub(r"^#+ ", "", text, flags=re.MULTILINE).replace("\\|", "|")


def _to_html(notebook: Path, target: Path) -> Path:
    from .eda import write_html

    return write_html(notebook, target)


# -- verify -------------------------------------------------------------------------------------


def _cmd_verify(args: argparse.Namespace) -> int:
    from .kernels.verify import read_notebook

    notebook = need_file(args.notebook)
    recorded = read_notebook(notebook).get("metadata", {}).get("kernel_analyst", {}).get("limits")
    base = Limits.from_dict(recorded) if isinstance(recorded, dict) else None
    return asyncio.run(_verify(args, notebook, kernel_settings(args).limits(base)))


async def _verify(args: argparse.Namespace, notebook: Path, limits: Limits) -> int:
    from .kernels.verify import verify_notebook

    async with open_manager(kernel_settings(args), limits) as manager:
        report = await verify_notebook(notebook, manager, data_dirs=args.data_dir, rerun_path=args.output,
                                       on_cell=_print_cell, rerun_changed_inputs=args.rerun_changed)
    for check in report.inputs:
        if check.status != "ok":
            print(check.describe())
    for cell in report.failures:
        print(cell.describe())
    for answer in report.answers:
        print(answer.describe())
    total = len(report.cells)
    moved = report.moved_answers
    answers = f"; {len(moved)} of {len(report.answers)} answers' numbers moved" if moved else ""
    if not report.inputs_ok and not report.changed_inputs_rerun:
        print("NOT verified: input files are missing or changed (see above; --rerun-changed re-runs "
              "on the changed files and reports what moved).")
    elif report.reproduced:
        print(f"reproduced: all {total} code cells match.")
    else:
        print(f"NOT reproduced: {len(report.failures)} of {total} code cells differ{answers}.")
    if report.rerun_path:
        print(f"rerun notebook: {report.rerun_path}")
    return 0 if report.reproduced else 1


def _print_cell(check: Any) -> None:
    mark = "ok" if check.reproduced else "DIFFERS"
    print(f"cell {check.index:>3} [{check.execution_count}] {mark}", file=sys.stderr, flush=True)


# -- ask and chat -------------------------------------------------------------------------------


def _load_model(settings: ModelSettings) -> Any:
    """The chat model (a seam for tests, which give a scripted one)."""
    return load_model(settings)


def _cmd_ask(args: argparse.Namespace) -> int:
    if len(args.items) < 2:
        raise UsageError("ask needs at least one data file and a question")
    *paths, question = args.items
    files = [need_file(Path(p), max_upload_mb=upload_limit_mb(kernel_settings(args))) for p in paths]
    settings = model_settings(args)
    model = _load_model(settings)
    return asyncio.run(_ask(args, settings, model, files, question))


async def _ask(args: argparse.Namespace, settings: ModelSettings, model: Any, files: list[Path],
               question: str) -> int:
    conversation = args.conversation
    async with open_manager(kernel_settings(args), recovery="replay") as manager:
        analyst = build_analyst(model, manager, settings)
        printer = StepPrinter(sys.stdout)
        answer = await analyst.ask(conversation, question, files=files, on_event=printer.dispatch)
        written = await (await manager.session(conversation)).export(args.output) if args.output else None
    if answer.stop_reason == "error":
        if answer.text:  # the partial answer the cells support
            print(f"\n{answer_text(answer, shown=printer.last_text)}")
        if written is not None:
            print(f"\nnotebook: {written}")
        raise RunFailedError(_answer_error(answer.error or "", settings))
    print(f"\n{answer_text(answer, shown=printer.last_text)}")
    if answer.stop_reason != "answered":
        print(f"\n[stopped: {answer.stop_reason}]")
    if written is not None:
        print(f"\nnotebook: {written}")
    return 0 if answer.stop_reason == "answered" else 1


def _answer_error(error: str, settings: ModelSettings) -> str:
    prefix = "the model call failed: "
    if error.startswith(prefix):
        return describe_model_failure(error[len(prefix):], settings)
    return error


def _cmd_chat(args: argparse.Namespace) -> int:
    files = [need_file(p, max_upload_mb=upload_limit_mb(kernel_settings(args))) for p in args.data]
    settings = model_settings(args)
    resume = _resumed_conversation(args.resume) if args.resume is not None else None
    model = _load_model(settings) if settings.spec else None
    return asyncio.run(_chat(args, settings, model, files, resume))


def _resumed_conversation(directory: Path) -> ConversationInfo:
    """The conversation kept in ``directory`` (``chat --resume``), or a one-line error."""
    if not directory.is_dir():
        raise UsageError(f"--resume {directory}: not a directory")
    info = ConversationInfo.read(directory / "audit.ipynb")
    if info is None:
        raise UsageError(f"--resume {directory}: no conversation there (no kernel-analyst audit.ipynb)")
    return info


async def _chat(args: argparse.Namespace, settings: ModelSettings, model: Any, files: list[Path],
                resume: ConversationInfo | None) -> int:
    from .frontend.console import Console

    kernels = kernel_settings(args)
    conversation = "chat"
    if resume is not None:
        kernels = replace(kernels, session_dir=resume.directory.parent)
        conversation = resume.id
    async with open_manager(kernels, recovery="replay") as manager:
        session = await manager.session(conversation)
        if resume is not None:
            await _report_resume(session)
        for path in files:
            await session.upload(path)
        analyst = build_analyst(model, manager, settings) if model is not None else None
        console = Console(session, conversation, sys.stdout, analyst=analyst)
        if files:
            print(f"uploaded: {', '.join(p.name for p in files)}", flush=True)
        return await console.run()


async def _report_resume(session: KernelSession) -> None:
    """Bring the variables back now, and say what came back."""
    names = [v.name for v in await session.variables()]
    report = session.last_recovery
    print(f"resumed conversation {session.id!r} ({session.notebook_path})", flush=True)
    print(report.describe() if report is not None else f"variables: {', '.join(names) or 'none'}",
          flush=True)


if __name__ == "__main__":  # pragma: no cover
    main_entry()


__all__ = ["build_parser", "main", "main_entry"]
