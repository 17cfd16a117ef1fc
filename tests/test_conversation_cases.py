"""The conversation benchmark (benchmarks/conversations.py): every expected answer recomputed
from its file, the grading of answers as people write them, and one conversation asked of the
product with a scripted model that runs the cases' own code."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import asdict
from types import ModuleType, SimpleNamespace

import httpx
import pytest

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call
from tests.conftest import ROOT


def _load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conversations", ROOT / "benchmarks" / "conversations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["conversations"] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)  # puts benchmarks/ on sys.path for its own imports
    return module


runner = _load_runner()
cases = sys.modules["conversation_cases"]
llama = sys.modules["_llama"]


def test_every_expected_answer_is_recomputed_from_the_files() -> None:
    assert cases.check_cases() == []
    assert len(cases.CONVERSATIONS) >= 5 and all(5 <= len(c.questions) <= 7 for c in cases.CONVERSATIONS)
    assert any(c.file.startswith("messy/") for c in cases.CONVERSATIONS)
    asked = {p for c in cases.CONVERSATIONS for q in c.questions for p in q.probes}
    assert asked >= {"change", "subset", "after-subset", "percent", "relation", "date-part", "top-n",
                     "name", "bool", "about-previous"}
    assert all("change" in c.questions[0].probes for c in cases.CONVERSATIONS)


def test_a_case_that_no_longer_agrees_is_reported() -> None:
    taxis = cases.CONVERSATIONS[0]
    wrong = cases.Question("How many rides?", "result = len(df)", cases.Number("6389"))
    changed = cases.Conversation("taxis", taxis.file, taxis.load, (wrong,))
    values = cases.recompute(changed)
    assert values == [6433] and not wrong.expected.agrees(values[0])


N, Name, Hour, Bool, Items = cases.Number, cases.Name, cases.Hour, cases.Bool, cases.Items
SHARE = N("26.6807", share=True)
OLDEST = Items((N("80"), N("74")), ordered=True)
WORST = Items((Name("hi 1200d"), Name("chevy c20"), Name("ford f250")))


@pytest.mark.parametrize(("expected", "answer", "right"), [
    (N("6389"), "6,389 rides are left.", True),
    (N("6389"), "There are 6389 rides.", True),
    (N("6389"), "6,433 rides.", False),
    (SHARE, "26.68% were paid in cash.", True),
    (SHARE, "About 27%.", True),
    (SHARE, "A share of 0.2668.", True),
    (SHARE, "100.0% of them.", False),
    (SHARE, "26.5%", False),
    (SHARE, "0%", False),
    (N("8.5167"), "The youngest paid £8.52.", True),
    (N("8.5167"), "The youngest paid 0.0.", False),
    (N("0.528", share=True), "52.8% in April.", True),
    (Hour(18), "Most rides start at 18:00.", True),
    (Hour(18), "At 6 PM (417 rides).", True),
    (Hour(18), "Around 6 p.m.", True),
    (Hour(18), "The most common pickup time is 2019-03-13 18:05:19.", False),
    (Hour(18), "At 6 am.", False),
    (Hour(18), "At 17:00.", False),
    (Name("Sun", ("Sunday",)), "**Sunday** has the highest.", True),
    (Name("Sun", ("Sunday",)), "Friday has the highest.", False),
    (Name("80", ("1980",)), "Model year 80 (1980).", True),
    (Name("80", ("1980",)), "1982, with 33.80 mpg on average.", False),
    (Name("Queens"), "queens", True),
    (Name("Queens"), "Manhattan", False),
    (Bool(False), "No, smokers tipped a higher percent (16.1% vs 15.9%).", True),
    (Bool(False), "False.", True),
    (Bool(False), "Yes, non-smokers tipped more.", False),
    (Bool(False), "Non-smokers tipped 15.9%.", False),  # no yes or no: not an answer to the question
    (Bool(True), "Yes: 56.9% of them were in first class.", True),
    (OLDEST, "The two oldest were 80 and 74 years old.", True),
    (OLDEST, "74 and 80.", False),
    (OLDEST, "The oldest was 80.", False),
    (WORST, "ford f250, chevy c20 and hi 1200d", True),
    (WORST, "hi 1200d and chevy c20", False),
])
def test_answers_are_graded_as_people_write_them(expected: object, answer: str, right: bool) -> None:
    assert cases.grade(answer, expected) is right


def test_analyst_options_and_token_events() -> None:
    assert runner.analyst_options(["attempts=3", "send_images=false", "x=0.5", "protocol=tools"]) == {
        "attempts": 3, "send_images": False, "x": 0.5, "protocol": "tools"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        runner.analyst_options(["attempts"])
    clock = runner.EventClock()
    clock(SimpleNamespace(type="model_text", text="Let me look."))
    clock(SimpleNamespace(type="model_token", text=" "))
    assert clock.first_token_s is None
    clock(SimpleNamespace(type="model_token", text="Hi"))
    assert clock.first_token_s is not None and clock.types == {"model_text": 1, "model_token": 2}


async def test_timings_of_a_streamed_reply_pass_through() -> None:
    chunks = [b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n',
              b'data: {"choices":[],"timings":{"prompt_n":26,"cache_n":5,"prompt_ms":900.5,',
              b'"predicted_n":3,"predicted_ms":160.0}}\n\ndata: [DONE]\n\n']

    async def body() -> object:
        for chunk in chunks:
            yield chunk

    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/plain"):
            return httpx.Response(200, json={"timings": {"prompt_n": 7, "predicted_n": 2}})
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    timings = llama.Timings()
    async with httpx.AsyncClient(transport=httpx.MockTransport(reply), event_hooks=timings.hooks) as client:
        async with client.stream("POST", "http://server/v1/chat/completions") as response:
            seen = [chunk async for chunk in response.aiter_raw()]
        await client.post("http://server/plain")
    assert b"".join(seen) == b"".join(chunks)
    streamed, plain = timings.calls
    assert (streamed.prompt_n, streamed.cache_n, streamed.prompt_ms) == (26, 5, 900.5)
    assert streamed.predicted_n == 3
    assert (plain.prompt_n, plain.predicted_n) == (7, 2) and timings.first_request is not None


def _script(conversation: object) -> list[object]:
    """Each question: a tool call running the case's code (the file's reading first), then an
    answer made of what it printed."""

    def answer(call: ModelCall) -> str:
        found = re.search(r"RESULT: (.*)", call.last_tool_output)
        assert found, call.last_tool_output
        return f"The answer is {found.group(1)}."

    replies: list[object] = []
    for n, question in enumerate(conversation.questions):  # type: ignore[attr-defined]
        code = (conversation.load + "\n" if n == 0 else "") + question.code  # type: ignore[attr-defined]
        replies += [tool_call(code + "\nprint('RESULT:', result)"), answer]
    return replies


async def test_one_conversation_scripted_is_graded_all_right(manager: SessionManager) -> None:
    taxis = next(c for c in cases.CONVERSATIONS if c.name == "taxis")
    model = ScriptedChatModel(script=_script(taxis))
    analyst = Analyst(model, manager)
    timings = llama.Timings()
    asked = []
    for index in range(1, len(taxis.questions) + 1):
        files = [taxis.path()] if index == 1 else []
        asked.append(await runner.ask(analyst, taxis, index, files, timings))
    assert [(q.right, q.stop_reason, q.steps) for q in asked] == [(True, "answered", 1)] * len(asked), [
        (q.answer, q.error) for q in asked]
    assert all(q.first_token_s is None or q.first_token_s >= 0 for q in asked)  # n/a until tokens stream
    assert all(q.events["answer"] == 1 and q.events["step_finished"] == 1 for q in asked)
    runs = [runner.Run("taxis", "this", 1.0, asked)]
    summary = runner.summarize(runs)
    assert (summary["right"], summary["first_right"], summary["follow_up_right"]) == (1.0, 1.0, 1.0)
    assert summary["by_probe"]["change"] == 1.0 and summary["questions"] == 6
    again = runner._from_dict(json.loads(json.dumps(asdict(runs[0]))))
    assert again == runs[0]
    assert runner.row("this", asked[1]).split()[3] == "ok"


def test_no_slip_is_named_beside_the_conversations_own_code() -> None:
    """The hand-written answer of every conversation question: a slip named beside right code
    costs the model a step (the slips' own tests are in tests/test_slips.py)."""
    from kernel_analyst.agent.feedback.slips import slips_in

    found = [(c.name, q.text, [r.text[:80] for r in slips]) for c in cases.CONVERSATIONS for q in c.questions
             if (slips := slips_in(q.text, q.code))]
    assert found == []
