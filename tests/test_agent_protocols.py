"""The agent with models that write code as text, end to end: the real langchain-openai
client, a scripted OpenAI-compatible server on 127.0.0.1, real kernels, the CLI.

One test per reply shape seen from a real small model (Qwen2.5-Coder-1.5B behind
llama.cpp's server): code in a ```python fence with no tool call, the call as JSON in a
```json fence, ``<tool_call>`` tags in the text, and an answer with numbers before any
cell. Each time the code runs, its output reaches the model as the next message, the
answer computed from it is printed, and the notebook holds the cell with its output. The CLI
runs with ``--preload off`` here, so the model's own cell is the notebook's first (the
default, a preloaded table, has tests of its own in ``test_agent_uploads.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import load_chat_model
from tests.conftest import SEABORN, TEST_ISOLATION
from tests.openai_server import OpenAIServer, ScriptedReply

SURVIVAL = "import pandas as pd\ndf = pd.read_csv('titanic.csv')\nprint(df['survived'].mean())"
ANSWER = "The survival rate is 0.384 (0.3838 of 891 passengers survived)."

SHAPES = {
    "python_fence": f"I will compute the mean.\n\n```python\n{SURVIVAL}\n```\n\nThe survival rate is 0.6225.",
    "json_fence": "```json\n" + json.dumps({"name": "python", "arguments": {"code": SURVIVAL}}) + "\n```",
    "tool_call_tag": "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": SURVIVAL}})
                     + "\n</tool_call>",
}


def _ask_cli(tmp_path: Path, replies: list[ScriptedReply], capsys: pytest.CaptureFixture[str],
             *extra: str) -> tuple[int, str, list[dict[str, Any]], Any]:
    from kernel_analyst import cli

    out_nb = tmp_path / "audit.ipynb"
    with OpenAIServer(replies) as server:
        code = cli.main(["ask", str(SEABORN / "titanic.csv"), "What fraction of passengers survived?",
                         "--model", "openai:qwen", "--base-url", server.url, "--isolation", TEST_ISOLATION,
                         "--session-dir", str(tmp_path / "runs"), "-o", str(out_nb), "--preload", "off",
                         *extra])
        requests = list(server.requests)
    out, err = capsys.readouterr()
    assert code == 0, err
    return code, out, requests, nbformat.read(out_nb, as_version=4)


def _code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_code_written_as_text_runs_and_its_output_reaches_the_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        shape: str) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    replies = [ScriptedReply(text=SHAPES[shape]), ScriptedReply(text=ANSWER)]
    _, out, requests, nb = _ask_cli(tmp_path, replies, capsys)

    first, second = requests
    assert "tools" in first and "tools" in second  # auto keeps offering the tool: the prompt a server
    assert second["messages"][0] == first["messages"][0]  # cached stays the same, system prompt included
    assert "```python block" in second["messages"][0]["content"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    kept = second["messages"][2]["content"]
    assert "0.6225" not in kept  # the model's own guess after its code is not fed back to it
    observation = second["messages"][3]["content"]
    assert observation.startswith("Output of your code (step 1):\n0.3838383838383838")

    assert ANSWER in out and "0.3838383838383838" in out
    assert "writes in ```python blocks" in out  # the switch is said, once
    cells = _code_cells(nb)
    assert [c.source for c in cells] == [SURVIVAL]
    assert cells[0].outputs[0]["text"].startswith("0.3838383838383838")
    agent = cells[0].metadata["kernel_analyst"]["agent"]
    assert agent == {"via": shape, "protocol": "code", "turn": 1, "step": 1}
    answer = nb.cells[-1]
    meta = answer.metadata["kernel_analyst"]
    assert meta["role"] == "answer" and meta["claims"]["text"] == ANSWER  # cited in the cell:
    assert answer.source.startswith("### Answer\n\nThe survival rate is [0.384](#cell-id=")


def test_numbers_no_cell_produced_are_sent_back_once_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 20's example: after one cell that printed 0.3838, "41.2%" is wrong and "577" is
    # true of the file but computed by no cell; both are named, the model computes what it
    # keeps, and its corrected answer comes back grounded, with a derived difference named.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sexes = "print(df['sex'].value_counts())"
    replies = [ScriptedReply(text=f"```python\n{SURVIVAL}\n```"),
               ScriptedReply(text="The survival rate is 41.2%, and 577 passengers were male."),
               ScriptedReply(text=f"```python\n{sexes}\n```"),
               ScriptedReply(text="The survival rate is 38.4%; 577 passengers were male and 314 female, "
                                  "263 more men than women.")]
    _, out, requests, nb = _ask_cli(tmp_path, replies, capsys)

    feedback = requests[2]["messages"][-1]["content"]
    assert "not accepted yet" in feedback and "these numbers: 41.2%, 577." in feedback
    assert len(requests) == 4, "sent back once"
    answer = nb.cells[-1]
    claims = answer.metadata["kernel_analyst"]["claims"]["claims"]
    assert [(c["text"], c["status"]) for c in claims] == [("38.4%", "grounded"), ("577", "grounded"),
                                                          ("314", "grounded"), ("263", "derived")]
    assert claims[1]["source"]["cell"] == 2 and claims[3]["derivation"]["op"] == "difference"
    assert "[numbers: 4 numbers: 3 from cells 1, 2; 1 derived from them]" in out


def test_an_answer_whose_numbers_are_all_in_outputs_passes_with_no_extra_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    replies = [ScriptedReply(text=f"```python\n{SURVIVAL}\n```"),
               ScriptedReply(text="38.38% of the passengers survived.")]
    _, out, requests, nb = _ask_cli(tmp_path, replies, capsys)
    assert len(requests) == 2 and "not accepted" not in out
    assert "[numbers: 1 number: 1 from cell 1]" in out
    assert '[38.38%](#cell-id=' in nb.cells[-1].source


def test_an_answer_before_any_cell_is_sent_back_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    invented = "About 62% survived: 0.6225 of passengers, and 142 men."
    replies = [ScriptedReply(text=invented), ScriptedReply(text=f"```python\n{SURVIVAL}\n```"),
               ScriptedReply(text=ANSWER)]
    _, out, requests, nb = _ask_cli(tmp_path, replies, capsys)

    feedback = requests[1]["messages"][-1]
    assert feedback["role"] == "user" and "without running any code" in feedback["content"]
    assert "```python block" in feedback["content"]
    # the invented answer is not read back, and a model that answered instead of calling the
    # tool it was offered is asked for a python block (the system prompt, which offers both,
    # stays as it was)
    assert [m["role"] for m in requests[1]["messages"]] == ["system", "user", "user"]
    assert all("0.6225" not in str(m["content"]) for m in requests[1]["messages"])
    assert requests[1]["messages"][0] == requests[0]["messages"][0]
    note = requests[0]["messages"][1]["content"]
    assert "`titanic.csv` (891 rows; delimited text, encoding utf-8, delimiter ','): read it with" in note
    assert "    df = pd.read_csv('titanic.csv', encoding='utf-8', sep=',')\n" in note
    assert "Columns: survived (int64), pclass (int64), sex (str), age (float64)," in note
    assert requests[2]["messages"][-1]["content"].startswith("Output of your code (step 1):\n0.38383")
    assert ANSWER in out and "not accepted yet" in out
    sources = [c.source for c in nb.cells]
    assert any(invented in s for s in sources)  # the returned answer stays in the trail, marked
    returned = next(c for c in nb.cells if invented in c.source)
    assert returned.metadata["kernel_analyst"]["returned"] is True
    assert [c.source for c in _code_cells(nb)] == [SURVIVAL]


async def test_the_work_check_twice_then_off(manager: SessionManager) -> None:
    from kernel_analyst.agent.testing import ScriptedChatModel

    data = SEABORN / "titanic.csv"
    insisting = ScriptedChatModel(script=["It is 0.5.", "It is still 0.5.", "Really, 0.5."])
    answer = await Analyst(insisting, manager, attempts_on_doubt=1).ask("protocols-insist", "Rate?",
                                                                         files=[data])
    assert answer.stop_reason == "answered" and answer.text == "Really, 0.5." and answer.steps == []
    assert len(insisting.calls) == 3 and sum("not accepted" in n for n in answer.notes) == 2

    trusting = ScriptedChatModel(script=["It is 0.5."])
    answer = await Analyst(trusting, manager, require_work=False).ask("protocols-off", "Rate?", files=[data])
    assert answer.text == "It is 0.5." and len(trusting.calls) == 1 and answer.notes == []

    no_data = ScriptedChatModel(script=["Two."])
    answer = await Analyst(no_data, manager).ask("protocols-nodata", "What is 1 + 1?")
    assert answer.text == "Two." and len(no_data.calls) == 1  # nothing to compute from


async def test_after_native_tool_calls_an_illustrative_snippet_is_not_run(manager: SessionManager) -> None:
    snippet = "The rate is 0.3838. You can reproduce it with:\n```python\nraise SystemExit('never run')\n```"
    replies = [ScriptedReply(code=SURVIVAL), ScriptedReply(text=snippet)]
    with OpenAIServer(replies) as server:
        model = load_chat_model("openai:scripted", base_url=server.url, max_retries=0, timeout=30)
        answer = await Analyst(model, manager).ask("protocols-native", "Rate?",
                                                   files=[SEABORN / "titanic.csv"])
        assert "tools" in server.requests[1]  # still a tools conversation
    assert answer.stop_reason == "answered" and answer.text == snippet and answer.protocol == "tools"
    assert [s.code for s in answer.steps] == [SURVIVAL] and answer.steps[0].via == "tool_call"


async def test_code_protocol_binds_no_tools_and_work_shown_beside_the_answer_is_not_rerun(
        manager: SessionManager) -> None:
    shown = f"The rate is 0.3838.\n```python\n{SURVIVAL}\n```"
    replies = [ScriptedReply(text=f"```python\n{SURVIVAL}\n```"), ScriptedReply(text=shown)]
    with OpenAIServer(replies) as server:
        model = load_chat_model("openai:scripted", base_url=server.url, max_retries=0, timeout=30)
        analyst = Analyst(model, manager, protocol="code")
        answer = await analyst.ask("protocols-code", "Rate?", files=[SEABORN / "titanic.csv"])
        assert all("tools" not in r for r in server.requests)
        assert "```python block" in server.requests[0]["messages"][0]["content"]
    # the second reply only repeats code that already ran: it is the answer, not a new step
    assert answer.stop_reason == "answered" and answer.text == shown and len(answer.steps) == 1
    assert answer.notes == [] and analyst.protocol("protocols-code") == "code"


async def test_a_context_overflow_trims_the_oldest_output_and_goes_on(manager: SessionManager) -> None:
    too_long = ("the request (9001 tokens) exceeds the available context size (8192 tokens), "
                "try increasing it")
    replies = [ScriptedReply(text="```python\nprint('A' * 50)\n```"),
               ScriptedReply(text="```python\nprint('B' * 50)\n```"),
               ScriptedReply(error_status=400, error_message=too_long),
               ScriptedReply(text="Done: A and B.")]
    with OpenAIServer(replies) as server:
        model = load_chat_model("openai:scripted", base_url=server.url, max_retries=0, timeout=30)
        answer = await Analyst(model, manager, protocol="code").ask("protocols-overflow", "Print A then B")
        retried = server.requests[3]["messages"]
    assert answer.stop_reason == "answered" and answer.text == "Done: A and B."
    assert "removed here to fit" in retried[3]["content"] and "AAAA" not in retried[3]["content"]
    assert "BBBB" in retried[5]["content"]  # the newest output stays
    assert any("1 earlier outputs were removed" in n for n in answer.notes)
    nb = nbformat.read(answer.notebook_path, as_version=4)
    assert [c.outputs[0]["text"][:4] for c in _code_cells(nb)] == ["AAAA", "BBBB"]  # the notebook keeps both


async def test_a_full_shared_cache_asks_again_as_it_was_before_trimming_anything(
        manager: SessionManager) -> None:
    """llama.cpp's server with slots sharing one cache fails every reply it is decoding when
    the cache is full, whatever the request's length (DABench 35 ended so with one output
    in its request, nothing to trim): the same request is made again after a pause."""
    full = "Context size has been exceeded."
    replies = [ScriptedReply(text="```python\nprint('A' * 50)\n```"),
               ScriptedReply(text="Done: A and", error_status=500, error_message=full, error_in_stream=True),
               ScriptedReply(text="Done: A.")]
    with OpenAIServer(replies) as server:
        model = load_chat_model("openai:scripted", base_url=server.url, max_retries=0, timeout=30)
        events: list[Any] = []
        answer = await Analyst(model, manager, protocol="code").ask("protocols-full", "Print A",
                                                                    on_event=events.append)
        failed, again = server.requests[1]["messages"], server.requests[2]["messages"]
    assert answer.stop_reason == "answered" and answer.text == "Done: A." and answer.error is None
    assert again == failed and "AAAA" in again[-1]["content"]  # the same request, nothing trimmed
    assert not any("removed" in n for n in answer.notes)
    # the cut reply and the one made again stream as two calls: a front end shows them apart
    shown: dict[int, str] = {}
    for event in events:
        if type(event).__name__ == "ModelDelta":
            shown[event.call] = shown.get(event.call, "") + event.text
    assert list(shown.values())[-2:] == ["Done: A ", "Done: A."]


async def test_a_model_that_cannot_bind_tools_writes_code_under_auto(manager: SessionManager) -> None:
    from kernel_analyst.agent.testing import ScriptedChatModel

    class NoTools(ScriptedChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    model = NoTools(script=["```python\nprint(6 * 7)\n```", "42."])
    answer = await Analyst(model, manager).ask("protocols-notools", "6 times 7?")
    assert answer.text == "42." and answer.protocol == "code" and answer.steps[0].via == "python_fence"
    assert model.calls[1].messages[-1].content.startswith("Output of your code (step 1):\n42")


async def test_code_that_already_failed_sent_again_is_rolled_back(manager: SessionManager) -> None:
    """Stuck: go back, not on (issue 34). The repeat never runs; the kernel goes back to
    before the failing step, and the model's next request no longer holds the failing
    turns (the notebook keeps them, undone), only what to do instead."""
    from kernel_analyst.agent.testing import ScriptedChatModel

    wrong = "import pandas as pd\ndf = pd.read_csv('titanic.csv')\nprint(df['Survived'].mean())"
    fixed = f"```python\nimport pandas as pd\n{SURVIVAL}\n```"
    model = ScriptedChatModel(script=[f"```python\n{wrong}\n```", f"```python\n{wrong}\n```", fixed,
                                      "It is 0.3838."])
    answer = await Analyst(model, manager, protocol="code").ask("protocols-repeat", "Rate?",
                                                                 files=[SEABORN / "titanic.csv"])
    assert [s.execution.status for s in answer.steps] == ["error", "ok"]  # the repeat never ran
    first = str(model.calls[1].messages[-1].content)
    assert "The DataFrames' columns are: df: survived, pclass" in first
    sent = model.calls[2].messages
    told = str(sent[-1].content)
    assert told.startswith("Step 1 failed (KeyError: 'Survived') and you sent the same code again, so it "
                           "was taken back"), told
    assert "Variables now:" in told and "df: pandas.DataFrame (891, 15)" in told, "the loaded table is back"
    assert not any("Survived" in str(m.content) for m in sent[:-1]), "the failing turns are out"
    assert len(sent) == len(model.calls[0].messages) + 1
    cells = json.loads(answer.notebook_path.read_text())["cells"]
    failed = [c for c in cells if c["cell_type"] == "code" and "Survived" in "".join(c["source"])]
    assert len(failed) == 1 and failed[0]["metadata"]["kernel_analyst"].get("undone")
    assert any("failed the same way" in n or "taken out of the model's messages" in n for n in answer.notes)
    assert answer.text == "It is 0.3838."


async def test_the_briefings_profile_cell_is_not_work(manager: SessionManager) -> None:
    from kernel_analyst.agent.testing import ScriptedChatModel

    # 900 is a guess (the profile says 891): sent back, since the profile cell is no work
    model = ScriptedChatModel(script=["900 rows.", "```python\nprint(len(df))\n```", "891 rows."])
    answer = await Analyst(model, manager, profile_files=True).ask(
        "protocols-profile", "How many rows?", files=[SEABORN / "titanic.csv"])
    assert "is already loaded as the DataFrame `df`" in str(model.calls[0].messages[-1].content)
    assert any("not accepted" in n for n in answer.notes)  # the profile alone did not count
    assert [s.code for s in answer.steps] == ["print(len(df))"] and answer.text == "891 rows."
    nb = nbformat.read(answer.notebook_path, as_version=4)
    roles = [c.metadata["kernel_analyst"].get("role") for c in _code_cells(nb)]
    assert roles == ["profile", None]


async def test_every_output_restates_the_question_and_is_never_rewritten(manager: SessionManager) -> None:
    from kernel_analyst.agent.testing import ScriptedChatModel

    question = "What is 6 times 7? Answer as @product[value]."
    model = ScriptedChatModel(script=["```python\nx = 6\nprint(x)\n```", "```python\nprint(x * 7)\n```",
                                      "@product[42]"])
    answer = await Analyst(model, manager, protocol="code").ask("protocols-reminder", question)
    assert answer.text == "@product[42]" and len(answer.steps) == 2
    first_output, second_output = model.calls[2].messages[-3], model.calls[2].messages[-1]
    assert first_output == model.calls[1].messages[-1]  # as it was sent: a server's cached prompt holds
    assert first_output.text.rstrip().endswith(f"The question was: {question}")
    assert "42" in second_output.text
    assert second_output.text.rstrip().endswith(f"The question was: {question}")


async def test_code_alone_repeating_the_last_step_asks_for_the_answer(manager: SessionManager) -> None:
    from kernel_analyst.agent.testing import ScriptedChatModel

    block = "```python\nprint(6 * 7)\n```"
    model = ScriptedChatModel(script=[block, block, "@answer[42]"])
    answer = await Analyst(model, manager, protocol="code").ask("protocols-again", "6 times 7?")
    assert len(answer.steps) == 1 and answer.text == "@answer[42]"
    assert str(model.calls[2].messages[-1].content).startswith("Not run: this code just ran in step 1")
