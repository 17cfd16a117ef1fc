#!/usr/bin/env python
"""The analyst on DSEval's Kaggle problem sets, graded with the authors' own validators.

DSEval (MetaCopilot/dseval, MIT; ``../shared/datasets/dseval-kaggle``) has 31 Kaggle problem
sets; 28 can run here (the inputs of cardiovascular-diseases-risk-prediction-dataset,
mcdonalds-store-reviews and vietnamese-job-posting-vietnamese-version are not in the
snapshot: those sets are named and skipped). A set is one stateful conversation: its
``# %%`` cells each carry a YAML docstring (``question``, ``validator``, sometimes
``execution``) over the authors' reference code, and later questions use what earlier ones
made ("read the file into ``students``", then "make ``students_anon``" ...).

How a set is run. One conversation, one kernel (``SessionManager``, the product's defaults):
the set's input folder is uploaded into ``inputs/`` of the working directory
(``session.upload(path, name="inputs/<file>")``), so the questions' ``inputs/<file>`` paths
resolve as in the authors' harness, which copies the folder to ``inputs/`` of its working
directory. The files are not passed to ``ask(files=...)``: the Analyst would put them at
the top of the working directory, where those paths do not lead, and load them into
DataFrames the questions did not ask for; the note on each question lists them anyway
(the working directory's files). A cell without a question (``import pandas as pd``) runs
as the authors run it, in both namespaces: in the agent's kernel with
``session.execute`` (recorded in the audit notebook, marked as run by a person, so the
agent's next note says a cell ran), and in the reference. Each question is asked with
``Analyst.ask(conversation, question)``, in order, the Analyst with its defaults (and what
``--analyst``/``--max-steps`` pass).

The reference is the authors' ``Environment`` (``toolkit/dseval/simulation.py``): a plain
namespace in this process, in a folder holding its own copy of the inputs, that runs every
cell of the set in order, as their ``Evaluator.evaluate`` does (``raise_error=True``, the
cell's ``execution`` options). Its time limit is raised to at least 600 s: the authors' is
1 s by default, for their machines, and a reference that fails grades nothing.

What is compared. The authors grade one code cell per question: its last expression's value
(``execute_result``), stdout, error, the namespace after it, and the namespace diff it made
(added / updated / replaced / deleted, from a deep copy taken before it). Our agent runs
several cells (steps) per question, so the graded cell is the **last successful step**
(an undone one does not count): its code is the ``source_code``, its stream output the
``stream_output``, and its ``execute_result`` is IPython's ``Out[n]`` for that step's
execution count, read in the kernel, not re-evaluated: exactly the value of the cell's last
expression (None when the cell ends in a statement, a ``print`` or a ``;``, as for the
authors, whose ``ResultValidator`` then looks for the answer in the code and in what the
printed expressions evaluate to, for partial credit). A question whose steps all failed is
graded as the last failed step (``error`` set: the authors' crash check); one with no step
at all as an empty cell. The answer's prose is never graded: the authors grade code.
The namespace is the agent's kernel's user namespace (IPython's own names left out); the
diff is the authors' ``namespace_diff`` between a ``namespace_copy`` taken just before
the question and the namespace after it, with one translation: the authors' agent starts
each question from a fork of the *reference* namespace, so a name the reference did not
have before the question can there only be added (the agent's own helpers from earlier
questions, kept in our persistent kernel, count as added, never updated or deleted).
``execution.forbid_names`` are hidden from the agent during the question with the authors'
``_Forbidden`` and put back before the diff, as they do.

Where the validators run: inside the agent's kernel (``benchmarks/_dseval_kernel.py`` and
the toolkit, copied into the hidden folder ``.dseval`` and loaded there through unrecorded
execute requests: no cell, no history, no user variable). So the agent's objects are
graded as they are (frames with their dtypes and index, fitted models, the functions a
``table_test`` calls), never pickled out of the kernel; object ids are real for the diff;
and the agent's code a validator calls runs in the agent's sandbox, not in this process.
The reference comes in pickled (``cloudpickle``), written after the agent has answered and
removed at once. The verdict is the authors' ``validator_comments_to_verdict``; a question
is **solved** when it is ``CORRECT`` (``correct == "yes"``), as the authors' score counts.

What differs from the authors' protocol, and why: their agent starts each question from the
reference's namespace; ours keeps its own (a wrong early answer can cost later ones: the
conversation the product is for). Their time limit per cell (``max_time``, 1 s by default)
is not applied to the agent's steps (they run under ``--timeout``, the product's 120 s by
default). Questions whose reference code fails here are asked but not graded, and reported
apart (``NOT_GRADED``): in this environment (pandas 3, scikit-learn 1.9, no ``xgboost``;
before the ``analysis`` extra brought ``statsmodels`` and ``imblearn``, so fewer now)
39 of the 355 runnable questions' references failed, or followed one that failed
(diabetes 8, disease-symptoms 8, employee 6, food prices 5, coffee 4, bank churn 3, sleep
health 3, sustainable energy 1, housing 1). The comparison
published with the benchmark: GPT-3.5 with the CoML agent solved 240 of 396 Kaggle
questions (60.6%), all 31 sets, their protocol.

Reported, by set and overall: questions solved / graded (percent), asked, not graded, the
authors' verdicts, steps and seconds per question, and the share of questions with at
least one cell of their own; ``--json`` writes the summary, ``--out`` one JSON line per
question (as they come). Examples, with the local model
(``bash ../shared/tools/local-model.sh start``)::

    OPENAI_API_KEY=local python benchmarks/dseval.py --model openai:qwen \\
        --base-url http://127.0.0.1:8766/v1 --limit-sets 1 --limit-questions 5
    OPENAI_API_KEY=local python benchmarks/dseval.py --model openai:qwen \\
        --base-url http://127.0.0.1:8766/v1 --sets salary-data,employee-dataset \\
        --analyst attempts=3 --json dseval.json --out dseval.jsonl

Two trees side by side (``--tree DIR``, repeatable, e.g. a ``git worktree`` of an older
commit): each set is asked of each tree in turn, in a child process whose ``PYTHONPATH`` is
that tree (``_tree_runs.py``), so both see the same machine load; ``--erase-cache`` erases
llama-server's cached prompts before each conversation so neither profits from the other
(off by default: the server may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import pickle
import re
import shutil
import statistics
import sys
import tempfile
import time
import types
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _options import analyst_keywords
from _tree_runs import run_in_tree
from _trees import use_tree

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "dseval-kaggle"
KERNEL_MODULE = Path(__file__).resolve().parent / "_dseval_kernel.py"
PUBLISHED = {"agent": "GPT-3.5 with CoML", "solved": 240, "asked": 396, "percent": 60.6}
"""The comparison published with the benchmark (results/kaggle/240226-coml-gpt-35-turbo-aoai.jsonl)."""
REFERENCE_MIN_TIME = 600
"""Seconds a reference cell may take at least (the authors' default limit is 1 s)."""
HIDDEN = ".dseval"
"""The folder of the working directory that holds the grading code while a set runs."""
TOOLKIT_MODULES = ("limit", "match", "problem", "simulation", "utils", "validator")
"""The toolkit's modules the grading uses (not ``__init__``/``loop``: they import the
authors' agent, which is not shipped)."""
_INPUT_RE = re.compile(r"""inputs/([^'"`\n]+?)['"`]""")


# -- the authors' toolkit and problem sets ------------------------------------------------------


@functools.cache
def toolkit(data: Path = DEFAULT_DATA) -> types.SimpleNamespace:
    """DSEval's ``problem``, ``simulation`` and ``validator`` modules, imported as the
    package ``dseval`` from ``data/toolkit/dseval`` without its ``__init__``. Needs pyyaml,
    requests, psutil, scipy, pandas, numpy (all in the project's environment)."""
    if "dseval" not in sys.modules:
        package = types.ModuleType("dseval")
        package.__path__ = [str(data / "toolkit" / "dseval")]
        sys.modules["dseval"] = package
    import importlib

    return types.SimpleNamespace(**{name: importlib.import_module(f"dseval.{name}")
                                    for name in ("problem", "simulation", "validator")})


def set_names(data: Path = DEFAULT_DATA) -> list[str]:
    """Every problem set of the benchmark, in the authors' order (sorted)."""
    return sorted(p.stem for p in (data / "problems").glob("*.py") if not p.name.startswith("_"))


def missing_inputs(name: str, data: Path = DEFAULT_DATA) -> list[str]:
    """The files under ``inputs/`` that the set's cells name and the snapshot lacks."""
    text = (data / "problems" / f"{name}.py").read_text(encoding="utf-8")
    inputs = data / "problems" / "_inputs" / name
    return sorted({f for f in _INPUT_RE.findall(text) if not (inputs / f).exists()})


def load_set(name: str, data: Path = DEFAULT_DATA) -> Any:
    """The set as the authors' ``ProblemSet.fromfile`` reads it."""
    return toolkit(data).problem.ProblemSet.fromfile(data / "problems" / f"{name}.py")


def select_sets(data: Path, names: list[str] | None,
                limit: int | None) -> tuple[list[str], dict[str, list[str]]]:
    """The runnable sets asked for (all by default, the first ``limit``) and the skipped
    ones with their missing inputs."""
    known = set_names(data)
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise SystemExit(f"unknown problem sets: {', '.join(unknown)} (known: {', '.join(known)})")
    chosen = names or known
    skipped = {n: missing for n in chosen if (missing := missing_inputs(n, data))}
    runnable = [n for n in chosen if n not in skipped]
    return runnable[:limit] if limit else runnable, skipped


# -- the reference: the authors' Environment in this process ------------------------------------


@dataclass
class ReferenceRun:
    """The reference cell of one question, frozen."""

    frozen: bytes | None
    """Pickled (cloudpickle): the cell's output, its namespace value by value, the names
    the namespace had before the cell, and the question's validator. None when it failed."""
    error: str = ""
    """Why the reference could not run (the question is then not graded)."""


class Reference:
    """The authors' ``Environment``, run in ``directory`` (which holds a copy of the inputs)."""

    def __init__(self, problems: Any, directory: Path, data: Path = DEFAULT_DATA) -> None:
        self.environment = toolkit(data).simulation.Environment()
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        if problems.data_directory is not None:
            shutil.copytree(problems.data_directory, directory / "inputs", dirs_exist_ok=True)
        try:  # the reference's figures go nowhere
            import matplotlib

            matplotlib.use("Agg")
        except ImportError:
            pass

    def _execute(self, code: str, execution: dict[str, Any] | None) -> None:
        options = dict(execution or {})
        options["max_time"] = max(int(options.get("max_time", 1)), REFERENCE_MIN_TIME)
        here = os.getcwd()
        os.chdir(self.directory)
        try:
            self.environment.execute(code, raise_error=True, **options)
        finally:
            os.chdir(here)

    def setup(self, code: str) -> str:
        """Run a cell without a question; return why it failed ("" if it did not)."""
        try:
            self._execute(code, None)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:500]
        return ""

    def run(self, problem: Any) -> ReferenceRun:
        """Run the question's reference cell and freeze what grading needs of it."""
        import cloudpickle

        before = [n for n in self.environment.namespace if n != "__builtins__"]
        try:
            self._execute(problem.reference_code, problem.execution)
        except Exception as exc:
            return ReferenceRun(None, f"{type(exc).__name__}: {exc}"[:500])
        output = self.environment.last_cell.output
        namespace = {}
        for name, value in output["namespace_snapshot"].items():
            if name == "__builtins__":
                continue
            try:
                namespace[name] = cloudpickle.dumps(value)
            except Exception:
                continue
        reference = {k: output[k] for k in ("source_code", "stream_output", "execute_time", "execute_result",
                                            "error", "namespace_diff")}
        try:
            frozen = cloudpickle.dumps({"reference": reference, "namespace": namespace,
                                        "names_before": before, "validator": problem.validator})
        except Exception as exc:
            return ReferenceRun(None, f"the reference's result cannot be pickled: {exc!r}"[:500])
        return ReferenceRun(frozen)


# -- grading inside the agent's kernel -----------------------------------------------------------


class HarnessError(RuntimeError):
    """The grading code failed in the agent's kernel (not the agent's fault)."""


async def _hidden(session: Any, code: str, timeout: float) -> Any:
    """Run ``code`` in the session's kernel as an unrecorded execute request (no cell, no
    history: ``KernelSession.relay`` of a request that stores none), in the session's turn."""
    msg = {"header": {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "session": "dseval",
                      "username": "dseval", "date": "", "version": "5.3"},
           "parent_header": {}, "metadata": {},
           "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                       "allow_stdin": False, "stop_on_error": False}}
    ex = await session.relay(msg, lambda channel, message: None, timeout=timeout)
    if ex is None or ex.status != "ok":
        status, text = (ex.status, ex.text) if ex is not None else ("not run", "")
        raise HarnessError(f"grading code failed in the kernel ({status}): {text[-1500:]}")
    return ex


class KernelGrader:
    """Begins and grades each question in the agent's kernel (``_dseval_kernel.py``)."""

    def __init__(self, session: Any, data: Path = DEFAULT_DATA, *, timeout: float = 600.0) -> None:
        self.session = session
        self.data = data
        self.timeout = timeout
        self.root = ""
        """The working directory as the kernel sees it (a sandbox mounts it elsewhere)."""

    @property
    def host_dir(self) -> Path:
        return Path(self.session.workdir) / HIDDEN

    async def install(self) -> None:
        """Copy the grading code into the hidden folder and learn the kernel's path to it
        (asked before the agent runs anything, while the kernel's directory is the start one)."""
        package = self.host_dir / "toolkit" / "dseval"
        package.mkdir(parents=True, exist_ok=True)
        for name in TOOLKIT_MODULES:
            shutil.copyfile(self.data / "toolkit" / "dseval" / f"{name}.py", package / f"{name}.py")
        shutil.copyfile(KERNEL_MODULE, self.host_dir / KERNEL_MODULE.name)
        ex = await _hidden(self.session, "print(__import__('os').getcwd())", 60.0)
        self.root = os.path.join(ex.text.strip().splitlines()[-1], HIDDEN)

    def _call(self, function: str, *args: Any) -> str:
        module = os.path.join(self.root, KERNEL_MODULE.name)
        return (
            "def __dseval_call():\n"
            "    import importlib.util, sys\n"
            "    module = sys.modules.get('_dseval_harness')\n"
            "    if module is None:\n"
            f"        spec = importlib.util.spec_from_file_location('_dseval_harness', {module!r})\n"
            "        module = importlib.util.module_from_spec(spec)\n"
            "        sys.modules['_dseval_harness'] = module\n"
            "        spec.loader.exec_module(module)\n"
            f"    module.{function}(get_ipython(), {self.root!r}, *{args!r})\n"
            "__dseval_call()\n"
            "del __dseval_call\n"
        )

    async def begin(self, forbid: list[str]) -> None:
        """Copy the namespace (for the diff) and hide ``forbid``, before the question."""
        await _hidden(self.session, self._call("begin", list(forbid)), self.timeout)

    async def release(self) -> None:
        """After a question that is not graded: put the hidden variables back."""
        await _hidden(self.session, self._call("release"), self.timeout)

    async def grade(self, reference: ReferenceRun, cell: dict[str, Any]) -> dict[str, Any]:
        """The authors' verdict on ``cell`` (see :func:`graded_cell`) against the reference."""
        assert reference.frozen is not None
        token = uuid.uuid4().hex
        payload, verdict = f"payload-{token}.pkl", f"verdict-{token}.json"
        (self.host_dir / payload).write_bytes(pickle.dumps({"frozen": reference.frozen, "cell": cell}))
        try:
            await _hidden(self.session, self._call("grade", os.path.join(self.root, payload),
                                                   os.path.join(self.root, verdict)), self.timeout)
            found: dict[str, Any] = json.loads((self.host_dir / verdict).read_text(encoding="utf-8"))
            return found
        finally:
            for name in (payload, verdict):
                (self.host_dir / name).unlink(missing_ok=True)


def graded_cell(answer: Any, undone: set[str]) -> dict[str, Any]:
    """The cell graded for an answer: its last successful step that was not undone; else its
    last step (with the error); else an empty cell. ``count`` is the step's execution count
    (the kernel reads ``Out[count]``)."""
    steps = [s for s in (answer.steps if answer is not None else []) if s.execution.cell_id not in undone]
    ok = [s for s in steps if s.execution.status == "ok"]
    if not steps:
        return {"count": None, "source_code": "", "stream_output": "", "execute_time": 0.0, "error": None}
    step = ok[-1] if ok else steps[-1]
    ex = step.execution
    streams = "".join(str(o.get("text", "")) for o in ex.outputs if o.get("output_type") == "stream")
    cell = {"count": ex.execution_count if ok else None, "source_code": step.code, "stream_output": streams,
            "execute_time": ex.duration_s, "error": None}
    error = ex.error
    if not ok and error is not None:
        cell["error"] = {"ename": error.ename, "evalue": error.evalue, "traceback": list(error.traceback)}
    elif not ok:
        cell["error"] = {"ename": ex.status, "evalue": f"the step ended: {ex.status}", "traceback": []}
    return cell


def _undone(session: Any) -> set[str]:
    cells = session.audit.cells
    return {str(c.get("id")) for c in cells
            if ((c.get("metadata") or {}).get("kernel_analyst") or {}).get("undone")}


# -- one set ----------------------------------------------------------------------------------------


@dataclass
class Record:
    """One question: how the agent did and what the authors' validator said."""

    set: str
    """The problem set."""
    index: int
    """1-based number of the question within its set."""
    tree: str
    """The source tree that answered."""
    question: str
    """The question as asked."""
    graded: bool = False
    """The reference ran here, so the question was graded."""
    solved: bool = False
    """The authors' verdict is CORRECT."""
    correct: str = ""
    """The validator's ``correct``: yes, partial or no ("" when not graded)."""
    verdict: str = ""
    """The authors' verdict (CORRECT, PRESENTATION_ERROR, WRONG_OUTPUT, WRONG_VARIABLES,
    INTACT_VIOLATION, CRASH ...), or NOT_GRADED / HARNESS_ERROR."""
    subverdict: str = ""
    """The authors' subverdict."""
    reason: str = ""
    """The validator's reason (cut), or why the question was not graded."""
    stop_reason: str = ""
    """How the answer ended (answered, max_steps, error)."""
    steps: int = 0
    """Code runs of the agent for this question."""
    steps_ok: int = 0
    """Of which ran without an error."""
    seconds: float = 0.0
    """Wall-clock seconds of the answer."""
    graded_code: str = ""
    """The code of the graded cell."""
    answer: str = ""
    """The agent's answer text (cut)."""
    model_s: float = 0.0
    """Seconds in model calls (from the HTTP client; 0 without one)."""
    prompt_tokens: int = 0
    """Prompt tokens the server processed (llama-server's timings)."""
    cached_tokens: int = 0
    """Prompt tokens the server had cached."""
    generated_tokens: int = 0
    """Tokens generated."""
    notes: list[str] = field(default_factory=list)
    """The answer's notes and the grading's."""


@dataclass
class SetResult:
    """One set's conversation."""

    set: str
    tree: str
    records: list[Record] = field(default_factory=list)
    setup_errors: list[str] = field(default_factory=list)
    """Cells without a question that failed (in the agent's kernel or the reference)."""
    seconds: float = 0.0
    error: str = ""
    """What ended the set early, if anything."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SetResult:
        """Rebuild from :meth:`to_dict` output."""
        records = [Record(**r) for r in data.get("records", [])]
        return cls(data["set"], data["tree"], records, list(data.get("setup_errors", [])),
                   float(data.get("seconds", 0.0)), str(data.get("error", "")))


async def _ask(analyst: Any, conversation: str, question: str, record: Record, timings: Any) -> Any:
    if timings is not None:
        timings.reset()
    started = time.monotonic()
    try:
        answer = await analyst.ask(conversation, question)
    except Exception as exc:  # one broken question must not end the set
        record.stop_reason, record.seconds = "error", round(time.monotonic() - started, 2)
        record.notes.append(f"ask failed: {type(exc).__name__}: {exc}"[:500])
        return None
    record.seconds = round(time.monotonic() - started, 2)
    record.stop_reason, record.answer = answer.stop_reason, (answer.text or "")[:2000]
    record.steps = len(answer.steps)
    record.steps_ok = sum(s.execution.status == "ok" for s in answer.steps)
    record.notes.extend(answer.notes)
    if answer.error:
        record.notes.append(f"error: {answer.error}"[:500])
    if timings is not None:
        record.model_s = round(sum(c.wall_s for c in timings.calls), 2)
        record.prompt_tokens = sum(c.prompt_n for c in timings.calls)
        record.cached_tokens = sum(c.cache_n for c in timings.calls)
        record.generated_tokens = sum(c.predicted_n for c in timings.calls)
    return answer


def _judge(record: Record, found: dict[str, Any]) -> None:
    record.graded, record.correct = True, found["correct"]
    record.verdict, record.subverdict = found["verdict"], found["subverdict"]
    record.solved = found["verdict"] == "CORRECT"
    record.reason = str(found.get("reason", ""))[:2000]
    if found.get("note"):
        record.notes.append(str(found["note"]))


async def _question(analyst: Any, session: Any, grader: KernelGrader, reference: Reference, problem: Any,
                    record: Record, timings: Any) -> None:
    ran = reference.run(problem)
    try:
        await grader.begin(list((problem.execution or {}).get("forbid_names", [])))
    except HarnessError as exc:  # asked all the same; the grade then has no namespace diff
        record.notes.append(f"grading: {exc}"[:500])
    answer = await _ask(analyst, session.id, problem.question, record, timings)
    cell = graded_cell(answer, _undone(session))
    record.graded_code = cell["source_code"]
    if ran.frozen is None:
        await grader.release()
        record.verdict, record.reason = "NOT_GRADED", f"the reference fails here: {ran.error}"
        return
    try:
        _judge(record, await grader.grade(ran, cell))
    except HarnessError as exc:
        record.verdict, record.reason = "HARNESS_ERROR", str(exc)[:2000]


async def run_set(analyst: Any, problems: Any, *, conversation: str, reference_dir: Path,
                  limit_questions: int | None = None, tree: str = "this", timings: Any = None,
                  data: Path = DEFAULT_DATA, on_record: Any = None) -> SetResult:
    """Ask ``problems``' questions in order as one conversation of ``analyst`` (on its
    manager) and grade each with the authors' validator; ``on_record`` is called with each
    question's record as it is graded."""
    result = SetResult(problems.name, tree)
    started = time.monotonic()
    session = await analyst.manager.session(conversation)
    if problems.data_directory is not None:
        for path in sorted(p for p in problems.data_directory.rglob("*") if p.is_file()):
            await session.upload(path, name=f"inputs/{path.relative_to(problems.data_directory).as_posix()}")
    grader = KernelGrader(session, data)
    await grader.install()
    reference = Reference(problems, reference_dir, data)
    asked = 0
    for problem in problems:
        if not problem.is_complete:
            await _setup(session, reference, problem.reference_code, result)
            continue
        if limit_questions is not None and asked >= limit_questions:
            break
        asked += 1
        record = Record(problems.name, asked, tree, problem.question.strip())
        try:
            await _question(analyst, session, grader, reference, problem, record, timings)
        except HarnessError as exc:
            record.verdict, record.reason = "HARNESS_ERROR", str(exc)[:2000]
        result.records.append(record)
        if on_record is not None:
            on_record(record)
    result.seconds = round(time.monotonic() - started, 1)
    return result


async def _setup(session: Any, reference: Reference, code: str, result: SetResult) -> None:
    """A cell without a question, run in both namespaces as the authors run it."""
    failed = reference.setup(code)
    if failed:
        result.setup_errors.append(f"reference: {failed}")
    ex = await session.execute(code, annotations={"by": "person"})
    if ex.status != "ok":
        result.setup_errors.append(f"agent's kernel: {ex.status}: {ex.text[-300:]}")


# -- summaries ---------------------------------------------------------------------------------------


def _mean(values: list[float]) -> float:
    return round(statistics.mean(values), 2) if values else 0.0


def figures(records: list[Record]) -> dict[str, Any]:
    """Solved / graded (and the percent), asked, not graded, steps and seconds per question,
    the share of questions with at least one cell of their own, the verdicts."""
    graded = [r for r in records if r.graded]
    solved = sum(r.solved for r in graded)
    return {
        "asked": len(records),
        "graded": len(graded),
        "solved": solved,
        "percent": round(100 * solved / len(graded), 1) if graded else 0.0,
        "not_graded": sum(r.verdict == "NOT_GRADED" for r in records),
        "harness_errors": sum(r.verdict == "HARNESS_ERROR" for r in records),
        "steps_per_question": _mean([r.steps for r in records]),
        "seconds_per_question": _mean([r.seconds for r in records]),
        "with_cell": round(sum(r.steps > 0 for r in records) / len(records), 3) if records else 0.0,
        "verdicts": dict(Counter(r.verdict for r in records).most_common()),
    }


def summarize(results: list[SetResult]) -> dict[str, Any]:
    """One tree's figures, overall and by set."""
    records = [r for s in results for r in s.records]
    return {"overall": figures(records),
            "sets": {s.set: {**figures(s.records), "seconds": s.seconds, "setup_errors": s.setup_errors,
                             "error": s.error} for s in results}}


def table(summaries: dict[str, dict[str, Any]]) -> str:
    """The by-set and overall table of every tree, and the published comparison."""
    lines = [f"{'tree':<10} {'set':<46} {'solved/graded':>13} {'%':>6} {'asked':>5} {'n/g':>4} "
             f"{'steps/q':>7} {'s/q':>7} {'w/cell':>6}"]

    def row(tree: str, name: str, f: dict[str, Any]) -> str:
        return (f"{tree[:10]:<10} {name[:46]:<46} {f['solved']:>6}/{f['graded']:<6} {f['percent']:>6.1f} "
                f"{f['asked']:>5} {f['not_graded']:>4} {f['steps_per_question']:>7.2f} "
                f"{f['seconds_per_question']:>7.1f} {f['with_cell']:>6.0%}")

    for tree, summary in summaries.items():
        for name, f in summary["sets"].items():
            lines.append(row(tree, name, f))
        lines.append(row(tree, "OVERALL", summary["overall"]))
        lines.append(f"{'':<10} verdicts: {summary['overall']['verdicts']}")
    p = PUBLISHED
    lines.append(f"published: {p['agent']}: {p['solved']}/{p['asked']} ({p['percent']}%), all 31 sets, "
                 "the authors' protocol (each question from the reference's namespace)")
    return "\n".join(lines)


def _row(r: Record) -> str:
    return (f"  {r.tree[:10]:<10} {r.set[:34]:<34} {r.index:>3} {r.verdict[:18]:<18} {r.stop_reason[:9]:<9} "
            f"{r.steps:>2} steps {r.seconds:>7.1f} s")


# -- running ---------------------------------------------------------------------------------------


def analyst_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords for ``Analyst(...)``: ``--max-steps`` and every ``--analyst KEY=VALUE``."""
    options: dict[str, Any] = {} if args.max_steps is None else {"max_steps": args.max_steps}
    try:
        return options | analyst_keywords(args.analyst)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def _model(args: argparse.Namespace) -> tuple[Any, Any]:
    """The chat model, and the llama-server timings of its calls (None for a model run in
    this process)."""
    from kernel_analyst.agent import load_chat_model

    if args.model.startswith("llamacpp:"):
        return load_chat_model(args.model, temperature=args.temperature, max_tokens=args.max_tokens), None
    options: dict[str, Any] = {"base_url": args.base_url, "temperature": args.temperature,
                               "max_tokens": args.max_tokens, "max_retries": 0, "timeout": args.model_timeout}
    try:
        import httpx
        from _llama import Timings
    except ImportError:  # the shared timing helper is not there: the seconds per question still are
        return load_chat_model(args.model, **options), None
    timings = Timings()
    client = httpx.AsyncClient(event_hooks=timings.hooks, timeout=httpx.Timeout(args.model_timeout))
    return load_chat_model(args.model, http_async_client=client, **options), timings


async def run_sets(args: argparse.Namespace, names: list[str], workdir: Path, tree: str, *,
                   on_record: Any = None) -> list[SetResult]:
    """Ask each set in ``names`` of this process's kernel_analyst, one conversation each;
    each question's record is printed to stderr and given to ``on_record`` as it comes."""
    from kernel_analyst import Analyst, Limits, SessionManager

    data = Path(args.data)
    model, timings = _model(args)
    limits = Limits() if args.timeout is None else Limits(timeout_s=args.timeout)
    results = []
    async with SessionManager(workdir, limits=limits) as manager:
        analyst = Analyst(model, manager, **analyst_options(args))
        for name in names:
            if args.erase_cache:
                from _llama import erase_slots

                erase_slots(args.base_url)
            conversation = f"dseval-{name}"[:60]
            try:
                result = await run_set(analyst, load_set(name, data), conversation=conversation,
                                       reference_dir=workdir / "reference" / name,
                                       limit_questions=args.limit_questions, tree=tree, timings=timings,
                                       data=data, on_record=functools.partial(_report, on_record))
            except Exception as exc:  # one broken set must not end the run
                result = SetResult(name, tree, error=f"{type(exc).__name__}: {exc}"[:1000])
            finally:
                await manager.close(conversation)
                analyst.forget(conversation)
            results.append(result)
    return results


def _child_arguments(args: argparse.Namespace, name: str, tree: Path, workdir: Path) -> list[str]:
    command = ["--one", name, "--tree-name", tree.name, "--workdir", str(workdir), "--model", args.model,
               "--data", args.data, "--max-tokens", str(args.max_tokens),
               "--temperature", str(args.temperature), "--model-timeout", str(args.model_timeout)]
    command += ["--base-url", args.base_url] if args.base_url else []
    command += ["--limit-questions", str(args.limit_questions)] if args.limit_questions is not None else []
    command += ["--max-steps", str(args.max_steps)] if args.max_steps is not None else []
    command += ["--timeout", str(args.timeout)] if args.timeout is not None else []
    command += [f"--analyst={pair}" for pair in args.analyst]
    command += ["--erase-cache"] if args.erase_cache else []
    return command


def _report(then: Any, record: Record) -> None:
    print(_row(record), file=sys.stderr, flush=True)
    if then is not None:
        then(record)


def _writer(path: str | None) -> Any:
    """A function that appends a record to ``path`` as a JSON line (None without a path)."""
    if not path:
        return None

    def write(record: Record) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(record)) + "\n")

    return write


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model", required=True,
                   help='"provider:model", e.g. openai:qwen, or llamacpp:PATH.gguf')
    p.add_argument("--base-url", help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    p.add_argument("--max-tokens", type=int, default=1024,
                   help="tokens per model reply at most (default 1024)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy)")
    p.add_argument("--model-timeout", type=float, default=1800.0, help="seconds one model call may take")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="the benchmark's folder (default: %(default)s)")
    p.add_argument("--sets", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                   help="only these problem sets (names, comma-separated)")
    p.add_argument("--limit-sets", type=int, help="the first N runnable sets")
    p.add_argument("--limit-questions", type=int, help="the first N questions of each set")
    p.add_argument("--max-steps", type=int, help="code runs per question (default: the Analyst's)")
    p.add_argument("--timeout", type=float, help="seconds per code run (default: the product's Limits)")
    p.add_argument("--analyst", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword for Analyst(...), e.g. attempts=3 (repeatable; ints, floats, "
                        "true/false and none are parsed)")
    p.add_argument("--tree", action="append", type=Path, default=[],
                   help="a source tree to measure (repeat to compare, side by side per set)")
    p.add_argument("--erase-cache", action="store_true",
                   help="erase llama-server's cached prompts before each conversation")
    p.add_argument("--workdir",
                   help="sessions, notebooks and the reference's folders (default: a new temp dir)")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("--out", help="append one JSON line per question here")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--tree-name", default="this", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the selected sets (on each tree in turn), print the table, write the files."""
    args = parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dseval-")).resolve()
    if args.one:
        use_tree()
        result = asyncio.run(run_sets(args, [args.one], workdir, args.tree_name))[0]
        print(json.dumps(result.to_dict()))
        return 0
    print(f"sessions, audit notebooks and references: {workdir}", file=sys.stderr)
    names, skipped = select_sets(Path(args.data), args.sets, args.limit_sets)
    for name, missing in skipped.items():
        print(f"skipped {name}: its inputs are not in the snapshot ({', '.join(missing)})", file=sys.stderr)
    results: dict[str, list[SetResult]] = {}
    write = _writer(args.out)
    if not args.tree:
        use_tree()  # $KA_BENCH_TREE, if set
        results["this"] = asyncio.run(run_sets(args, names, workdir / "this", "this", on_record=write))
    for name in names:
        for tree in args.tree:
            arguments = _child_arguments(args, name, tree, workdir / tree.name)
            found, error = run_in_tree(__file__, arguments, tree)
            result = SetResult.from_dict(found) if found else SetResult(name, tree.name, error=error)
            results.setdefault(tree.name, []).append(result)
            for record in result.records if write is not None else []:
                write(record)
    summaries = {tree: summarize(rs) for tree, rs in results.items()}
    print(table(summaries))
    if args.json:
        Path(args.json).write_text(json.dumps({"published": PUBLISHED, "skipped_sets": skipped,
                                               "trees": summaries}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
