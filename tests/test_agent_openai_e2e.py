"""End to end through the real langchain-openai client and a scripted server on 127.0.0.1,
including ``--images``: a plot's PNG reaches the model when the setting and the model's
LangChain profile allow it, and only then."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import load_chat_model
from tests.conftest import SEABORN, TEST_ISOLATION
from tests.openai_server import OpenAIServer, ScriptedReply

CODE = """\
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv('titanic.csv')
print('survivors:', df['survived'].sum())
plt.figure(figsize=(3, 2)); df['age'].plot.hist(); plt.show()
"""


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
async def test_langchain_openai_against_a_scripted_server(manager: SessionManager, streaming: bool) -> None:
    replies = [ScriptedReply(text="Counting survivors.", code=CODE, prompt_tokens=100, completion_tokens=20),
               ScriptedReply(text="342 passengers survived.", prompt_tokens=300, completion_tokens=5)]
    with OpenAIServer(replies) as server:
        model = load_chat_model("openai:scripted-model", base_url=server.url, streaming=streaming,
                                stream_usage=True, max_retries=0, timeout=30)
        analyst = Analyst(model, manager, send_images=True)
        answer = await analyst.ask("agent-openai-e2e", "How many survived?", files=[SEABORN / "titanic.csv"])

    assert answer.stop_reason == "answered" and answer.text == "342 passengers survived."
    assert answer.steps[0].code == CODE and answer.steps[0].execution.status == "ok"
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.model_calls) == (400, 25, 2)

    first, second = server.requests
    assert bool(first.get("stream")) is streaming and first["model"] == "scripted-model"
    tool = first["tools"][0]["function"]
    assert tool["name"] == "python" and tool["parameters"]["required"] == ["code"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]

    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assistant, tool_message, figures = second["messages"][2:]
    call = assistant["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"code": CODE}
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == call["id"]
    assert tool_message["content"].startswith("survivors: 342\n[figure 1: ")
    assert figures["content"][0] == {"type": "text", "text": "Figures from step 1:"}
    url = figures["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")


PLOT = "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2)); plt.plot([1, 3, 2]); plt.show()"


def _image_urls(request: dict[str, object]) -> list[str]:
    """The data URLs of every image part in a chat-completions request."""
    found = []
    for message in request["messages"]:  # type: ignore[attr-defined]
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                found.append(part["image_url"]["url"])
    return found


@pytest.mark.parametrize(("model", "images", "sent"), [
    ("gpt-4o-mini", "auto", True),        # its LangChain profile says it takes images
    ("scripted-model", "on", True),       # no profile: "on" sends them
    ("gpt-4o-mini", "off", False),
    ("scripted-model", "auto", False),    # no profile: "auto" does not guess
    ("gpt-3.5-turbo", "on", False),       # its profile says it takes none: never
])
def test_the_images_flag_through_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str,
                                         images: str, sent: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_analyst import cli

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "points.csv"
    data.write_text("x\n1\n3\n2\n")
    replies = [ScriptedReply(code=PLOT), ScriptedReply(text="It rises, then falls.")]
    with OpenAIServer(replies) as server:
        code = cli.main(["ask", str(data), "What is the shape of the line?", "--model", f"openai:{model}",
                         "--base-url", server.url, "--images", images, "--isolation", TEST_ISOLATION])
        out, err = capsys.readouterr()
    assert code == 0, err
    assert "It rises, then falls." in out and "[figure 1: " in out
    first, second = server.requests
    system = first["messages"][0]["content"]
    urls = _image_urls(second)
    tool_text = next(m["content"] for m in second["messages"] if m["role"] == "tool")
    if sent:
        assert len(urls) == 1 and base64.b64decode(urls[0].split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
        assert "attached as an image" in tool_text and "Figures are sent to you as images" in system
    else:
        assert urls == [] and "not shown to you" in tool_text and "You cannot see figures" in system


def test_serve_passes_the_images_setting_to_its_agent(tmp_path: Path) -> None:
    import asyncio

    from langchain_openai import ChatOpenAI

    from kernel_analyst.server import ServerConfig
    from kernel_analyst.server.agent_bridge import AgentBridge
    from kernel_analyst.server.service import SessionService

    seeing = ChatOpenAI(model="gpt-4o-mini", api_key="unused", base_url="http://127.0.0.1:9/v1")
    for images, expected in (("auto", True), ("off", False), ("on", True)):
        config = ServerConfig(root_dir=tmp_path, images=images)  # type: ignore[arg-type]
        bridge = AgentBridge(config, model=seeing)
        asyncio.run(bridge.start(SessionService(config)))  # builds the analyst; starts no kernel
        assert bridge.require_model().sends_images is expected, images
