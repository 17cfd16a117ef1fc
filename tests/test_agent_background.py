"""The agent and long or deadly cells (issue 19): a scripted model is told why the kernel
died (and what to do), and runs, waits for and is refused around a background run, under
both action protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nbformat
import pytest

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call
from kernel_analyst.agent.tools.background import find_directive

from .conftest import test_limits

GROW = "import time\nchunks = []\nwhile True:\n    chunks.append(b'x' * (20 * 2**20))\n    time.sleep(0.05)"
EPOCHS = ("# kernel-analyst: background\nimport time\nfor i in range(4):\n    print('epoch', i, flush=True)\n"
          "    time.sleep(1)\nscore = 0.9")


@pytest.fixture(scope="module")
async def small_manager(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SessionManager]:
    limits = test_limits(memory_mb=400)
    async with SessionManager(tmp_path_factory.mktemp("agent-bg"), limits=limits, pool_size=0) as manager:
        yield manager


async def test_the_model_is_told_why_the_kernel_died(small_manager: SessionManager) -> None:
    told: list[str] = []

    def remember(call: ModelCall) -> str:
        told.append(call.last_tool_output)
        return "noted"

    def then_exit(call: ModelCall) -> object:
        told.append(call.last_tool_output)
        return tool_call("import os\nos._exit(3)")

    model = ScriptedChatModel(script=[tool_call(GROW), then_exit, remember])
    answer = await Analyst(model, small_manager, require_work=False).ask("agent-endings", "Grow, then exit.")
    oom, exited = told
    assert oom.startswith("The kernel died while running this code: the kernel was killed at its memory "
                          "limit of 400 MB"), oom
    assert "use less memory" in oom and "memory warning" in oom, "the cause, the advice, the warning"
    assert "Resources:" in oom and "of a 400 MB limit" in oom
    assert "exited with code 3" in exited and "Do not end the kernel's process" in exited
    endings = [step.execution.ending for step in answer.steps]
    assert [e.cause.value if e else None for e in endings] == ["memory_limit", "exit"]


def _as_text(code: str) -> str:
    return f"Next step.\n```python\n{code}\n```"


@pytest.mark.parametrize("protocol", ["tools", "code"])
async def test_background_run_start_busy_wait(protocol: str, manager: SessionManager) -> None:
    def step(code: str) -> object:
        return tool_call(code) if protocol == "tools" else _as_text(code)

    seen: list[str] = []

    def after(code: str) -> object:
        def reply(call: ModelCall) -> object:
            text = call.last_tool_output if protocol == "tools" else str(call.last_message.content)
            seen.append(text)
            return step(code) if code else "The score is 0.9."
        return reply

    model = ScriptedChatModel(script=[step(EPOCHS), after("print('other')"),
                                      after("# kernel-analyst: wait 60"), after("")])
    analyst = Analyst(model, manager, protocol=protocol)  # type: ignore[arg-type]
    answer = await analyst.ask(f"agent-bg-{protocol}", "Train it.")
    started, busy, ended = seen
    assert "Started in the background as run run-" in started
    assert "Not run: the kernel is busy with background run" in busy
    assert "has ended (finished" in ended and "epoch 3" in ended and "score" in ended
    assert answer.text == "The score is 0.9." and len(answer.steps) == 3
    assert answer.steps[2].execution.status == "ok" and answer.steps[2].execution.variables
    cells = nbformat.read(answer.notebook_path, as_version=4).cells
    code_cells = [c for c in cells if c.cell_type == "code"]
    assert [c.source for c in code_cells] == [EPOCHS], "the run's cell; the other steps ran nothing"
    meta = code_cells[0].metadata["kernel_analyst"]
    assert meta["background"]["run"].startswith("run-") and meta["agent"]["step"] == 1


def test_directives_are_read_from_leading_comments() -> None:
    assert find_directive("# kernel-analyst: wait 30") == find_directive("\n#  kernel-analyst:wait 30\n")
    found = find_directive("# note\n# kernel-analyst: background\nx = 1")
    assert found is not None and found.kind == "background"
    assert find_directive("x = 1\n# kernel-analyst: wait") is None, "only before the code"
    assert find_directive("# kernel-analyst: no-replay\nx = 1") is None


async def test_a_wait_with_no_run_is_no_step_and_the_prose_beside_it_is_the_answer(
        manager: SessionManager) -> None:
    """Seen with the local model: its work done, it wrote its answer and then `wait`, `check`,
    `cancel` blocks copied from its prompt, each counted as a code run, until the limit."""
    model = ScriptedChatModel(script=[
        "```python\nprint(2, 3.0)\n```",
        "```python\n# kernel-analyst: check\n```",
        "2 rows, 3.0 hours apart.\n```python\n# kernel-analyst: wait 120\n```",
    ])
    analyst = Analyst(model, manager, protocol="code", require_work=False, max_steps=2)
    answer = await analyst.ask("agent-idle-directive", "How many rows, how many hours apart?")
    assert answer.ok and answer.text == "2 rows, 3.0 hours apart." and answer.stop_reason == "answered"
    assert len(answer.steps) == 1 and len(model.calls) == 3
    assert "There is no background run to check" in str(model.calls[2].last_message.content)
    cells = nbformat.read(answer.notebook_path, as_version=4).cells
    skipped = [c for c in cells if c.metadata.get("kernel_analyst", {}).get("reason") == "no_background_run"]
    assert len(skipped) == 1 and "Reply 2 ran nothing" in skipped[0].source
