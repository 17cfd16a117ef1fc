"""The agent's undo step (agent/undo.py) with a scripted model and real kernels: a wrong
inplace dropna is undone instead of reloaded, under both action protocols; a kernel that
cannot be checkpointed makes the undo an observation, not a failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent.testing import ScriptedChatModel, tool_call
from kernel_analyst.agent.tools.undo import find_undo, only_read
from kernel_analyst.kernels import Execution, LocalBackend, VariableChanges, VariableInfo

from .conftest import test_limits

MAKE = ("import pandas as pd\n"
        "df = pd.DataFrame({'a': [1.0, None, 3.0, 4.0], 'b': [None, 2.0, 3.0, 4.0]})\nlen(df)")
WRONG = "df.dropna(inplace=True)\nlen(df)"


def undo_call(to: int | None = None) -> AIMessage:
    args: dict[str, Any] = {} if to is None else {"to": to}
    return AIMessage(content="", tool_calls=[{"name": "undo", "args": args, "id": None, "type": "tool_call"}])


def code_cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text())["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def last_line(text: str) -> str:
    """The printed value (pandas 3.1 warns about ``inplace`` above it)."""
    return text.strip().splitlines()[-1]


def undone(cell: dict[str, Any]) -> bool:
    return bool(cell["metadata"].get("kernel_analyst", {}).get("undone"))


def test_find_undo() -> None:
    assert find_undo("# kernel-analyst: undo") == (True, None)
    assert find_undo("\n# kernel-analyst: undo 3\n") == (True, 3)
    assert find_undo("# kernel-analyst: undo [4]") == (True, 4)
    assert find_undo("# kernel-analyst: undo\nx = 1") == (False, None)
    assert find_undo("# kernel-analyst: wait 10") == (False, None)


def test_a_step_that_only_read_has_nothing_to_undo() -> None:
    read = Execution(code="", status="ok")
    assert only_read("print(df.shape[0], df['t'].diff().mean())", read)
    assert only_read("df.head()\nlen(df)", read)
    assert not only_read("x = 1", read)
    assert not only_read("df.dropna(inplace=True)", read)
    assert not only_read("print(items.pop())", read)
    assert not only_read("exec('x = 1')", read)
    assert not only_read("print(1", read)
    assert not only_read("print(1)", Execution(code="", status="error"))
    made = Execution(code="", status="ok",
                     variables=VariableChanges(created=[VariableInfo(name="x", type="int")]))
    assert not only_read("print(1)", made)


async def test_an_undo_after_a_step_that_only_printed_is_no_step(manager: SessionManager) -> None:
    """Seen with the local model: its answer printed, it wrote the answer with an undo block
    copied from its prompt, re-ran the cell, undid it again, until its code runs ran out."""
    model = ScriptedChatModel(script=[
        "```python\nimport pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\n```",
        "```python\nprint(len(df), df['a'].sum())\n```",
        "2 rows, summing to 3.\n```python\n# kernel-analyst: undo\n```",
    ])
    answer = await Analyst(model, manager, protocol="code", offer_undo=True).ask("undo-only-read",
                                                                                 "Rows and their sum?")
    assert answer.stop_reason == "answered" and answer.text == "2 rows, summing to 3.", answer
    assert len(answer.steps) == 2 and not any(undone(c) for c in code_cells(answer.notebook_path))


async def test_undo_tool_brings_the_frame_back(manager: SessionManager) -> None:
    model = ScriptedChatModel(script=[
        tool_call(MAKE), tool_call(WRONG), undo_call(), tool_call("len(df)"),
        lambda call: f"df has {call.last_tool_output.splitlines()[0]} rows.",
    ])
    analyst = Analyst(model, manager, offer_undo=True)
    answer = await analyst.ask("undo-tools", "How many rows does df have?")

    assert answer.stop_reason == "answered", answer.error
    assert [last_line(s.execution.text) for s in answer.steps] == ["4", "2", "4"]
    assert answer.text == "df has 4 rows."
    assert [t["function"]["name"] for t in model.calls[0].tools] == ["python", "undo"]
    assert "call the `undo` tool" in str(model.calls[0].messages[0].content)
    told = model.calls[3].last_tool_output
    assert told.startswith("Undid [2]: the variables are as they were before cell [2]."), told
    cells = code_cells(answer.notebook_path)
    assert [undone(c) for c in cells] == [False, True, False]
    assert "Undid [2]" in answer.notebook_path.read_text()


async def test_undo_directive_under_code(manager: SessionManager) -> None:
    def block(code: str) -> str:
        return f"```python\n{code}\n```"

    model = ScriptedChatModel(script=[
        block(MAKE), block(WRONG), block(WRONG), block("# kernel-analyst: undo"), block(WRONG),
        block("# kernel-analyst: undo 3"), block("len(df)"), "df has 4 rows.",
    ])
    analyst = Analyst(model, manager, protocol="code", offer_undo=True)
    answer = await analyst.ask("undo-code", "How many rows does df have?")

    assert answer.stop_reason == "answered", answer.error
    # The second WRONG repeats the step before it and is not run; after the undo it runs again.
    assert [last_line(s.execution.text) for s in answer.steps] == ["4", "2", "2", "4"]
    assert "# kernel-analyst: undo" in str(model.calls[0].messages[0].content)
    assert "Undid [2]" in str(model.calls[4].last_message.content)
    assert "Undid [3]" in str(model.calls[6].last_message.content)
    assert [undone(c) for c in code_cells(answer.notebook_path)] == [False, True, True, False]


async def test_undo_without_checkpoints_is_an_observation(tmp_path: Path) -> None:
    async with SessionManager(tmp_path / "s", limits=test_limits(),
                              backend=LocalBackend(template=False)) as cold:
        model = ScriptedChatModel(script=[tool_call("x = 1"), undo_call(), "Nothing to undo."])
        analyst = Analyst(model, cold, offer_undo=True)
        answer = await analyst.ask("undo-cold", "Set x.")
        assert answer.stop_reason == "answered", answer.error
        told = model.calls[2].last_tool_output
        assert told.startswith("Nothing was undone:") and "template" in told, told
        session = cold.get("undo-cold")
        assert session is not None and session.limits.checkpoints == 0
        assert not any("checkpoint" in e for s in answer.steps for e in s.execution.events)
