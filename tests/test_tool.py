"""KernelTool: LangChain's standard tool suites, thread routing, LangGraph agents."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from kernel_analyst.agent import KernelTool, KernelToolError
from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call
from kernel_analyst.kernels import SessionManager

# Two kernels shared by the routing tests: each test sets the state it reads.
THREAD_A, THREAD_B = "tool-thread-a", "tool-thread-b"

# Never started: the unit suite only constructs tools.
_UNSTARTED = SessionManager(Path(tempfile.gettempdir()) / "kernel-analyst-never-started")


class TestKernelToolUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> type[BaseTool]:
        return KernelTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"manager": _UNSTARTED}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"code": "print(6 * 7)"}


class TestKernelToolIntegration(ToolsIntegrationTests):
    """The standard suite, sync and async, against a real kernel."""

    @property
    def tool_constructor(self) -> type[BaseTool]:
        return KernelTool

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"code": "print(6 * 7)"}

    @pytest.fixture
    async def tool(self, manager: SessionManager) -> BaseTool:
        # Created inside the kernels' event loop, so sync invoke can drive that loop.
        return KernelTool(manager, default_session="tool-standard-suite")


async def test_content_and_artifact(manager: SessionManager) -> None:
    tool = KernelTool(manager, default_session="tool-standard-suite")
    msg = await tool.ainvoke({"name": "python", "args": {"code": "x = 6 * 7\nx"}, "id": "c1",
                              "type": "tool_call"})
    assert isinstance(msg, ToolMessage)
    assert "42" in msg.content and "Variables: created x: int" in msg.content
    assert msg.artifact["status"] == "ok" and msg.artifact["outputs"][0]["data"]["text/plain"] == "42"


def test_sync_invoke_inside_the_kernels_loop_is_refused(manager: SessionManager) -> None:
    async def inside() -> None:
        tool = KernelTool(manager)
        with pytest.raises(KernelToolError, match="ainvoke"):
            tool.invoke({"code": "1"})

    # A fresh loop stands in for "the loop the kernels run on" (the tool records it).
    asyncio.run(inside())


def test_sync_invoke_without_a_known_loop_says_what_to_do() -> None:
    with pytest.raises(KernelToolError, match="event loop"):
        KernelTool(_UNSTARTED).invoke({"code": "1"})


async def test_user_errors_are_content_not_exceptions(manager: SessionManager) -> None:
    tool = KernelTool(manager, default_session="tool-standard-suite")
    msg = await tool.ainvoke({"name": "python", "args": {"code": "1 / 0"}, "id": "c2", "type": "tool_call"})
    assert msg.status == "success"  # the tool worked; the code failed
    assert msg.content.startswith("Error: ZeroDivisionError: division by zero")
    assert msg.artifact["status"] == "error"


async def test_thread_id_selects_the_kernel(manager: SessionManager) -> None:
    tool = KernelTool(manager)
    a, b = THREAD_A, THREAD_B
    await tool.ainvoke({"code": "who = 'a'"}, config={"configurable": {"thread_id": a}})
    await tool.ainvoke({"code": "who = 'b'"}, config={"configurable": {"thread_id": b}})
    out_a = await tool.ainvoke({"code": "print(who)"}, config={"configurable": {"thread_id": a}})
    out_b = await tool.ainvoke({"code": "print(who)"}, config={"configurable": {"thread_id": b}})
    assert (out_a, out_b) == ("a", "b")
    assert a in manager and b in manager


async def test_images_as_content_blocks(manager: SessionManager) -> None:
    tool = KernelTool(manager, default_session="tool-standard-suite", send_images=True)
    code = "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2)); plt.plot([1, 3]); plt.show()"
    msg = await tool.ainvoke({"name": "python", "args": {"code": code}, "id": "c3", "type": "tool_call"})
    assert isinstance(msg.content, list)
    text, image = msg.content
    assert isinstance(text, dict) and re.search(r"figure 1: \d+x\d+ PNG; attached", text["text"])
    assert isinstance(image, dict) and image["type"] == "image" and image["mime_type"] == "image/png"


def _graph_model() -> ScriptedChatModel:
    """Runs the code after 'run:' in the user's message, then reports the tool's output."""

    def reply(call: ModelCall) -> AIMessage | str:
        last = call.last_message
        if isinstance(last, HumanMessage):
            return tool_call(str(last.content).removeprefix("run:").strip())
        return f"output: {call.last_tool_output}"

    return ScriptedChatModel(function=reply)


async def _exercise_agent(agent: Any, manager: SessionManager, var: str) -> None:
    """Two threads, two kernels: ``var`` set in each, read back in later invocations."""
    one, two = THREAD_A, THREAD_B

    async def ask(thread: str, text: str) -> str:
        state = await agent.ainvoke({"messages": [HumanMessage(text)]},
                                    config={"configurable": {"thread_id": thread}})
        return str(state["messages"][-1].content)

    assert await ask(one, f"run: {var} = 1") == f"output: (no output)\nVariables: created {var}: int = 1"
    assert await ask(two, f"run: {var} = 2") == f"output: (no output)\nVariables: created {var}: int = 2"
    assert await ask(one, f"run: print({var} * 10)") == "output: 10"
    assert await ask(two, f"run: print({var} * 10)") == "output: 20"
    assert one in manager and two in manager


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
async def test_langgraph_prebuilt_react_agent(manager: SessionManager) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    agent = create_react_agent(_graph_model(), [KernelTool(manager)], checkpointer=InMemorySaver())
    await _exercise_agent(agent, manager, "prebuilt")


async def test_langchain_create_agent(manager: SessionManager) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_agent(_graph_model(), [KernelTool(manager)], checkpointer=InMemorySaver())
    await _exercise_agent(agent, manager, "created_agent")
