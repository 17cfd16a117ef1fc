#!/usr/bin/env python
"""The analyst in conversations over real tables: questions that build on each other (a
change asked "from now on" and kept, answers on subsets that must leave the table whole,
names, yes/no, "at which hour", "the 2 worst", follow-ups on the previous answer's subject).

The conversations and their answers, established by hand with the pandas code that computes
each, are in ``benchmarks/conversation_cases.py``. Each conversation's questions are asked in
order with ``Analyst.ask`` (the product's agent with its defaults; the file uploaded with the
first question), in a new kernel. For each question: right or wrong, steps, seconds, and
where they went: before the first model call (upload, loading, note), the model (prompt
tokens processed and cached, tokens generated, each with its seconds, from llama-server's
``timings``), the kernel's steps, and the time to the first visible token when the answer's
events carry tokens (``n/a`` otherwise). Summaries: accuracy overall, of first questions and
of follow-ups, and by what a question probes; medians of seconds and of the time to the first
visible token, for first questions and for follow-ups. With the local model
(``bash ../shared/tools/local-model.sh start``)::

    OPENAI_API_KEY=local python benchmarks/conversations.py --model openai:qwen \\
        --base-url http://127.0.0.1:8766/v1 --json conversations.json
    python benchmarks/conversations.py --check-cases    # recompute every expected answer

``--analyst KEY=VALUE`` (repeatable) is passed to ``Analyst(...)`` (``attempts=3``); ints,
floats, true/false and none are parsed. Two trees side by side (``--tree DIR``, repeatable,
e.g. a ``git worktree`` of an older commit): each conversation is asked of each tree in turn,
in a child process whose ``PYTHONPATH`` is that tree, so both see the same machine load; the
server's cached prompts are erased before each conversation so neither profits from the other.
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
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _llama import ModelCall, Timings, erase_slots, timed_model
from _options import analyst_keywords
from _trees import TREE_VARIABLE, use_tree
from conversation_cases import CONVERSATIONS, DEFAULT_DATA, Conversation, check_cases, grade

_TOKEN_EVENT = re.compile(r"token|delta", re.IGNORECASE)
"""Event types that carry the model's reply as it is written (``model_token``, ...)."""


# -- one question ---------------------------------------------------------------------------------


@dataclass
class Asked:
    """One question's outcome."""

    conversation: str
    index: int
    """1-based position in the conversation (1: the first question)."""
    question: str
    expected: str
    answer: str = ""
    right: bool = False
    stop_reason: str = ""
    steps: int = 0
    seconds: float = 0.0
    setup_s: float = 0.0
    """From the call to the model's first request: upload, loading, note."""
    model_s: float = 0.0
    kernel_s: float = 0.0
    first_token_s: float | None = None
    """From the call to the first event carrying visible reply text; None without such events."""
    events: dict[str, int] = field(default_factory=dict)
    """How many events of each type the answer sent."""
    calls: list[ModelCall] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def follow_up(self) -> bool:
        return self.index > 1


@dataclass
class Run:
    """One conversation asked of one tree."""

    conversation: str
    tree: str
    kernel_start_s: float = 0.0
    questions: list[Asked] = field(default_factory=list)
    error: str = ""


class EventClock:
    """An ``on_event`` callback: counts the answer's events by type and notes when the first
    one carrying visible reply text arrived (a ``model_token`` event or the like: whatever
    its type says token or delta)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_token_s: float | None = None
        self.types: Counter[str] = Counter()

    def __call__(self, event: Any) -> None:
        kind = str(getattr(event, "type", type(event).__name__))
        self.types[kind] += 1
        if self.first_token_s is None and _TOKEN_EVENT.search(kind) and _visible(event):
            self.first_token_s = round(time.monotonic() - self.started, 3)


def _visible(event: Any) -> bool:
    """True unless the event's text is known and blank."""
    for name in ("text", "token", "delta", "content"):
        value = getattr(event, name, None)
        if isinstance(value, str):
            return bool(value.strip())
    return True


async def ask(analyst: Any, conversation: Conversation, index: int, files: list[Path],
              timings: Timings) -> Asked:
    """Ask the conversation's question ``index`` (1-based) and grade the answer."""
    question = conversation.questions[index - 1]
    asked = Asked(conversation.name, index, question.text, str(question.expected),
                  probes=list(question.probes))
    timings.reset()
    clock = EventClock()
    try:
        answer = await analyst.ask(conversation.name, question.text, files=files, on_event=clock)
    except Exception as exc:  # one failing question must not end the conversation
        asked.error = f"{type(exc).__name__}: {exc}"
        answer = None
    asked.seconds = round(time.monotonic() - clock.started, 2)
    asked.setup_s = round((timings.first_request or time.monotonic()) - clock.started, 2)
    asked.model_s = round(sum(c.wall_s for c in timings.calls), 2)
    asked.calls, asked.events = list(timings.calls), dict(clock.types)
    asked.first_token_s = clock.first_token_s
    if answer is not None:
        asked.answer, asked.stop_reason = answer.text or "", answer.stop_reason
        asked.steps = len(answer.steps)
        asked.kernel_s = round(sum(s.execution.duration_s for s in answer.steps), 2)
        asked.right = grade(asked.answer, question.expected)
    return asked


# -- one conversation -----------------------------------------------------------------------------


async def run_conversation(conversation: Conversation, args: argparse.Namespace, workdir: Path) -> Run:
    """A new kernel, then the conversation's questions in order."""
    from kernel_analyst import Analyst, Limits, SessionManager

    run = Run(conversation.name, args.tree_name)
    timings = Timings()
    model = timed_model(args.model, base_url=args.base_url, timings=timings, max_tokens=args.max_tokens,
                        timeout=args.model_timeout)
    if args.erase_cache:
        erase_slots(args.base_url)
    count = len(conversation.questions)
    count = count if args.limit is None else min(args.limit, count)
    async with SessionManager(workdir, limits=Limits(timeout_s=args.timeout), pool_size=0) as manager:
        try:
            analyst = Analyst(model, manager, **analyst_options(args.analyst))
            started = time.monotonic()
            await manager.session(conversation.name)
            run.kernel_start_s = round(time.monotonic() - started, 3)
        except Exception as exc:  # an option the tree does not know, a kernel that cannot start
            run.error = f"{type(exc).__name__}: {exc}"
            return run
        for index in range(1, count + 1):
            files = [conversation.path(Path(args.data))] if index == 1 else []
            asked = await ask(analyst, conversation, index, files, timings)
            run.questions.append(asked)
            print(row(run.tree, asked), file=sys.stderr, flush=True)
    return run


def analyst_options(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as keywords for ``Analyst(...)`` (:mod:`_options`)."""
    return analyst_keywords(pairs)


# -- the run --------------------------------------------------------------------------------------


def _child(conversation: Conversation, tree: Path, args: argparse.Namespace, workdir: Path) -> Run:
    """Ask ``conversation`` of the code in ``tree`` in a child process (its rows go to our
    stderr as they come): ``$KA_BENCH_TREE`` for ``use_tree()``, and the tree first on
    ``PYTHONPATH`` so that what the child starts imports from it too."""
    resolved = str(tree.resolve())
    path = os.pathsep.join(p for p in (resolved, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, TREE_VARIABLE: resolved, "PYTHONPATH": path}
    command = [sys.executable, __file__, "--one", conversation.name, "--tree-name", tree.name,
               "--workdir", str(workdir / tree.name), "--model", args.model, "--data", args.data,
               "--max-tokens", str(args.max_tokens), "--model-timeout", str(args.model_timeout),
               "--timeout", str(args.timeout)]
    command += ["--base-url", args.base_url] if args.base_url else []
    command += ["--limit", str(args.limit)] if args.limit is not None else []
    command += [f"--analyst={pair}" for pair in args.analyst]
    command += [] if args.erase_cache else ["--keep-cache"]
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return Run(conversation.name, tree.name,
                   error=f"child failed ({done.returncode}); its stderr is above")
    return _from_dict(json.loads(lines[-1]))


def _from_dict(data: dict[str, Any]) -> Run:
    questions = [Asked(**{**q, "calls": [ModelCall(**c) for c in q["calls"]]}) for q in data["questions"]]
    return Run(data["conversation"], data["tree"], data["kernel_start_s"], questions, data["error"])


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _share(questions: list[Asked]) -> float | None:
    return round(sum(q.right for q in questions) / len(questions), 3) if questions else None


def summarize(runs: list[Run]) -> dict[str, Any]:
    """Accuracy and medians of one tree's runs."""
    asked = [q for r in runs for q in r.questions]
    firsts = [q for q in asked if not q.follow_up]
    follows = [q for q in asked if q.follow_up]

    def tokens(qs: list[Asked], name: str) -> float | None:
        return _median([float(sum(getattr(c, name) for c in q.calls)) for q in qs])

    def first_token(qs: list[Asked]) -> float | None:
        return _median([q.first_token_s for q in qs if q.first_token_s is not None])

    summary: dict[str, Any] = {
        "conversations": len(runs),
        "questions": len(asked),
        "right": _share(asked),
        "first_right": _share(firsts),
        "follow_up_right": _share(follows),
        "answered": round(sum(q.stop_reason == "answered" for q in asked) / len(asked), 3) if asked else None,
        "first_s_median": _median([q.seconds for q in firsts]),
        "follow_up_s_median": _median([q.seconds for q in follows]),
        "first_token_s_median": first_token(asked),
        "first_first_token_s_median": first_token(firsts),
        "follow_up_first_token_s_median": first_token(follows),
        "steps_mean": round(statistics.mean([q.steps for q in asked]), 2) if asked else None,
        "kernel_start_s_median": _median([r.kernel_start_s for r in runs if r.kernel_start_s]),
    }
    for part, qs in (("first", firsts), ("follow_up", follows)):
        summary[f"{part}_setup_s_median"] = _median([q.setup_s for q in qs])
        summary[f"{part}_model_s_median"] = _median([q.model_s for q in qs])
        summary[f"{part}_kernel_s_median"] = _median([q.kernel_s for q in qs])
        for name in ("prompt_n", "cache_n", "predicted_n"):
            summary[f"{part}_{name}_median"] = tokens(qs, name)
    probes = sorted({p for q in asked for p in q.probes})
    summary["by_probe"] = {p: _share([q for q in asked if p in q.probes]) for p in probes}
    summary["by_conversation"] = {r.conversation: _share(r.questions) for r in runs}
    return summary


def row(tree: str, q: Asked) -> str:
    """One question as a table row."""
    calls = q.calls
    tokens = (f"{sum(c.prompt_n for c in calls):>6}/{sum(c.cache_n for c in calls):<6}"
              f"{sum(c.prompt_ms for c in calls) / 1000:>6.1f}s {sum(c.predicted_n for c in calls):>5}"
              f"{sum(c.predicted_ms for c in calls) / 1000:>6.1f}s")
    first_token = "n/a" if q.first_token_s is None else f"{q.first_token_s:.1f}s"
    verdict = "ok " if q.right else "NO "
    answer = " ".join(q.answer.split())[:70] if not q.error else q.error[:70]
    return (f"{tree[:10]:<10} {q.conversation[:15]:<15} {q.index:>2} {verdict}{q.stop_reason[:8]:<8} "
            f"{q.steps:>2} {q.seconds:>6.1f}s {q.setup_s:>5.1f} {q.model_s:>6.1f} {q.kernel_s:>5.1f} "
            f"{tokens} {first_token:>6}  {answer}")


HEADER = (f"{'tree':<10} {'conversation':<15} {'#':>2} {'right':<11} {'st':>2} {'seconds':>7} "
          f"{'setup':>5} {'model':>6} {'kern':>5} {'prompt/cached':>13} {'p-s':>6} {'gen':>5} {'g-s':>6} "
          f"{'1st-tok':>6}  answer")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model", default="openai:qwen", help='"provider:model" (default: %(default)s)')
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                   help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    p.add_argument("--cases", type=lambda s: s.split(","), default=[],
                   help="only these conversations (comma-separated names: "
                        + ", ".join(c.name for c in CONVERSATIONS) + ")")
    p.add_argument("--limit", type=int, help="the first N questions of each conversation")
    p.add_argument("--analyst", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword for Analyst(...), e.g. attempts=3 (repeatable)")
    p.add_argument("--max-tokens", type=int, default=1024, help="tokens per model reply at most")
    p.add_argument("--model-timeout", type=float, default=1800.0,
                   help="seconds one model call may take (a local model on a busy machine is slow)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per code run")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="the datasets' csv directory")
    p.add_argument("--tree", action="append", type=Path, default=[],
                   help="a source tree to measure (repeat to compare, side by side per conversation)")
    p.add_argument("--workdir", help="sessions and audit notebooks (default: a new temp dir)")
    p.add_argument("--json", help="write the summaries and every question's outcome here")
    p.add_argument("--out", help="write one JSON line per question here")
    p.add_argument("--keep-cache", dest="erase_cache", action="store_false",
                   help="do not erase the server's cached prompts before each conversation (when others "
                        "share the server: the seconds are then not comparable)")
    p.add_argument("--check-cases", action="store_true",
                   help="recompute every expected answer from the files; exit 1 on a mismatch")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--tree-name", default="this", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = set(args.cases) - {c.name for c in CONVERSATIONS}
    if unknown:
        p.error(f"unknown conversations: {', '.join(sorted(unknown))}")
    try:
        analyst_options(args.analyst)
    except ValueError as exc:
        p.error(str(exc))
    return args


def _check(args: argparse.Namespace) -> int:
    problems = check_cases(Path(args.data), args.cases)
    for problem in problems:
        print(problem)
    count = sum(len(c.questions) for c in CONVERSATIONS if not args.cases or c.name in args.cases)
    print(f"{count - len(problems)} of {count} expected answers recomputed from the files agree")
    return 1 if problems else 0


def _report(results: dict[str, list[Run]], args: argparse.Namespace) -> None:
    summary = {name: summarize(runs) for name, runs in results.items()}
    print(HEADER)
    for name, runs in results.items():
        for run in runs:
            if run.error:
                print(f"{name[:10]:<10} {run.conversation[:15]:<15} error: {run.error[:200]}")
            for q in run.questions:
                print(row(name, q))
    print(json.dumps(summary, indent=2))
    for name, s in summary.items():
        print(f"{name}: {s['right']} right ({s['first_right']} first, {s['follow_up_right']} follow-ups); "
              f"median s {s['first_s_median']} first, {s['follow_up_s_median']} follow-ups; "
              f"first visible token {_or_na(s['first_token_s_median'])}")
    if args.json:
        data = {"summary": summary, "runs": {n: [asdict(r) for r in rs] for n, rs in results.items()}}
        Path(args.json).write_text(json.dumps(data, indent=2), encoding="utf-8")
    if args.out:
        with Path(args.out).open("w", encoding="utf-8") as out:
            for name, runs in results.items():
                for q in (q for r in runs for q in r.questions):
                    out.write(json.dumps({"tree": name, **asdict(q)}) + "\n")


def _or_na(value: float | None) -> str:
    return "n/a" if value is None else f"{value} s"


def main(argv: list[str] | None = None) -> int:
    """Check the cases, or run every selected conversation (on each tree in turn) and print
    the table and summaries."""
    args = parse_args(argv)
    if args.check_cases:
        return _check(args)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="conversations-"))
    if args.one:
        use_tree()
        conversation = next(c for c in CONVERSATIONS if c.name == args.one)
        print(json.dumps(asdict(asyncio.run(run_conversation(conversation, args, workdir)))))
        return 0
    print(f"sessions and audit notebooks: {workdir}", file=sys.stderr)
    print(HEADER, file=sys.stderr)
    trees = args.tree or [Path(__file__).resolve().parents[1]]
    if len({t.name for t in trees}) < len(trees):
        raise SystemExit("--tree: give trees with different directory names (they name the results)")
    results: dict[str, list[Run]] = {t.name: [] for t in trees}
    for conversation in (c for c in CONVERSATIONS if not args.cases or c.name in args.cases):
        for tree in trees:
            results[tree.name].append(_child(conversation, tree, args, workdir))
    _report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
