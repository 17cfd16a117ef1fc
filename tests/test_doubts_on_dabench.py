"""The doubt checks (agent/feedback/doubts.py) on DABench's own right answers: an answer
check that doubts a right answer costs a send-back, or an attempt, every time that shape of
question is asked. Each of the 257 questions whose labels give every ``@name`` of its
format is answered with its labels, over its table's row count, and none may be doubted."""

from __future__ import annotations

import json
import re

import pandas as pd

from kernel_analyst.agent.feedback.answers import AnswerCase
from kernel_analyst.agent.feedback.decisions import QuestionFacts
from kernel_analyst.agent.feedback.doubts import _AVERAGE_ASKED, _takes_average, doubtful
from kernel_analyst.agent.feedback.rules import stated_rules
from kernel_analyst.claims import Grounding
from tests.conftest import SHARED
from tests.dseval_problems import reference_cells

DABENCH = SHARED / "datasets" / "dabench"


def test_no_right_answer_of_dabench_is_doubted() -> None:
    lines = (DABENCH / "da-dev-questions.jsonl").read_text().splitlines()
    questions = {q["id"]: q for q in map(json.loads, lines)}
    rows: dict[str, int] = {}
    asked = 0
    doubted: list[str] = []
    for label in map(json.loads, (DABENCH / "da-dev-labels.jsonl").read_text().splitlines()):
        q = questions[label["id"]]
        named = set(re.findall(r"@(\w+)\[", q["format"]))
        given = dict(label["common_answers"])
        if not named <= set(given):
            continue  # the labels check only some of the format's items
        if q["file_name"] not in rows:
            rows[q["file_name"]] = len(pd.read_csv(DABENCH / "da-dev-tables" / q["file_name"],
                                                   encoding_errors="replace", on_bad_lines="skip"))
        answer = "\n".join(f"@{name}[{value}]" for name, value in given.items())
        text = f"{q['question']}\n{q['constraints']}\n{q['format']}"
        facts = QuestionFacts(text, table_rows=(rows[q["file_name"]],))
        reason = doubtful(AnswerCase(answer, Grounding(), facts))
        asked += 1
        if reason is not None:
            doubted.append(f"{label['id']}: {reason.text}")
    assert asked >= 200, asked
    assert doubted == []


def test_the_rules_dabench_states_are_read() -> None:
    """The verdict rules on a p-value and a coefficient (:mod:`...feedback.rules`) as
    DABench words them: all twelve questions of the linear / nonlinear / none shape give
    their three rules, and the right answers meet the rule their verdict names (the doubt
    above holds none of them against the labels)."""
    questions = [json.loads(line) for line in (DABENCH / "da-dev-questions.jsonl").read_text().splitlines()]
    shaped = [q for q in questions
              if "nonlinear if" in q["constraints"] or "nonlinear relationship" in q["constraints"]]
    assert len(shaped) >= 10
    for q in shaped:
        rules = stated_rules(q["constraints"])
        outcomes = [rule.outcome for rule in rules]
        words = [set(o.split()) for o in outcomes]
        assert any("nonlinear" in w for w in words) and any("linear" in w for w in words), (q["id"], outcomes)
        assert all(str(c).startswith(("p ", "|r| ")) for rule in rules for c in rule.conditions), q["id"]
    assert sum(bool(stated_rules(f"{q['question']} {q['constraints']}")) for q in questions) >= 25


def test_dsevals_reference_code_takes_the_averages_its_questions_ask() -> None:
    """The "no average" doubt reads code as calls and names, not words: DSEval's reference
    cells for its 60 questions that ask for an average take one (or read one an earlier cell
    took: ``['Mean GDP']``, ``average='weighted'``), all but the two whose authors' code takes
    none (the highest single car's mpg; a growth rate's maximum)."""
    asked = [(name, code) for name, question, code in reference_cells() if _AVERAGE_ASKED.search(question)]
    untaken = [name for name, code in asked if not _takes_average(code)]
    assert len(asked) >= 50
    assert untaken == ["automobile-dataset", "netflix-ott-revenue-and-subscribers-csv-file"]
