"""End to end through the real langchain-openai client and a scripted server on 127.0.0.1."""

from __future__ import annotations

import base64
import json

import pytest

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import load_chat_model
from tests.conftest import SEABORN
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
