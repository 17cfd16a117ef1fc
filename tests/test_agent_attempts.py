"""Attempts that must agree (issue 34): a question in doubt tried again in forked branches.

The vote is pure and tested on made-up answers; the whole path runs through the real
langchain-openai client against a scripted OpenAI-compatible server on 127.0.0.1, with
real kernels, forks, keep and discard, and the audit trail re-run by ``verify``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import load_chat_model
from kernel_analyst.agent.feedback.agreement import Attempt, values_of, vote
from kernel_analyst.claims import SourceIndex, ground
from kernel_analyst.kernels.verify import verify_notebook
from tests.conftest import SEABORN
from tests.openai_server import OpenAIServer, ScriptedReply

TITANIC = SEABORN / "titanic.csv"
SHARE = "What share of the passengers survived? Answer as @share[value], to two decimal places."


def _attempt(number: int, text: str, cells: str = "", *, doubtful: bool = False) -> Attempt:
    cell = {"cell_type": "code", "id": f"c{number}", "execution_count": number, "source": "print(x)",
            "outputs": [{"output_type": "stream", "name": "stdout", "text": cells}], "metadata": {}}
    return Attempt(number, text, ground(text, SourceIndex.from_cells([cell])), doubtful)


def test_two_of_three_agree() -> None:
    attempts = [_attempt(1, "@share[0.50]", "0.5", doubtful=True), _attempt(2, "@share[0.38]", "0.3838"),
                _attempt(3, "@share[0.38]", "0.3838")]
    result = vote(attempts, SHARE)
    assert result.chosen == 2 and result.agree == (2, 3) and result.total == 3
    assert result.values[1] == ("share=0.50",)


def test_numbers_agree_within_rounding_and_names_without_case() -> None:
    question = "What is the mean fare, and which class paid most?"
    a = _attempt(1, "The mean fare is 32.2 and first class paid most.", "32.204")
    b = _attempt(2, "Mean fare: 32.20; First class.", "32.2042")
    assert values_of(a, question) == ("32.2",) and vote([a, b], question).agree == (1, 2)
    names = [_attempt(1, "Southampton"), _attempt(2, "southampton "), _attempt(3, "Cherbourg")]
    assert vote(names, "Which town?").agree == (1, 2)


def test_a_tie_goes_to_the_earliest_attempt_that_passed_every_check() -> None:
    attempts = [_attempt(1, "@share[0.50]", "0.5", doubtful=True), _attempt(2, "@share[0.38]", "0.38")]
    assert vote(attempts, SHARE).chosen == 2
    assert vote([_attempt(1, "", ""), _attempt(2, "@share[0.38]", "0.38")], SHARE).chosen == 2


def _model(server: OpenAIServer) -> Any:
    return load_chat_model("openai:qwen", base_url=server.url, max_retries=0, timeout=60)


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text())["cells"]
    return cells


def test_the_attempts_budget_follows_what_a_question_takes_here() -> None:
    from typing import cast

    from kernel_analyst.agent.feedback.judge import JudgeSettings
    from kernel_analyst.agent.loop.attempts import MIN_BUDGET_S, Attempts
    from kernel_analyst.agent.loop.ending import Outcome
    from kernel_analyst.agent.results import Answer

    def took(seconds: float) -> Outcome:
        answer = Answer("It is 3.", [], Path("audit.ipynb"), "answered", duration_s=seconds)
        return Outcome(answer, cast(Any, None))

    judging = JudgeSettings(max_steps=5, tool_name="python")
    attempts = Attempts(every=1, on_doubt=3, parallel=2, judging=judging)
    assert attempts.budget_s(took(10)) == MIN_BUDGET_S  # nothing known yet: at least the minimum
    assert attempts.budget_s(took(90)) == 180  # twice the first attempt
    for seconds in (100, 120, 140):
        attempts.observe(took(seconds))
    # a first attempt that answered at once, on a server where a question takes 120 s now
    assert attempts.budget_s(took(20)) == 240
    # nothing known yet, and the first attempt answered at once in two calls of 25 s each
    # (DABench 5: its two attempts were stopped at 111 s): attempts that compute make more
    from kernel_analyst.agent.loop.attempts import COMPUTING_CALLS
    from kernel_analyst.agent.results import Timing
    at_once = took(55)
    at_once.answer.timing = Timing(seconds=55, model_s=50, calls=2)
    fresh = Attempts(every=1, on_doubt=3, parallel=2, judging=judging)
    assert fresh.budget_s(at_once) == 2 * COMPUTING_CALLS * 25


def test_an_agreement_with_nothing_to_compare_says_so() -> None:
    from kernel_analyst.agent.results import Agreement

    alone = Agreement(1, [1], 1, {1: ["correlation_coefficient=0.00"]}, {1: "@correlation_coefficient[0.00]"})
    assert alone.summary() == "no other attempt answered: nothing to compare"
    empty = Agreement(1, [1], 1, {1: ["share=0.50"], 2: []}, {1: "0.50", 2: ""})
    assert empty.summary() == "no other attempt answered: nothing to compare; attempt 2 gave no answer"
    assert Agreement(2, [2, 3], 3, {1: ["x=1"], 2: ["x=2"], 3: ["x=2"]}, {}).summary() == (
        "2 of 3 attempts agree; attempt 1 gave x=1")


def test_attempts_on_doubt_add_at_most_half_the_latest_questions_time() -> None:
    """One account for the attempts made because an answer is in doubt: half the latest
    questions' first attempts and a minute, less what their attempts took. A question the
    account cannot pay for keeps its first answer and says why; attempts asked for every
    question are not bounded so."""
    from types import SimpleNamespace
    from typing import cast

    from kernel_analyst.agent.feedback.decisions import Reason
    from kernel_analyst.agent.feedback.judge import JudgeSettings
    from kernel_analyst.agent.loop.attempts import Attempts
    from kernel_analyst.agent.loop.ending import Outcome
    from kernel_analyst.agent.results import Answer

    turn = SimpleNamespace(notes=[], emit=lambda event: None)

    def took(seconds: float, *, doubtful: bool = True) -> Outcome:
        answer = Answer("It is 3.", [], Path("audit.ipynb"), "answered", duration_s=seconds)
        doubts = (Reason("form", "- The answer lacks the form's items."),) if doubtful else ()
        return Outcome(answer, cast(Any, turn), doubts)

    judging = JudgeSettings(max_steps=5, tool_name="python")
    attempts = Attempts(every=1, on_doubt=3, parallel=2, judging=judging)  # the default share, 0.5

    first = took(100)
    attempts.observe(first)
    assert attempts.credit_s() == 0.5 * 100 + 60
    assert attempts.wanted(first) == 3  # 110 s can pay for one attempt of about 100 s
    assert attempts.time_for(first) == 110  # not the 200 s the question alone would get
    attempts.extra[-1] += 150  # what its attempts took (run() adds it)

    second = took(100)
    attempts.observe(second)
    assert attempts.credit_s() == 0.5 * 200 + 60 - 150
    assert attempts.wanted(second) == 1
    assert turn.notes[-1].startswith("The answer is in doubt (The answer lacks the form's items) but was not "
                                     "tried again: one more attempt takes about 100 s")
    assert "10 s left" in turn.notes[-1]
    assert second.answer.notes == [turn.notes[-1]], "the answer, made before, says so too"
    assert attempts.wanted(took(100, doubtful=False)) == 1

    for _ in range(3):  # answers not in doubt fill the account again
        attempts.observe(took(100, doubtful=False))
    third = took(100)
    attempts.observe(third)
    assert attempts.credit_s() == 0.5 * 600 + 60 - 150 and attempts.wanted(third) == 3
    # over the latest questions, first attempts and the attempts they paid for: at most 1.5x and a minute
    assert sum(attempts.recent) + sum(attempts.extra) <= 1.5 * sum(attempts.recent) + 60

    every = Attempts(every=3, on_doubt=3, parallel=2, judging=judging)
    every.observe(took(100))
    every.extra[-1] += 1000
    assert every.wanted(took(100, doubtful=False)) == 3 and every.time_for(took(100)) == 200
    unbounded = Attempts(every=1, on_doubt=3, parallel=2, judging=judging, share=None)
    unbounded.observe(took(100))
    unbounded.extra[-1] += 1000
    assert unbounded.wanted(took(100)) == 3 and unbounded.time_for(took(100)) == 200

    # a restarted service or a resumed benchmark counts the questions it answered before
    resumed = Attempts(every=1, on_doubt=3, parallel=2, judging=judging)
    for first_s, extra_s in ((100, 0), (100, 0), (100, 150), (100, 0)):
        resumed.remember(first_s, extra_s)
    fresh = took(200)
    resumed.observe(fresh)
    assert resumed.credit_s() == 0.5 * 600 + 60 - 150 and resumed.wanted(fresh) == 3
    empty = Attempts(every=1, on_doubt=3, parallel=2, judging=judging)
    empty.observe(took(200))
    assert empty.wanted(took(200)) == 1, "the same question with an empty account is not tried again"

    # the question's own time bound holds the attempts too (DABench hard 39: 51 minutes under 30)
    bounded = Attempts(every=1, on_doubt=3, parallel=2, share=None,
                       judging=JudgeSettings(max_steps=5, tool_name="python", max_seconds=300))
    bounded.observe(took(100))
    assert bounded.wanted(took(100)) == 3 and bounded.time_for(took(100)) == 200  # 200 s left
    assert bounded.time_for(took(150)) == 150, "no further than the bound"
    turn.notes.clear()
    late = took(250)
    assert bounded.wanted(late) == 1
    assert turn.notes[-1].startswith("The answer was not tried again (The answer lacks the form's items): "
                                     "one more attempt takes about 250 s, and the question's time bound "
                                     "(question_timeout) leaves 50 s"), turn.notes
    every_bounded = Attempts(every=3, on_doubt=3, parallel=2, share=None,
                             judging=JudgeSettings(max_steps=5, tool_name="python", max_seconds=300))
    assert every_bounded.wanted(took(290, doubtful=False)) == 1, "asked for every question: bounded too"


async def test_three_attempts_where_two_agree_give_the_agreed_value(manager: SessionManager) -> None:
    share = "print(round(df['survived'].mean(), 4))"
    replies = [
        # attempt 1 (the conversation's own): a number no cell printed, three times (it goes
        # back twice), so in doubt
        ScriptedReply(code=share), ScriptedReply(text="@share[0.50]"), ScriptedReply(text="@share[0.50]"),
        ScriptedReply(text="@share[0.50]"),
        # attempts 2 and 3, in branches (one at a time, so the script's order holds)
        ScriptedReply(code="alive = df['survived'].sum()\nprint(alive, len(df), round(alive / len(df), 4))"),
        ScriptedReply(text="@share[0.38]"),
        ScriptedReply(code=share), ScriptedReply(text="@share[0.38]"),
    ]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager, parallel_attempts=1)
        answer = await analyst.ask("attempts-vote", SHARE, files=[TITANIC])
        requests = server.requests
    assert answer.ok and answer.text == "@share[0.38]", answer.notes
    assert answer.agreement is not None and answer.agreement.agree == [2, 3] and answer.agreement.chosen == 2
    assert answer.agreement.summary() == "2 of 3 attempts agree; attempt 1 gave share=0.50"
    assert any("2 of 3 attempts agree" in note for note in answer.notes)
    # the attempts started from the same messages as the first (a server's cached prompt holds)
    first_question = requests[0]["messages"]
    assert "again it gives numbers no output shows" in str(requests[3]["messages"][-1]["content"])
    assert requests[4]["messages"] == first_question and requests[6]["messages"] == first_question
    assert requests[4].get("temperature") == 0.7, "a further attempt samples"
    # the trail: the first attempt's cells abandoned, attempt 3's recorded abandoned, attempt 2 kept
    cells = _cells(answer.notebook_path)
    code = [c for c in cells if c["cell_type"] == "code"]
    live = ["".join(c["source"]) for c in code if not c["metadata"].get("kernel_analyst", {}).get("undone")]
    assert any("alive = df['survived'].sum()" in source for source in live)
    assert not any(source == share for source in live), "the other attempts' cells are not the line"
    assert sum(share in "".join(c["source"]) for c in code) == 2, "attempts 1 and 3 stay in the trail"
    assert "### Answer" in "".join(cells[-1]["source"]) and "0.38" in "".join(cells[-1]["source"])
    assert answer.claims is not None and answer.claims.all_grounded
    # the kept path re-runs: verify reproduces the conversation's notebook
    report = await verify_notebook(answer.notebook_path, manager, data_dirs=[SEABORN])
    assert report.reproduced, report.to_dict()
    assert not report.moved_answers, "the answer's number is what the kept cells print"


async def test_every_question_tried_three_times_when_asked(manager: SessionManager) -> None:
    count = "print(len(df))"
    replies = [ScriptedReply(code=count), ScriptedReply(text="There are 891 passengers."),
               ScriptedReply(code=count), ScriptedReply(text="891 passengers."),
               ScriptedReply(code=count), ScriptedReply(text="There are 891.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager, attempts=3, parallel_attempts=1)
        answer = await analyst.ask("attempts-all", "How many passengers are there?", files=[TITANIC])
    assert answer.ok and answer.agreement is not None
    assert answer.agreement.summary() == "3 of 3 attempts agree" and answer.agreement.chosen == 1
    assert answer.text == "There are 891 passengers."
