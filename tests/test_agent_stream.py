"""Analyst events: order, outputs as they arrive, early close cancels the answer."""

from __future__ import annotations

import contextlib
import json
import time

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import (
    AgentEvent,
    FinalAnswer,
    ModelText,
    StepCode,
    StepFinished,
    StepOutput,
    StepStarted,
)
from kernel_analyst.agent.events import ModelDelta, ModelReplied
from kernel_analyst.agent.testing import ScriptedChatModel, tool_call

SCRATCH = "agent-scratch"

# The cell waits (up to 20 s) for a file that the test writes only after it has seen
# the cell's first output as an event: it finishes quickly only if outputs stream live.
WAIT_FOR_GO = """\
import os, time
print('waiting', flush=True)
deadline = time.monotonic() + 20
while not os.path.exists('go') and time.monotonic() < deadline:
    time.sleep(0.01)
print('went' if os.path.exists('go') else 'gave up')
"""


async def test_events_arrive_in_order_and_live(manager: SessionManager) -> None:
    session = await manager.session(SCRATCH)
    (session.workdir / "go").unlink(missing_ok=True)
    model = ScriptedChatModel(script=[tool_call(WAIT_FOR_GO, text="Waiting for the signal."), "Done."])
    events: list[AgentEvent] = []
    async for event in Analyst(model, manager).stream(SCRATCH, "Wait for go"):
        events.append(event)
        if isinstance(event, StepOutput) and "waiting" in str(event.output.get("text")):
            (session.workdir / "go").write_text("")

    kinds = [type(e) for e in events if not isinstance(e, (ModelDelta, ModelReplied))]
    assert kinds[:3] == [ModelText, StepStarted, StepCode] and kinds[-2:] == [StepFinished, FinalAnswer]
    assert set(kinds[3:-2]) == {StepOutput}
    # the reply streams first, as it is written: its text, then its tool call's code
    first_reply = events[:next(i for i, e in enumerate(events) if isinstance(e, ModelReplied)) + 1]
    assert isinstance(first_reply[0], ModelDelta) and isinstance(first_reply[-1], ModelReplied)
    text = "".join(e.text for e in first_reply if isinstance(e, ModelDelta) and e.kind == "text")
    code = "".join(e.text for e in first_reply if isinstance(e, ModelDelta) and e.kind == "code")
    assert text == "Waiting for the signal." and code == WAIT_FOR_GO
    assert isinstance(events[len(first_reply)], ModelText)
    printed = "".join(str(e.output.get("text", "")) for e in events if isinstance(e, StepOutput))
    assert printed == "waiting\nwent\n"
    final = events[-1]
    assert isinstance(final, FinalAnswer) and final.answer.text == "Done."
    finished = next(e for e in reversed(events) if isinstance(e, StepFinished))
    assert finished.execution is final.answer.steps[0].execution
    json.dumps([e.to_dict() for e in events])  # every event is JSON-able


async def test_ask_reports_the_same_events(manager: SessionManager) -> None:
    model = ScriptedChatModel(script=[tool_call("print('hi')"), "Said hi."])
    seen: list[AgentEvent] = []
    answer = await Analyst(model, manager).ask(SCRATCH, "Say hi", on_event=seen.append)
    types = [e.type for e in seen]
    collapsed = [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]
    assert collapsed == ["model_delta", "model_replied", "step_started", "step_code", "step_output",
                         "step_finished", "model_delta", "model_replied", "answer"]
    assert isinstance(seen[-1], FinalAnswer) and seen[-1].answer is answer


async def test_closing_the_stream_cancels_and_interrupts(manager: SessionManager) -> None:
    spin = "import time\nprint('spinning', flush=True)\nfor _ in range(6000):\n    time.sleep(0.01)"
    model = ScriptedChatModel(script=[tool_call(spin)])
    analyst = Analyst(model, manager)
    stream = analyst.stream(SCRATCH, "Spin")
    async with contextlib.aclosing(stream):
        async for event in stream:
            if isinstance(event, StepOutput):
                break
    session = manager.get(SCRATCH)
    assert session is not None
    started = time.monotonic()
    ex = await session.execute("print('alive')", timeout=20)
    assert ex.text == "alive\n" and time.monotonic() - started < 10  # the spin (60 s) was interrupted
    assert analyst.history(SCRATCH) == []  # an unfinished answer leaves no history
