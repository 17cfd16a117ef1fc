"""The ``kernel-analyst`` command: parses arguments, calls the library, prints.

Commands: ``eda`` (the built-in playbook, no LLM), ``verify`` (re-run an audit notebook),
``ask`` and ``chat`` (the agent), plus ``serve`` and ``mcp`` when the server package is
installed. Exit codes: 0 success, 1 failure (an error, a notebook that does not
reproduce, an unreadable file), 2 bad usage. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import re
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from .kernels import KernelAnalystError, KernelBackend, Limits, SessionManager
from .kernels.limits import ISOLATION_LEVELS

PROG = "kernel-analyst"


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


# -- parsing -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(prog=PROG, description="A stateful Jupyter-kernel data-analysis "
                                     "agent with an .ipynb audit trail.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    shared = _shared_flags()
    _add_eda(commands, shared)
    _add_verify(commands, shared)
    _add_ask(commands, shared)
    _add_chat(commands, shared)
    _add_server_commands(commands)
    return parser


def _shared_flags() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    group = shared.add_argument_group("kernel options")
    group.add_argument("--isolation", choices=ISOLATION_LEVELS,
                       help="kernel isolation: none, process, sandbox, auto (default: auto)")
    group.add_argument("--timeout", type=float, metavar="SECONDS", help="time limit per cell (default 120)")
    group.add_argument("--memory", type=int, metavar="MB", help="kernel memory limit in MiB (default 4096)")
    group.add_argument("--session-dir", type=Path, metavar="DIR",
                       help="keep session files here (default: a temporary directory, removed at exit)")
    group.add_argument("--gateway", metavar="URL", help="run kernels on a Jupyter (Enterprise) Gateway; "
                       "token from KERNEL_ANALYST_GATEWAY_TOKEN")
    return shared


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
    p.set_defaults(func=_cmd_eda)


def _add_verify(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("verify", parents=[shared], help="re-run an audit notebook and compare",
                            description="Re-execute the notebook's code cells in a fresh session with "
                                        "the same input files; exit 0 only if every cell reproduces.")
    p.add_argument("notebook", type=Path, metavar="AUDIT.ipynb")
    p.add_argument("-o", "--output", type=Path, metavar="RERUN.ipynb", help="write the re-executed notebook")
    p.add_argument("--data-dir", type=Path, action="append", default=[], metavar="DIR",
                   help="where to find the input files (repeatable; the notebook's folder is searched too)")
    p.set_defaults(func=_cmd_verify)


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PROVIDER:MODEL",
                   help="e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:qwen2.5-coder")
    p.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server (vLLM, llama.cpp, Ollama)")
    p.add_argument("--max-steps", type=int, default=15, help="code steps per answer (default 15)")


def _add_ask(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("ask", parents=[shared], help="answer one question about data files",
                            description="The agent answers QUESTION, running code in a kernel; steps "
                                        "stream to the terminal.")
    p.add_argument("items", nargs="+", metavar="DATA... QUESTION", help="data files, then the question")
    _add_model_flags(p)
    p.add_argument("-o", "--output", type=Path, metavar="OUT.ipynb", help="write the audit notebook here")
    p.set_defaults(func=_cmd_ask)


def _add_chat(commands: Any, shared: argparse.ArgumentParser) -> None:
    p = commands.add_parser("chat", parents=[shared], help="a multi-turn conversation in one kernel",
                            description="Ask questions one after another in one kernel. Commands: "
                                        "/files, /vars, /save [PATH], /reset, /help, /quit.")
    p.add_argument("data", nargs="*", type=Path, metavar="DATA", help="data files to upload first")
    _add_model_flags(p)
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
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except (CliError, KernelAnalystError, OSError, ValueError) as exc:
        _err(_one_line(exc))
        return 1


def main_entry() -> None:
    """The console script."""
    sys.exit(main())


def _err(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


# -- sessions ---------------------------------------------------------------------------------


def _limits(args: argparse.Namespace, base: Limits | None = None) -> Limits:
    limits = base or Limits()
    changes: dict[str, Any] = {}
    if args.isolation:
        changes["isolation"] = args.isolation
    if args.timeout is not None:
        changes["timeout_s"] = args.timeout
    if args.memory is not None:
        changes["memory_mb"] = args.memory
    return limits.with_(**changes) if changes else limits


def _backend(args: argparse.Namespace) -> KernelBackend | None:
    if not args.gateway:
        return None
    try:
        gateway = importlib.import_module("kernel_analyst.kernels.backends.gateway")
    except ImportError as exc:
        raise CliError(f"--gateway needs remote-kernel support, which this installation lacks "
                       f"({exc})") from exc
    backend: KernelBackend | None = gateway.GatewayBackend.from_env(args.gateway)
    return backend


@contextlib.contextmanager
def _session_root(args: argparse.Namespace) -> Iterator[Path]:
    if args.session_dir is not None:
        yield args.session_dir
        return
    with tempfile.TemporaryDirectory(prefix="kernel-analyst-") as tmp:
        yield Path(tmp)


@contextlib.asynccontextmanager
async def _manager(args: argparse.Namespace, limits: Limits) -> AsyncIterator[SessionManager]:
    with _session_root(args) as root:
        async with SessionManager(root, limits=limits, backend=_backend(args)) as manager:
            yield manager


def _need_file(path: Path) -> Path:
    if not path.is_file():
        raise CliError(f"no such file: {path}")
    return path


# -- eda ----------------------------------------------------------------------------------------


def _cmd_eda(args: argparse.Namespace) -> int:
    from .eda import PlaybookOptions, selected_steps

    if args.data.is_dir():
        raise CliError(f"{args.data} is a directory; give one data file (CSV, Excel, Parquet, JSON)")
    data = _need_file(args.data)
    steps = tuple(s.strip() for s in args.steps.split(",") if s.strip()) if args.steps else None
    options = PlaybookOptions(steps=steps, target=args.target, sheet=args.sheet)
    selected_steps(options)  # unknown step names fail before a kernel starts
    output = args.output or Path(f"{data.name.split('.')[0] or data.stem}-eda.ipynb")
    return asyncio.run(_eda(args, data, output, options))


async def _eda(args: argparse.Namespace, data: Path, output: Path, options: Any) -> int:
    from .eda import detect, run_playbook, write_notebook

    # The file is read on the host while the kernel starts; the report's writers are
    # imported while the cells run (the host is idle then). An unreadable file stops the
    # run before anything is written.
    async with _manager(args, _limits(args)) as manager:
        starting = asyncio.create_task(manager.session(f"eda-{uuid.uuid4().hex[:8]}"))
        try:
            plan = await asyncio.to_thread(detect, data, sheet=options.sheet)
        finally:
            session = await starting
        warming = asyncio.create_task(asyncio.to_thread(_warm_report_imports, html=bool(args.html)))
        report = await run_playbook(session, data, options=options, on_progress=_print_progress, plan=plan)
        loaded = all(s.ok for s in report.steps if s.name in ("setup", "load"))
        if not loaded:
            raise CliError(report.error or f"{data.name}: could not be read; nothing was written")
        await warming
        written = await write_notebook(session, output)
        page = _to_html(written, args.html) if args.html else None
    print(_plain(report.summary_markdown) or f"The playbook stopped: {report.error}")
    print(f"\nnotebook: {written}")
    if page is not None:
        print(f"html: {page}")
    return 0 if report.ok else 1


def _warm_report_imports(*, html: bool) -> None:
    """Import what writing the report needs (nbformat's schema checks take ~1 s to import)."""
    for name in ("nbformat", *(("markdown_it", "pygments.lexers.python") if html else ())):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _print_progress(progress: Any) -> None:
    result = progress.result
    if result is None:
        return
    status = "ok" if result.ok else f"FAILED ({result.error})"
    print(f"[{progress.index:>2}/{progress.total}] {progress.title:<20} {status} {result.duration_s:6.2f} s",
          file=sys.stderr, flush=True)


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

    notebook = _need_file(args.notebook)
    recorded = read_notebook(notebook).get("metadata", {}).get("kernel_analyst", {}).get("limits")
    base = Limits.from_dict(recorded) if isinstance(recorded, dict) else None
    return asyncio.run(_verify(args, notebook, _limits(args, base)))


async def _verify(args: argparse.Namespace, notebook: Path, limits: Limits) -> int:
    from .kernels.verify import verify_notebook

    async with _manager(args, limits) as manager:
        report = await verify_notebook(notebook, manager, data_dirs=args.data_dir, rerun_path=args.output,
                                       on_cell=_print_cell)
    for check in report.inputs:
        if check.status != "ok":
            print(check.describe())
    for cell in report.failures:
        print(cell.describe())
    total = len(report.cells)
    if not report.inputs_ok:
        print("NOT verified: input files are missing or changed (see above).")
    elif report.reproduced:
        print(f"reproduced: all {total} code cells match.")
    else:
        print(f"NOT reproduced: {len(report.failures)} of {total} code cells differ.")
    if report.rerun_path:
        print(f"rerun notebook: {report.rerun_path}")
    return 0 if report.reproduced else 1


def _print_cell(check: Any) -> None:
    mark = "ok" if check.reproduced else "DIFFERS"
    print(f"cell {check.index:>3} [{check.execution_count}] {mark}", file=sys.stderr, flush=True)


# -- ask and chat -------------------------------------------------------------------------------


def _load_model(args: argparse.Namespace) -> Any:
    from .agent.models import load_chat_model

    return load_chat_model(args.model, base_url=args.base_url)


def _cmd_ask(args: argparse.Namespace) -> int:
    if len(args.items) < 2:
        raise CliError("ask needs at least one data file and a question")
    *paths, question = args.items
    files = [_need_file(Path(p)) for p in paths]
    model = _load_model(args)
    return asyncio.run(_ask(args, model, files, question))


async def _ask(args: argparse.Namespace, model: Any, files: list[Path], question: str) -> int:
    from .agent import Analyst

    async with _manager(args, _limits(args)) as manager:
        analyst = Analyst(model, manager, max_steps=args.max_steps)
        answer = await analyst.ask("ask", question, files=files, on_event=_event_printer(sys.stdout))
        written = await (await manager.session("ask")).export(args.output) if args.output else None
    _print_answer(answer, written)
    return 0 if answer.stop_reason == "answered" else 1


def _print_answer(answer: Any, written: Path | None) -> None:
    print(f"\n{answer.text.strip() or '(no answer)'}")
    if answer.stop_reason != "answered":
        print(f"\n[stopped: {answer.stop_reason}{': ' + answer.error if answer.error else ''}]")
    if written is not None:
        print(f"\nnotebook: {written}")


def _event_printer(out: TextIO, *, max_lines: int = 12) -> Callable[[Any], None]:
    """Print agent events as they happen: code, a short output, errors."""

    def show(event: Any) -> None:
        kind = getattr(event, "type", "")
        if kind == "step_code":
            print(f"\n--- step {event.step} ---", file=out)
            print("\n".join(">>> " + line for line in event.code.rstrip().splitlines()), file=out)
        elif kind == "step_finished":
            print(_short_output(event.execution, max_lines), file=out)
        elif kind == "model_text" and event.text.strip():
            print(f"\n{event.text.strip()}", file=out)
        out.flush()

    return show


def _short_output(ex: Any, max_lines: int) -> str:
    lines = ex.text.rstrip().splitlines()
    if ex.error is not None:
        return f"[{ex.status}] {ex.error.ename}: {ex.error.evalue}"
    more = [f"... ({len(lines) - max_lines} more lines)"] if len(lines) > max_lines else []
    shown = lines[:max_lines] + more
    images = f"[{len(ex.images)} image(s)]" if ex.images else ""
    return "\n".join([*shown, images]).strip() or f"[{ex.status}, no output]"


_CHAT_HELP = """commands: /files  list files in the session   /vars  list variables
          /save [PATH]  write the notebook      /reset  restart the kernel (variables are lost)
          /help  this text   /quit  leave (or Ctrl-D)"""


def _cmd_chat(args: argparse.Namespace) -> int:
    files = [_need_file(p) for p in args.data]
    model = _load_model(args)
    return asyncio.run(_chat(args, model, files))


async def _chat(args: argparse.Namespace, model: Any, files: list[Path]) -> int:
    from .agent import Analyst

    async with _manager(args, _limits(args)) as manager:
        analyst = Analyst(model, manager, max_steps=args.max_steps)
        session = await manager.session("chat")
        for path in files:
            await session.upload(path)
        print(f"kernel ready ({len(files)} file(s) uploaded). {_CHAT_HELP}", flush=True)
        while (line := await _read_line("you> ")) is not None:
            if not line.strip():
                continue
            if line.strip().startswith("/"):
                if not await _chat_command(line.strip(), manager, analyst):
                    break
                continue
            answer = await analyst.ask("chat", line.strip(), on_event=_event_printer(sys.stdout))
            _print_answer(answer, None)
    return 0


async def _read_line(prompt: str) -> str | None:
    print(prompt, end="", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    return line if line else None


async def _chat_command(line: str, manager: SessionManager, analyst: Any) -> bool:
    """Run one /command; return False to leave the chat."""
    name, _, rest = line.partition(" ")
    session = await manager.session("chat")
    if name in ("/quit", "/exit"):
        return False
    if name == "/files":
        listing = await session.files()
        print("\n".join(f"  {f.name} ({f.size:,} bytes)" for f in listing) or "  (no files)")
    elif name == "/vars":
        found = await session.variables()
        print("\n".join(f"  {v.describe()}" for v in found) or "  (no variables)")
    elif name == "/save":
        target = Path(rest.strip() or "chat.ipynb")
        print(f"  notebook: {await session.export(target)}")
    elif name == "/reset":
        await session.restart()
        analyst.forget("chat")
        print("  kernel restarted: variables and chat history are gone (files stay).")
    else:
        print(_CHAT_HELP)
    return True


if __name__ == "__main__":  # pragma: no cover
    main_entry()


__all__ = ["build_parser", "main", "main_entry"]
