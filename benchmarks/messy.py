#!/usr/bin/env python
"""The analyst on real messy uploads: every file of ``../shared/datasets/csv/messy``, a
first question and a follow-up each, asked through ``Analyst.ask`` with a real model.

For each file (answers established by hand: ``benchmarks/messy_cases.py``) it reports
whether the first answer and the follow-up are right, whether the file was **read right
in the first step** (the conversation's first code cell made a DataFrame with the right
number of rows and, where the question aggregates a column, that column numeric), steps,
and seconds; and where the seconds of each question went: starting the kernel, the
upload and loading before the model's first call, the model (prompt tokens processed,
prompt tokens the server had cached, tokens generated, each with its seconds, read from
llama-server's ``timings``), and the kernel's steps. Example, with the local model
(``bash ../shared/tools/local-model.sh start``)::

    OPENAI_API_KEY=local python benchmarks/messy.py --model openai:qwen \\
        --base-url http://127.0.0.1:8766/v1 --json messy.json

Two trees side by side (``--tree DIR``, repeatable, e.g. a ``git worktree`` of an older
commit): each file is asked of each tree in turn, in a child process whose
``PYTHONPATH`` is that tree, so both see the same machine load; the server's cached
prompts are erased before each conversation so neither profits from the other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _llama import ModelCall, Timings, erase_slots, timed_model
from _trees import TREE_VARIABLE, use_tree
from messy_cases import CASES, Case, Expected

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "csv" / "messy"
_NUMBER_RE = re.compile(
    r"(?<![\w.])-?\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])-?\d+(?:\.\d+)?"
)


# -- scoring -------------------------------------------------------------------------------------


def numbers_in(text: str) -> list[float]:
    """The numbers of an answer (``800,074`` and ``800 074`` read as 800074)."""
    found = []
    for match in _NUMBER_RE.finditer(text):
        raw = re.sub(r"[,\u202f\u00a0 ]", "", match.group())
        try:
            found.append(float(raw))
        except ValueError:
            continue
    return found


def states(answer: str, expected: Expected) -> bool:
    """True when ``answer`` states ``expected``: a number within half a unit of its last
    decimal, or the text (case-insensitive)."""
    if isinstance(expected.value, str):
        return expected.value.casefold() in answer.casefold()
    tolerance = 0.5 * 10**-expected.decimals + 1e-9
    return any(abs(n - expected.value) <= tolerance for n in numbers_in(answer))


# -- one conversation -----------------------------------------------------------------------------


@dataclass
class Question:
    """One question's outcome."""

    right: bool
    answer: str
    stop_reason: str
    steps: int
    seconds: float
    setup_s: float
    """From the call to the model's first request: kernel, upload, loading, note."""
    model_s: float
    kernel_s: float
    calls: list[ModelCall] = field(default_factory=list)


@dataclass
class FileResult:
    """One file's conversation."""

    file: str
    tree: str
    kernel_start_s: float = 0.0
    read_right_first_step: bool = False
    first_cell: str = ""
    first: Question | None = None
    follow_up: Question | None = None
    error: str = ""


async def _question(
    analyst: Any,
    conversation: str,
    case_question: str,
    expected: tuple[Expected, ...],
    files: list[Path],
    timings: Timings,
) -> Question:
    timings.reset()
    started = time.monotonic()
    answer = await analyst.ask(conversation, case_question, files=files)
    seconds = time.monotonic() - started
    setup = (timings.first_request or time.monotonic()) - started
    text = answer.text or ""
    model_s = sum(c.wall_s for c in timings.calls)
    kernel_s = sum(s.execution.duration_s for s in answer.steps)
    right = all(states(text, e) for e in expected)
    return Question(
        right,
        text,
        answer.stop_reason,
        len(answer.steps),
        round(seconds, 2),
        round(setup, 2),
        round(model_s, 2),
        round(kernel_s, 2),
        list(timings.calls),
    )


def _first_cell_check(notebook: Path, case: Case) -> tuple[bool, str]:
    """Whether the conversation's first code cell made a DataFrame of the right length
    (and the aggregated column numeric), and that cell's code."""
    cells = [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    if not cells:
        return False, ""
    first = cells[0]
    code = "".join(first["source"])
    meta = first.get("metadata", {}).get("kernel_analyst", {})
    created = [
        v
        for v in (meta.get("variables", {}) or {}).get("created", [])
        if str(v.get("type", "")).endswith("DataFrame")
    ]
    for frame in created:
        shape = frame.get("shape") or [None]
        dtypes = frame.get("dtypes") or {}
        numeric = case.numeric is None or any(
            ch in str(dtypes.get(case.numeric, "")) for ch in ("int", "float")
        )
        if shape[0] == case.rows and numeric:
            return True, code
    return False, code


async def run_file(case: Case, args: argparse.Namespace, workdir: Path) -> FileResult:
    """One file: a new conversation, the first question, the follow-up."""
    from kernel_analyst import Analyst, Limits, SessionManager

    result = FileResult(case.file, args.tree_name)
    timings = Timings()
    model = timed_model(args.model, base_url=args.base_url, timings=timings, max_tokens=args.max_tokens)
    if args.erase_cache:
        erase_slots(args.base_url)
    options: dict[str, Any] = {"max_steps": args.max_steps, "protocol": args.protocol}
    if args.preload is not None:
        options["profile_files"] = args.preload == "on"
    conversation = re.sub(r"[^A-Za-z0-9-]+", "-", Path(case.file).stem)[:60]
    async with SessionManager(workdir, limits=Limits(timeout_s=args.timeout), pool_size=0) as manager:
        analyst = Analyst(model, manager, **options)
        started = time.monotonic()
        await manager.session(conversation)
        result.kernel_start_s = round(time.monotonic() - started, 3)
        path = Path(args.data) / case.file
        try:
            result.first = await _question(
                analyst, conversation, case.first, case.first_answers, [path], timings
            )
            result.follow_up = await _question(
                analyst, conversation, case.follow_up, case.follow_up_answers, [], timings
            )
        except Exception as exc:  # one broken file must not end the benchmark
            result.error = f"{type(exc).__name__}: {exc}"
        session = await manager.session(conversation)
        result.read_right_first_step, result.first_cell = _first_cell_check(session.notebook_path, case)
    return result


# -- the run ----------------------------------------------------------------------------------


def _child(case: Case, tree: Path, args: argparse.Namespace, workdir: Path) -> FileResult:
    """Ask ``case`` of the code in ``tree`` in a child process."""
    env = {**os.environ, TREE_VARIABLE: str(tree.resolve())}
    command = [
        sys.executable,
        __file__,
        "--one",
        case.file,
        "--tree-name",
        tree.name,
        "--workdir",
        str(workdir),
        "--model",
        args.model,
        "--protocol",
        args.protocol,
        "--max-steps",
        str(args.max_steps),
        "--timeout",
        str(args.timeout),
        "--max-tokens",
        str(args.max_tokens),
        "--data",
        args.data,
    ]
    if args.base_url:
        command += ["--base-url", args.base_url]
    if args.preload is not None:
        command += ["--preload", args.preload]
    if not args.erase_cache:
        command.append("--keep-cache")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return FileResult(
            case.file, tree.name, error=f"child failed ({done.returncode}): {done.stderr[-800:]}"
        )
    return _from_dict(json.loads(lines[-1]))


def _from_dict(data: dict[str, Any]) -> FileResult:
    def question(q: dict[str, Any] | None) -> Question | None:
        if q is None:
            return None
        return Question(**{**q, "calls": [ModelCall(**c) for c in q.get("calls", [])]})

    return FileResult(
        data["file"],
        data["tree"],
        data["kernel_start_s"],
        data["read_right_first_step"],
        data["first_cell"],
        question(data["first"]),
        question(data["follow_up"]),
        data["error"],
    )


def summarize(results: list[FileResult]) -> dict[str, Any]:
    """Shares and medians of one tree's results."""
    n = len(results) or 1
    firsts = [r.first for r in results if r.first is not None]
    follows = [r.follow_up for r in results if r.follow_up is not None]

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 1) if values else 0.0

    def part(qs: list[Question], name: str) -> float:
        return median([getattr(q, name) for q in qs])

    return {
        "files": len(results),
        "read_right_first_step": round(sum(r.read_right_first_step for r in results) / n, 3),
        "first_right": round(sum(bool(r.first and r.first.right) for r in results) / n, 3),
        "follow_up_right": round(sum(bool(r.follow_up and r.follow_up.right) for r in results) / n, 3),
        "answered": round(sum(bool(r.first and r.first.stop_reason == "answered") for r in results) / n, 3),
        "first_s_median": part(firsts, "seconds"),
        "follow_up_s_median": part(follows, "seconds"),
        "first_s_mean": round(statistics.mean([q.seconds for q in firsts]), 1) if firsts else 0.0,
        "follow_up_s_mean": round(statistics.mean([q.seconds for q in follows]), 1) if follows else 0.0,
        "first_setup_s": part(firsts, "setup_s"),
        "first_model_s": part(firsts, "model_s"),
        "first_kernel_s": part(firsts, "kernel_s"),
        "first_prompt_tokens": median([float(sum(c.prompt_n for c in q.calls)) for q in firsts]),
        "first_cached_tokens": median([float(sum(c.cache_n for c in q.calls)) for q in firsts]),
        "first_generated_tokens": median([float(sum(c.predicted_n for c in q.calls)) for q in firsts]),
        "follow_up_prompt_tokens": median([float(sum(c.prompt_n for c in q.calls)) for q in follows]),
        "follow_up_cached_tokens": median([float(sum(c.cache_n for c in q.calls)) for q in follows]),
        "steps_first": round(statistics.mean([q.steps for q in firsts]), 2) if firsts else 0.0,
        "kernel_start_s": median([r.kernel_start_s for r in results]),
    }


def _row(r: FileResult) -> str:
    def q(x: Question | None) -> str:
        if x is None:
            return f"{'-':>18}"
        return f"{'ok ' if x.right else 'NO '}{x.stop_reason[:8]:<8}{x.steps:>2}{x.seconds:>6.0f}s"

    return (
        f"{r.tree[:12]:<12} {r.file[:44]:<44} {'yes' if r.read_right_first_step else 'no ':<4} "
        f"{q(r.first)}  {q(r.follow_up)} {r.error[:60]}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model", required=True, help='"provider:model", e.g. openai:qwen')
    p.add_argument("--base-url", help="OpenAI-compatible server")
    p.add_argument("--protocol", default="auto", choices=["auto", "tools", "code"])
    p.add_argument(
        "--preload",
        choices=["on", "off"],
        help="load each upload as a DataFrame before the first question (default: the tree's own)",
    )
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per code run")
    p.add_argument("--data", default=str(DEFAULT_DATA))
    p.add_argument("--files", type=lambda s: s.split(","), help="only these files (comma-separated)")
    p.add_argument(
        "--tree",
        action="append",
        type=Path,
        default=[],
        help="a source tree to measure (repeat to compare, side by side per file)",
    )
    p.add_argument("--workdir", help="sessions and notebooks (default: a new temp dir)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--keep-cache", dest="erase_cache", action="store_false",
                   help="do not erase the server's cached prompts before each conversation (when other "
                        "runs share the server: the seconds are then not comparable)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--tree-name", default="this", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run every selected file (on each tree in turn) and print the table and summaries."""
    args = parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="messy-"))
    if args.one:
        use_tree()
        case = next(c for c in CASES if c.file == args.one)
        print(json.dumps(asdict(asyncio.run(run_file(case, args, workdir / args.tree_name)))))
        return 0
    print(f"sessions and audit notebooks: {workdir}", file=sys.stderr)
    cases = [c for c in CASES if not args.files or c.file in args.files]
    trees = args.tree or [Path(__file__).resolve().parents[1]]
    results: dict[str, list[FileResult]] = {t.name: [] for t in trees}
    for case in cases:
        for tree in trees:
            result = _child(case, tree, args, workdir)
            results[tree.name].append(result)
            print(_row(result), file=sys.stderr, flush=True)
    summary = {name: summarize(rs) for name, rs in results.items()}
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "summary": summary,
                    "results": {name: [asdict(r) for r in rs] for name, rs in results.items()},
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
