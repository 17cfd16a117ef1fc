#!/usr/bin/env python
"""Run the analyst on InfiAgent-DABench (dev split) and score it the way its authors do.

Needs: a chat model that calls tools (``pip install "kernel-analyst[openai]"``, or another
provider extra, and its API key or an OpenAI-compatible server), and the benchmark files
(questions, labels, tables): ``../shared/datasets/dabench`` beside the repository by default,
``--data DIR`` elsewhere. Examples::

    python benchmarks/dabench.py --model openai:gpt-4o-mini --limit 20
    # an older checkout's agent on the same questions (git worktree add ../old COMMIT):
    KA_BENCH_TREE=../old python benchmarks/dabench.py --model openai:gpt-4o-mini --limit 20
    python benchmarks/dabench.py --model openai:qwen2.5-coder --base-url http://127.0.0.1:8000/v1 \\
        --level easy --out dabench-responses.jsonl
    # several models and action protocols side by side, one after another in one run:
    python benchmarks/dabench.py --model openai:qwen --base-url http://127.0.0.1:8766/v1 \\
        --model llamacpp:~/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --protocol tools,code,auto --level easy --limit 40

Scoring follows the authors' ``eval_closed_form.py``: the answers are the ``@name[value]``
items of the response (a repeated name keeps its last value); a sub-answer is correct when
it equals the label exactly or both parse as floats within 1e-6. Reported: accuracy by
question (every sub-answer right), by sub-question, and the proportional score, and
beside them how the answers were reached: the share of answers backed by at least one code
cell, steps and seconds per question. One difference: upstream silently leaves out
questions whose response is empty; here they count as wrong, so a crashing agent cannot
look better than a wrong one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _options import analyst_keywords
from _trees import use_tree

use_tree()  # $KA_BENCH_TREE: an older checkout's kernel_analyst, for before/after figures

from kernel_analyst import Analyst, Limits, SessionManager  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "dabench"
ANSWER_RE = re.compile(r"@(\w+)\[(.*?)\]")

PROMPT = """\
{question}

Constraints: {constraints}

The data is in the file `{file_name}` in the working directory.
Finish with the results in exactly this format: {format}
Write each @name[value] as shown, with only the value inside the brackets, rounded as the \
constraints say."""


@dataclass(frozen=True)
class Question:
    """One benchmark question."""

    id: int
    """Question id (joins the labels)."""
    question: str
    """The question text."""
    constraints: str
    """How to compute and round."""
    format: str
    """The required ``@name[value]`` answer format."""
    file_name: str
    """The table, in ``da-dev-tables/``."""
    level: str
    """easy, medium or hard."""
    concepts: list[str] = field(default_factory=list)
    """Skills the question tests."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Question:
        """Build from one line of ``da-dev-questions.jsonl``."""
        return cls(int(data["id"]), str(data["question"]), str(data.get("constraints", "")),
                   str(data.get("format", "")), str(data["file_name"]), str(data.get("level", "")),
                   list(data.get("concepts", [])))

    def prompt(self) -> str:
        """The question as the analyst is asked it."""
        return PROMPT.format(question=self.question, constraints=self.constraints,
                             file_name=self.file_name, format=self.format)


@dataclass
class Record:
    """The agent's run on one question."""

    id: int
    """Question id."""
    response: str
    """The answer text (scored)."""
    stop_reason: str
    """answered, max_steps or error."""
    steps: int = 0
    """Code runs."""
    duration_s: float = 0.0
    """Wall-clock seconds."""
    usage: dict[str, Any] | None = None
    """Token usage, when reported."""
    error: str | None = None
    """What failed, if anything."""
    protocol: str = ""
    """The action protocol the conversation followed (tools or code)."""
    vias: list[str] = field(default_factory=list)
    """How each step's code arrived (tool_call, python_fence ...)."""
    grounded: bool | None = None
    """True when every number of the answer is grounded in a cell or derived from such
    numbers (``Answer.claims``); None without an answer."""
    claims: str = ""
    """The grounding's summary line."""
    level: str = ""
    """easy, medium or hard."""
    partial: bool = False
    """The answer is a partial one (the steps ran out)."""
    notes: list[str] = field(default_factory=list)
    """What the loop did (answers sent back, replies that ran nothing, a partial answer)."""
    first_response: str | None = None
    """When the question was tried again in branches: the first attempt's answer, what the
    agent gives without attempts (None: it was tried once, ``response`` is that)."""
    first_seconds: float | None = None
    """The first attempt's seconds, when there were more."""
    agreement: str = ""
    """How the attempts agreed (``2 of 3 attempts agree``), when there were more."""
    timing: dict[str, Any] | None = None
    """Where the seconds went (``Answer.timing``), when the agent reports it."""

    def to_dict(self) -> dict[str, Any]:
        """A JSONL line (upstream reads ``id`` and ``response``)."""
        return asdict(self)

    @property
    def without_attempts(self) -> tuple[str, float]:
        """The answer and the seconds without further attempts."""
        if self.first_response is None:
            return self.response, self.duration_s
        return self.first_response, self.first_seconds or self.duration_s


@dataclass(frozen=True)
class Score:
    """Accuracy the way the benchmark's authors compute it."""

    by_question: float
    """Share of questions with every sub-answer correct."""
    by_sub_question: float
    """Share of sub-answers correct."""
    proportional: float
    """Mean over questions of the share of their sub-answers correct."""
    questions: int
    """Questions scored."""
    sub_questions: int
    """Sub-answers scored."""
    correct: dict[int, dict[str, bool]] = field(default_factory=dict)
    """Per question id: sub-answer name -> correct."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {**asdict(self), "correct": {str(k): v for k, v in self.correct.items()}}


# -- data ----------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_questions(data_dir: Path) -> list[Question]:
    """All questions of the split, in file order."""
    return [Question.from_dict(d) for d in _read_jsonl(data_dir / "da-dev-questions.jsonl")]


def load_labels(data_dir: Path) -> dict[int, dict[str, str]]:
    """Question id -> {answer name: label value}."""
    return {int(d["id"]): {str(n): str(v) for n, v in d["common_answers"]}
            for d in _read_jsonl(data_dir / "da-dev-labels.jsonl")}


def select(questions: list[Question], *, ids: Sequence[int] | None = None, level: str | None = None,
           limit: int | None = None, per_level: dict[str, int] | None = None) -> list[Question]:
    """Questions filtered by id and level, then the first ``limit``; with ``per_level``
    (``{"easy": 40, "medium": 30}``), the first N of each level named, in file order."""
    chosen = [q for q in questions if (not ids or q.id in ids) and (not level or q.level == level)]
    if per_level:
        taken: dict[str, int] = {}
        kept = []
        for q in chosen:
            if taken.get(q.level, 0) < per_level.get(q.level, 0):
                taken[q.level] = taken.get(q.level, 0) + 1
                kept.append(q)
        chosen = kept
    return chosen[:limit] if limit else chosen


# -- scoring (as upstream) -------------------------------------------------------------------


def extract_answers(response: str) -> dict[str, str]:
    """The ``@name[value]`` items of a response (a repeated name keeps its last value)."""
    return dict(ANSWER_RE.findall(response))


def is_equal(response: str | None, label: str) -> bool:
    """Exact string match, else both floats within 1e-6."""
    if response == label:
        return True
    if response is None:
        return False
    try:
        return abs(float(response) - float(label)) < 1e-6
    except ValueError:
        return False


def score(labels: dict[int, dict[str, str]], responses: dict[int, str]) -> Score:
    """Score the responses of the questions in ``responses`` against their labels."""
    correct: dict[int, dict[str, bool]] = {}
    for qid in responses:
        found = extract_answers(responses[qid])
        correct[qid] = {name: is_equal(found.get(name), value) for name, value in labels[qid].items()}
    total = len(correct)
    subs = sum(len(c) for c in correct.values())
    return Score(
        by_question=_ratio(sum(all(c.values()) for c in correct.values()), total),
        by_sub_question=_ratio(sum(sum(c.values()) for c in correct.values()), subs),
        proportional=_ratio(sum(sum(c.values()) / len(c) for c in correct.values() if c), total),
        questions=total, sub_questions=subs, correct=correct)


def _ratio(part: float, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


# -- running ---------------------------------------------------------------------------------


async def run_questions(analyst: Analyst, questions: list[Question], data_dir: Path, *,
                        concurrency: int = 1, run: str = "",
                        on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """Ask each question in a conversation of its own (its kernel closed afterwards).
    ``run`` names the model and protocol in the conversation ids, so the runs of one
    workdir never resume each other's conversations."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(q: Question) -> Record:
        async with gate:
            record = await _ask(analyst, q, data_dir, run)
        if on_record:
            on_record(record)
        return record

    return list(await asyncio.gather(*(one(q) for q in questions)))


async def _ask(analyst: Analyst, q: Question, data_dir: Path, run: str) -> Record:
    conversation = f"dabench-{run}-{q.id}" if run else f"dabench-{q.id}"
    started = time.monotonic()
    try:
        answer = await analyst.ask(conversation, q.prompt(), files=[data_dir / "da-dev-tables" / q.file_name])
    except Exception as exc:  # one broken question must not end the benchmark
        return Record(q.id, "", "error", duration_s=time.monotonic() - started,
                      error=f"{type(exc).__name__}: {exc}", level=q.level)
    finally:
        await analyst.manager.close(conversation)
        analyst.forget(conversation)
    claims = answer.claims
    agreed = getattr(answer, "agreement", None)
    timing = getattr(answer, "timing", None)
    return Record(q.id, answer.text, answer.stop_reason, len(answer.steps), answer.duration_s,
                  answer.usage.to_dict() if answer.usage else None, answer.error, answer.protocol,
                  [s.via for s in answer.steps], claims.all_grounded if claims else None,
                  claims.summary() if claims else "", q.level, bool(getattr(answer, "partial", False)),
                  list(answer.notes), agreed.texts.get(1) if agreed else None,
                  agreed.seconds.get(1) if agreed else None, agreed.summary() if agreed else "",
                  timing.to_dict() if timing else None)


@dataclass(frozen=True)
class Summary:
    """One model and protocol over the selected questions."""

    model: str
    """The model spec."""
    protocol: str
    """The protocol setting (tools, code or auto)."""
    score: Score
    """Accuracy as upstream computes it."""
    with_cell: float
    """Share of answers backed by at least one code cell."""
    steps: float
    """Mean code steps per question."""
    seconds: float
    """Mean wall-clock seconds per question."""
    followed: dict[str, int] = field(default_factory=dict)
    """How many conversations ended in each protocol (auto picks per conversation)."""
    grounded: float = 0.0
    """Share of answers whose every number is grounded in a cell (or derived from them)."""
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The same figures by level, and for the first 40 easy questions apart from the rest
    (the ones the agent was tuned on until issue 26)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (the per-question detail left out)."""
        score = {k: v for k, v in self.score.to_dict().items() if k != "correct"}
        return {"model": self.model, "protocol": self.protocol, **score, "with_cell": self.with_cell,
                "steps": self.steps, "seconds": self.seconds, "followed": self.followed,
                "grounded": self.grounded, "groups": self.groups}

    def row(self) -> str:
        """One line of the side-by-side table."""
        return (f"{self.model[-34:]:<34} {self.protocol:<6} {self.score.by_question:>8.1%} "
                f"{self.with_cell:>9.1%} {self.grounded:>8.1%} {self.steps:>6.1f} {self.seconds:>7.1f}")


TABLE_HEADER = (f"{'model':<34} {'proto':<6} {'accuracy':>8} {'with cell':>9} {'grounded':>8} {'steps':>6} "
                f"{'s/q':>7}")


def summarize(model: str, protocol: str, score_: Score, records: list[Record]) -> Summary:
    """The figures of one configuration's records."""
    n = len(records) or 1
    followed: dict[str, int] = {}
    for r in records:
        followed[r.protocol or "none"] = followed.get(r.protocol or "none", 0) + 1
    with_cell = round(sum(r.steps > 0 for r in records) / n, 4)
    steps = round(sum(r.steps for r in records) / n, 2)
    seconds = round(sum(r.duration_s for r in records) / n, 1)
    grounded = round(sum(r.grounded is True for r in records) / n, 4)
    return Summary(model, protocol, score_, with_cell, steps, seconds, followed, grounded,
                   _groups(score_, records))


FIRST_EASY = 40
"""The easy questions the agent was measured (and tuned) on before issue 26: the first 40."""


def _groups(score_: Score, records: list[Record]) -> dict[str, dict[str, Any]]:
    """Accuracy, grounded share, steps and seconds by level, and for the first 40 easy
    questions apart from the rest."""
    easy_ids = sorted(r.id for r in records if r.level == "easy")
    first_easy = set(_first_easy_ids()) if _first_easy_ids() else set(easy_ids[:FIRST_EASY])
    groups = {level: [r for r in records if r.level == level] for level in ("easy", "medium", "hard")}
    groups["easy, first 40"] = [r for r in records if r.level == "easy" and r.id in first_easy]
    groups["all but the first 40 easy"] = [r for r in records
                                           if not (r.level == "easy" and r.id in first_easy)]
    out = {}
    for name, rs in groups.items():
        if not rs:
            continue
        right = [all(score_.correct.get(r.id, {"": False}).values()) for r in rs]
        out[name] = {"questions": len(rs), "accuracy": round(sum(right) / len(rs), 4),
                     "grounded": round(sum(r.grounded is True for r in rs) / len(rs), 4),
                     "partial": sum(r.partial for r in rs),
                     "steps": round(sum(r.steps for r in rs) / len(rs), 2),
                     "seconds": round(sum(r.duration_s for r in rs) / len(rs), 1)}
    return out


def _first_easy_ids() -> list[int]:
    """The ids of the first 40 easy questions of the split, in file order."""
    if not DEFAULT_DATA.exists():
        return []
    return [q.id for q in load_questions(DEFAULT_DATA) if q.level == "easy"][:FIRST_EASY]


async def benchmark(args: argparse.Namespace, model: BaseChatModel, manager: SessionManager, *,
                    protocol: str = "auto") -> Score:
    """Run the selected questions with ``model`` under ``protocol``; write the records to
    ``args.out``; return the score."""
    records = await run_records(args, model, manager, protocol=protocol)
    result = score(load_labels(Path(args.data)), {r.id: r.response for r in records})
    if args.out:
        write_records(Path(args.out), records)
    return result


async def run_records(args: argparse.Namespace, model: BaseChatModel, manager: SessionManager, *,
                      protocol: str, run: str = "") -> list[Record]:
    """The agent's records on the selected questions (``run``: see :func:`run_questions`)."""
    data_dir = Path(args.data)
    questions = select(load_questions(data_dir), ids=args.ids, level=args.level, limit=args.limit,
                       per_level=getattr(args, "per_level", None))
    done = [r for r in resumed(args) if r.id in {q.id for q in questions}]
    if done:
        print(f"resuming: {len(done)} of the {len(questions)} questions are in {args.out}.partial already",
              file=sys.stderr)
        questions = [q for q in questions if q.id not in {r.id for r in done}]
    analyst = Analyst(model, manager, max_steps=args.max_steps, protocol=protocol,  # type: ignore[arg-type]
                      profile_files=getattr(args, "preload", "on") == "on",
                      **analyst_keywords(getattr(args, "analyst", [])))
    if hasattr(analyst, "remember_question"):  # checkouts before it ($KA_BENCH_TREE) start empty
        for r in done:  # the attempts' account as the stopped run left it, not empty again
            first_s = r.first_seconds if r.first_seconds is not None else r.duration_s
            analyst.remember_question(first_s, r.duration_s - first_s)

    def report(r: Record) -> None:
        print(f"  {r.id:>4} {r.stop_reason:<9} {r.steps:>2} steps {r.duration_s:6.1f} s {','.join(r.vias)}",
              file=sys.stderr, flush=True)
        if args.out:  # as they come, so a run stopped early keeps what it did
            with open(f"{args.out}.partial", "a", encoding="utf-8") as f:
                f.write(json.dumps({"model": getattr(model, "model_name", ""), "protocol": protocol,
                                    **r.to_dict()}) + "\n")

    new = await run_questions(analyst, questions, data_dir, concurrency=args.concurrency, run=run,
                              on_record=report)
    return sorted([*done, *new], key=lambda r: r.id)


def resumed(args: argparse.Namespace) -> list[Record]:
    """With ``--resume``, the records a stopped run wrote to ``OUT.partial`` (the latest of
    each question); none otherwise."""
    path = Path(f"{args.out}.partial") if args.out else None
    if not getattr(args, "resume", False) or path is None or not path.exists():
        return []
    names = {f.name for f in fields(Record)}
    latest: dict[int, Record] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            data = json.loads(line)
            latest[int(data["id"])] = Record(**{k: v for k, v in data.items() if k in names})
    return list(latest.values())


def write_records(path: Path, records: list[Record]) -> None:
    """One JSON line per question, in id order (upstream's response format and more)."""
    with open(path, "w", encoding="utf-8") as f:
        for record in sorted(records, key=lambda r: r.id):
            f.write(json.dumps(record.to_dict()) + "\n")


def _per_level(text: str) -> dict[str, int]:
    found = {}
    for part in text.split(","):
        level, _, n = part.partition("=")
        if level not in ("easy", "medium", "hard") or not n.isdigit():
            raise argparse.ArgumentTypeError(f"expected LEVEL=N (LEVEL easy, medium or hard); got {part!r}")
        found[level] = int(n)
    return found


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model", required=True, action="append",
                   help='"provider:model", e.g. openai:gpt-4o-mini, or llamacpp:PATH.gguf; repeat to compare')
    p.add_argument("--protocol", default=["auto"], type=lambda s: s.split(","),
                   help="action protocols to compare, comma-separated: tools, code, auto (default auto)")
    p.add_argument("--base-url", help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="tokens per model reply at most, set on the model (default: none; the agent's "
                        "own bound applies, as for every user; an older tree without one needs it)")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature (default 0: greedy, so runs repeat; a server's own default "
                        "is often 0.8)")
    p.add_argument("--model-timeout", type=float, default=None,
                   help="seconds one model request may take, set on the model (default: none; the agent's "
                        "own deadline applies, as for every user)")
    p.add_argument("--analyst", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword for Analyst(...), e.g. attempts=3 or attempts_on_doubt=1 (repeatable)")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="benchmark directory (default: %(default)s)")
    p.add_argument("--ids", type=lambda s: [int(x) for x in s.split(",")], help="comma-separated ids")
    p.add_argument("--level", choices=["easy", "medium", "hard"])
    p.add_argument("--limit", type=int, help="at most this many questions")
    p.add_argument("--max-steps", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=1, help="questions at once (one kernel each)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per code run")
    p.add_argument("--workdir", help="where sessions and notebooks go (default: a new temp dir)")
    p.add_argument("--out", help="write one JSON line per question (upstream's response format); with "
                                 "several runs, one file each, named after the model and protocol")
    p.add_argument("--json", help="write the side-by-side summary here")
    p.add_argument("--resume", action="store_true",
                   help="skip the questions already in OUT.partial, and score them with the rest: a run "
                        "stopped early goes on where it was (one model and protocol)")
    p.add_argument("--preload", choices=("on", "off"), default="on",
                   help="load the table into a DataFrame before the model's first step and show its profile "
                        "(default on, as the Analyst does)")
    p.add_argument("--per-level", type=_per_level, metavar="LEVEL=N,...",
                   help="the first N questions of each level named, e.g. easy=40,medium=30,hard=30")
    args = p.parse_args(argv)
    if any(x not in ("tools", "code", "auto") for x in args.protocol):
        p.error(f"--protocol takes tools, code, auto; got {','.join(args.protocol)}")
    if args.resume and (not args.out or len(args.model) * len(args.protocol) > 1):
        p.error("--resume needs --out and one model and protocol (their records share OUT.partial)")
    return args


async def _main(args: argparse.Namespace) -> list[Summary]:
    from kernel_analyst.agent import load_chat_model

    root = Path(args.workdir or tempfile.mkdtemp(prefix="dabench-"))
    print(f"sessions and audit notebooks: {root}", file=sys.stderr)
    labels = load_labels(Path(args.data))
    several = len(args.model) * len(args.protocol) > 1
    summaries = []
    async with SessionManager(root, limits=Limits(timeout_s=args.timeout), pool_size=args.concurrency) as m:
        for spec in args.model:
            base_url = None if spec.startswith("llamacpp:") else args.base_url
            extra: dict[str, Any] = {}
            if args.max_tokens is not None:
                extra["max_tokens"] = args.max_tokens
            if args.model_timeout is not None and not spec.startswith("llamacpp:"):
                extra["timeout"] = args.model_timeout
            model = load_chat_model(spec, base_url=base_url, temperature=args.temperature, **extra)
            for protocol in args.protocol:
                if protocol == "tools" and _cannot_bind_tools(model):
                    print(f"== {spec} / tools: skipped (the model does not call tools)", file=sys.stderr)
                    continue
                print(f"== {spec} / {protocol}", file=sys.stderr)
                tag = re.sub(r"[^A-Za-z0-9.-]+", "-", f"{Path(spec).name}-{protocol}")
                records = await run_records(args, model, m, protocol=protocol, run=tag)
                summaries.append(summarize(spec, protocol, score(labels, {r.id: r.response for r in records}),
                                           records))
                if any(r.first_response is not None for r in records):  # the same run without attempts
                    firsts = [replace(r, response=r.without_attempts[0], duration_s=r.without_attempts[1],
                                      first_response=None) for r in records]
                    summaries.append(summarize(spec, f"{protocol}, 1st attempt",
                                               score(labels, {r.id: r.response for r in firsts}), firsts))
                if args.out:
                    out = Path(args.out)
                    write_records(out.with_name(f"{out.stem}-{tag}{out.suffix}") if several else out, records)
    return summaries


def _cannot_bind_tools(model: BaseChatModel) -> bool:
    try:
        model.bind_tools([])
    except NotImplementedError:
        return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run, print the side-by-side table and the summaries as JSON, exit 0."""
    args = parse_args(argv)
    summaries = asyncio.run(_main(args))
    data = [s.to_dict() for s in summaries]
    print(json.dumps(data, indent=2))
    print(TABLE_HEADER)
    for s in summaries:
        print(s.row())
    for s in summaries:
        for name, g in s.groups.items():
            print(f"  {name:<26} {g['questions']:>4} questions {g['accuracy']:>7.1%} right "
                  f"{g['grounded']:>7.1%} grounded {g['partial']:>3} partial {g['steps']:>5.2f} steps "
                  f"{g['seconds']:>6.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
