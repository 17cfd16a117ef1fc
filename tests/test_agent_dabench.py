"""The DABench harness: the authors' scoring, and a run on two questions with a scripted model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import AIMessage

from kernel_analyst import SessionManager
from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call
from tests.conftest import ROOT, SHARED

DATA = SHARED / "datasets" / "dabench"


def _load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dabench", ROOT / "benchmarks" / "dabench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dabench"] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


dabench = _load_harness()


def test_answers_are_read_like_upstream() -> None:
    text = "First @mean[1.0] then @mean[2.50] and @label[not normally distributed] @empty[]"
    assert dabench.extract_answers(text) == {"mean": "2.50", "label": "not normally distributed", "empty": ""}
    assert dabench.is_equal("2.50", "2.5") and dabench.is_equal("0.1234567", "0.1234568")
    assert not dabench.is_equal("0.12", "0.13") and not dabench.is_equal("Yes", "yes")
    assert not dabench.is_equal(None, "1") and dabench.is_equal("", "")


def test_scores_by_question_sub_question_and_proportion() -> None:
    labels = {1: {"a": "1"}, 2: {"b": "2", "c": "x"}, 3: {"d": "4", "e": "5", "f": "6", "g": "7"}}
    responses = {1: "@a[1.0]", 2: "@b[2] @c[y]", 3: ""}
    result = dabench.score(labels, responses)
    assert result.correct == {1: {"a": True}, 2: {"b": True, "c": False},
                              3: {"d": False, "e": False, "f": False, "g": False}}
    assert (result.by_question, result.by_sub_question, result.proportional) == (0.3333, 0.2857, 0.5)
    assert (result.questions, result.sub_questions) == (3, 7)


def test_questions_and_labels_load_and_join() -> None:
    questions = dabench.load_questions(DATA)
    labels = dabench.load_labels(DATA)
    assert len(questions) == 257 and {q.id for q in questions} == set(labels)
    easy = dabench.select(questions, level="easy", limit=3)
    assert len(easy) == 3 and all(q.level == "easy" for q in easy)
    first = dabench.select(questions, ids=[0])[0]
    assert first.file_name == "test_ave.csv" and "@mean_fare[mean_fare_value]" in first.prompt()


def _scripted_agent() -> ScriptedChatModel:
    """Computes question 0 in the kernel; half-answers question 6 from memory."""

    def reply(call: ModelCall) -> AIMessage | str:
        question = str(call.messages[1].content)
        if "mean fare paid by the passengers" in question:
            if not call.tool_outputs:
                return tool_call("import pandas as pd\n"
                                 "print(round(pd.read_csv('test_ave.csv')['Fare'].mean(), 2))")
            return f"The mean fare is @mean_fare[{call.last_tool_output.splitlines()[0]}]."
        return "@mean_fare_elderly[43.47] @mean_fare_teenager[0] @mean_fare_child[1]"

    return ScriptedChatModel(function=reply)


async def test_harness_runs_and_scores_two_questions(manager: SessionManager, tmp_path: Path) -> None:
    out = tmp_path / "responses.jsonl"
    args = dabench.parse_args(["--model", "scripted:x", "--data", str(DATA), "--ids", "0,6",
                               "--out", str(out), "--max-steps", "4"])
    result = await dabench.benchmark(args, _scripted_agent(), manager)

    assert result.correct == {0: {"mean_fare": True},
                              6: {"mean_fare_elderly": True, "mean_fare_teenager": False,
                                  "mean_fare_child": False, "mean_fare_adult": False}}
    assert (result.by_question, result.by_sub_question, result.proportional) == (0.5, 0.4, 0.625)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["stop_reason"], r["steps"]) for r in lines] == [(0, "answered", 1),
                                                                        (6, "answered", 0)]
    assert lines[0]["response"] == "The mean fare is @mean_fare[34.65]."
    # the computed answer's number is grounded in its cell; the one from memory is not
    # cell 1 loads the table (preloaded), cell 2 is the model's
    assert (lines[0]["grounded"], lines[0]["claims"]) == (True, "1 number: 1 from cell 2")
    assert lines[1]["grounded"] is False and "unsupported: 43.47" in lines[1]["claims"]
    summary = dabench.summarize("scripted:x", "auto", result, [dabench.Record(**r) for r in lines])
    assert summary.grounded == 0.5 and summary.to_dict()["grounded"] == 0.5
    assert "dabench-0" not in manager and "dabench-6" not in manager  # kernels closed after each


async def test_a_stopped_run_resumes_where_it_was(manager: SessionManager, tmp_path: Path) -> None:
    """``--resume``: the questions already in OUT.partial are not asked again, and they are
    scored with the rest (a run over many hours goes on across restarts)."""
    out = tmp_path / "responses.jsonl"
    first = dabench.parse_args(["--model", "scripted:x", "--data", str(DATA), "--ids", "0",
                                "--out", str(out), "--max-steps", "4"])
    await dabench.benchmark(first, _scripted_agent(), manager)
    asked: list[str] = []
    agent = _scripted_agent()
    script = agent.function
    assert script is not None

    def counting(call: ModelCall) -> AIMessage | str:
        asked.append(str(call.messages[1].content))
        return script(call)

    agent.function = counting
    again = dabench.parse_args(["--model", "scripted:x", "--data", str(DATA), "--ids", "0,6",
                                "--out", str(out), "--max-steps", "4", "--resume"])
    result = await dabench.benchmark(again, agent, manager)
    assert asked and not any("mean fare paid by the passengers" in q for q in asked), "0 was asked again"
    assert result.correct[0] == {"mean_fare": True} and set(result.correct) == {0, 6}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == [0, 6]
    assert [json.loads(line)["id"] for line in Path(f"{out}.partial").read_text().splitlines()] == [0, 6]


@pytest.mark.parametrize("argv", [["--model", "m", "--ids", "x"], [],
                                  ["--model", "m", "--resume"],
                                  ["--model", "m", "--model", "n", "--out", "o.jsonl", "--resume"]])
def test_bad_arguments_exit(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        dabench.parse_args(argv)
