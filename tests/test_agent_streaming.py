"""A turn at the speed of the hardware (issue 35): the reply streamed as it is written to every
front end, and bounded (a token limit on the wire, a runaway cut, a deadline on each call).

Through the real langchain-openai client against a scripted OpenAI-compatible server on
127.0.0.1 that streams at a set pace, hangs, or repeats itself; the CLI as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernel_analyst import Analyst, KernelTool, SessionManager
from kernel_analyst.agent import load_chat_model
from kernel_analyst.agent.events import AgentEvent, ModelReplied
from kernel_analyst.agent.loop import calling
from kernel_analyst.agent.loop.server_watch import ServerWatch
from kernel_analyst.agent.tools.kernel_tool import OUTPUT_EVENT
from tests.conftest import SEABORN
from tests.openai_server import OpenAIServer, ScriptedReply

ROOT = Path(__file__).resolve().parents[1]


def _model(server: OpenAIServer) -> Any:
    # as a user builds it: no token limit, no timeout of its own
    return load_chat_model("openai:scripted", base_url=server.url, max_retries=0)


async def test_the_default_token_limit_is_sent_on_the_wire(manager: SessionManager) -> None:
    with OpenAIServer([ScriptedReply(text="Hello.")]) as server:
        answer = await Analyst(_model(server), manager).ask("stream-limit", "Say hello.")
        request = server.requests[0]
    assert answer.text == "Hello."
    assert request.get("max_completion_tokens", request.get("max_tokens")) == 1024
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}


async def test_a_reply_repeating_itself_is_cut_before_the_token_limit(manager: SessionManager) -> None:
    repeating = "The total is 42.\n" * 200  # 600 words, streamed one a chunk
    replies = [ScriptedReply(text=repeating, chunk_delay_s=0.002), ScriptedReply(text="The total is 42.")]
    seen: list[AgentEvent] = []
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("stream-runaway", "What is the total?",
                                                            on_event=seen.append)
        told = str(server.requests[1]["messages"][-1]["content"])
        read_back = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
        sent = len(server.sent.get(0, []))
        temperatures = [r.get("temperature") for r in server.requests]
    first = next(e for e in seen if isinstance(e, ModelReplied))
    assert first.cut.startswith("the same ") and first.cut.endswith(" again and again")
    assert sent < 200, "the stream was closed long before the reply's end (and the 1024-token limit)"
    assert told.startswith(f"Your reply was cut and is left out here: it repeated {first.cut}.")
    assert read_back == [], "the repeated text is not read back: a small model would repeat it again"
    # greedy, asked again, it would repeat itself again (DABench 8: three runaways, the question lost)
    assert temperatures == [None, 0.7], "the call after the runaway samples, that one only"
    assert answer.ok and answer.text == "The total is 42."


@pytest.mark.parametrize("as_call", [False, True])
async def test_a_code_block_cut_at_the_token_limit_is_not_read_back(manager: SessionManager,
                                                                     as_call: bool) -> None:
    """DABench hard 142 with the 1.5B model: three replies in a row wrote a code block to the
    token limit, each reading the last one back, and no step ran in 16 minutes. The cut block
    is left out of the next request, and that request samples. A tool call cut the same way
    (its arguments completed as JSON by the client) runs nothing either."""
    long_code = "values = [" + ", ".join(str(i) for i in range(300)) + "]\nprint(sum(values))"
    first = ScriptedReply(code=long_code) if as_call else ScriptedReply(text=f"```python\n{long_code}\n```")
    replies = [first, ScriptedReply(code="print(sum(range(300)))"), ScriptedReply(text="The total is 44850.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager, max_reply_tokens=60).ask(
            f"stream-cut-code-{as_call}", "What is the sum of the numbers below 300?")
        second = server.requests[1]
        temperatures = [r.get("temperature") for r in server.requests]
    told = str(second["messages"][-1]["content"])
    assert "cut at the reply's length limit" in told, told
    assert "values = [" not in str(second["messages"]), "the cut block is not read back"
    assert temperatures[:2] == [None, 0.7], temperatures
    assert answer.ok and answer.text == "The total is 44850.", answer.text


async def test_code_sent_again_after_it_ran_is_refused_and_the_next_call_samples(
        manager: SessionManager) -> None:
    """DABench hard 177 with the 1.5B model: told its cell had just run (and what the line after
    its output said), it sent the same cell three times more, greedy each time. The call after
    a refused repeat samples; the one after that is greedy again."""
    replies = [ScriptedReply(code="print(6 * 7)"), ScriptedReply(code="print(6 * 7)"),
               ScriptedReply(code="print(6 * 8)"), ScriptedReply(text="It is 48.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("stream-repeat", "What is six times eight?")
        temperatures = [r.get("temperature") for r in server.requests]
        refused = str(server.requests[2]["messages"][-1]["content"])
    assert "this code just ran in step 1" in refused, refused
    assert temperatures == [None, None, 0.7, None], temperatures
    assert answer.ok and answer.text == "It is 48."


async def test_a_hanging_server_ends_the_question_within_the_deadline(manager: SessionManager) -> None:
    replies = [ScriptedReply(code="print(6 * 7)"), ScriptedReply(hang_s=30),
               ScriptedReply(text="It is still 42.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager, model_timeout=1.5)
        started = time.monotonic()
        answer = await analyst.ask("stream-hang", "What is six times seven?")
        took = time.monotonic() - started
        assert took < 30, "it did not wait for the hanging server"
        assert answer.stop_reason == "error" and answer.partial
        assert answer.text == "The model call failed before an answer. The last result (step 1) was: 42"
        assert answer.error is not None and "sent nothing for 1.5 s" in answer.error
        assert "(its server does not show its slots" in answer.error, answer.error
        assert answer.claims is not None and answer.claims.all_grounded
        later = await analyst.ask("stream-hang", "And now?")  # the conversation goes on
        again = server.requests[2]["messages"]
    assert later.ok and later.text == "It is still 42."
    assert [m["role"] for m in again][-1] == "user" and "What is six times seven?" in str(again)


async def test_a_server_seen_at_work_is_waited_for_and_a_stuck_one_is_not(
        manager: SessionManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """DABench with four conversations on a 4-slot llama.cpp server: calls queued behind the
    other slots ended as "the model sent nothing for 300 s" while the server worked at full
    speed. A server whose ``/slots`` move is given more windows; one whose slots say they
    are processing and never move, or that has no ``/slots``, ends the call after one."""
    monkeypatch.setattr(calling, "LOOK_S", 0.6)
    monkeypatch.setattr(calling, "LOOK_EVERY_S", 0.2)
    question = "What is six times seven?"
    with OpenAIServer([ScriptedReply(hang_s=2.5, text="It is 42.")], slots="working") as server:
        answer = await Analyst(_model(server), manager, model_timeout=1.0).ask("busy-server", question)
        reads = server.slot_reads
    assert answer.ok and answer.text == "It is 42.", answer.error
    assert reads >= 2, "the server's slots were looked at"
    for slots in ("stuck", "none"):
        with OpenAIServer([ScriptedReply(hang_s=30, text="Too late.")], slots=slots) as server:
            started = time.monotonic()
            answer = await Analyst(_model(server), manager, model_timeout=1.0).ask(f"stuck-{slots}", question)
            took = time.monotonic() - started
            reads = server.slot_reads
        assert answer.stop_reason == "error" and answer.error is not None, slots
        assert "sent nothing for 1 s" in answer.error and took < 15, (slots, took)
        why = {"stuck": "(its server's slots did not move for 0.6 s)",
               "none": "(its server does not show its slots (/slots: HTTP 501))"}[slots]
        assert why in answer.error, answer.error  # what the look saw, for the person and the log
        assert (reads >= 2) if slots == "stuck" else (reads == 0), (slots, reads)  # looked at, and again


async def test_a_long_silence_before_the_first_chunk_is_the_analysts_to_bound(
        manager: SessionManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """DABench 124 on the local server, two conversations reading long prompts beside it:
    langchain-openai 1.7 ended the stream after its own 120 s without a chunk
    (``StreamChunkTimeoutError``), before the analyst's model timeout and its look at the
    server. That deadline is the analyst's: one the model was not given is dropped (on a
    copy), one it was given is kept."""
    monkeypatch.setenv("LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S", "0.5")
    question = "What is six times seven?"
    with OpenAIServer([ScriptedReply(first_chunk_s=1.5, text="It is 42.")]) as server:
        model = _model(server)
        answer = await Analyst(model, manager, model_timeout=10).ask("first-chunk-late", question)
    assert model.stream_chunk_timeout == 0.5, "the caller's own model is left as it was"
    assert answer.ok and answer.text == "It is 42.", answer.error
    with OpenAIServer([ScriptedReply(first_chunk_s=1.5, text="It is 42.")]) as server:
        strict = load_chat_model("openai:scripted", base_url=server.url, max_retries=0,
                                 stream_chunk_timeout=0.5)
        answer = await Analyst(strict, manager, model_timeout=10).ask("first-chunk-strict", question)
    assert answer.stop_reason == "error" and answer.error is not None
    assert "StreamChunkTimeoutError" in answer.error, answer.error


def test_the_watched_server_is_the_models_own() -> None:
    assert ServerWatch("http://127.0.0.1:8766/v1").root == "http://127.0.0.1:8766"
    assert ServerWatch("https://models.example/api/v1/").root == "https://models.example/api"
    assert ServerWatch(None).root is None and ServerWatch("file:///tmp/x").root is None


async def test_cell_outputs_reach_the_langchain_callbacks_as_they_come(manager: SessionManager) -> None:
    tool = KernelTool(manager)
    found = []
    async for event in tool.astream_events({"code": "print('a', flush=True)\nprint('b')"}, version="v2",
                                           config={"configurable": {"thread_id": "stream-tool"}}):
        if event["event"] == "on_custom_event" and event["name"] == OUTPUT_EVENT:
            found.append(event["data"])
    assert "".join(str(o.get("text", "")) for o in found) == "a\nb\n"


def test_the_cli_prints_the_reply_as_it_is_written(tmp_path: Path) -> None:
    words = " ".join(f"word{i}" for i in range(25))
    replies = [ScriptedReply(text=f"Counting. {words}", code="print(len(df))", chunk_delay_s=0.1),
               ScriptedReply(text="There are 244 rows.")]
    seen: dict[str, float] = {}
    with OpenAIServer(replies) as server:
        command = [sys.executable, "-m", "kernel_analyst.cli", "ask", str(SEABORN / "tips.csv"),
                   "How many rows?", "--model", "openai:scripted", "--base-url", server.url,
                   "--isolation", "none", "--session-dir", str(tmp_path / "runs")]
        env = {**os.environ, "OPENAI_API_KEY": "test", "PYTHONUNBUFFERED": "1"}
        with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as process:
            def read() -> None:
                assert process.stdout is not None
                shown = ""
                while piece := process.stdout.read(1):
                    shown += piece
                    for mark in ("word3", "word24", ">>> print(len(df))", "There are 244 rows."):
                        if mark in shown and mark not in seen:
                            seen[mark] = time.monotonic()

            reader = threading.Thread(target=read)
            reader.start()
            process.wait(timeout=120)
            reader.join(timeout=10)
            errors = process.stderr.read() if process.stderr else ""
        first_reply = server.sent[0]
    assert process.returncode == 0, errors
    assert seen["word3"] < first_reply[-1], "a word was printed before the reply's last chunk was sent"
    assert seen["word3"] < seen["word24"] < seen[">>> print(len(df))"] < seen["There are 244 rows."]


async def test_the_shared_prompt_prefix_is_warmed_once_beside_the_first_question(
        manager: SessionManager) -> None:
    with OpenAIServer([ScriptedReply(code="print(len(df))"), ScriptedReply(text="There are 244 rows."),
                       ScriptedReply(text="Still 244.")]) as server:
        analyst = Analyst(_model(server), manager)
        await analyst.ask("stream-warm", "How many rows?", files=[SEABORN / "tips.csv"])
        await analyst.ask("stream-warm", "And now?")
        warmups, first = list(server.warmups), server.requests[0]
    assert len(warmups) == 1, "once, not per question"
    assert warmups[0]["messages"][0] == first["messages"][0], "the same system prompt"
    assert warmups[0]["tools"] == first["tools"], "and the same tools: the prefix a server caches"


async def test_where_the_seconds_and_tokens_went(manager: SessionManager) -> None:
    with OpenAIServer([ScriptedReply(code="print(1 + 1)", prompt_tokens=120, completion_tokens=9),
                       ScriptedReply(text="It is 2.", prompt_tokens=160, completion_tokens=4)]) as server:
        answer = await Analyst(_model(server), manager).ask("stream-timing", "What is 1 + 1?")
    timing = answer.timing
    assert timing is not None and timing.calls == 2
    assert (timing.prompt_tokens, timing.output_tokens) == (280, 13)  # the server reports no cache
    assert timing.first_token_s is not None and 0 < timing.first_token_s <= timing.seconds
    assert timing.kernel_s == round(answer.steps[0].execution.duration_s, 3)
    assert timing.briefing_s + timing.model_s + timing.kernel_s <= timing.seconds
    assert type(answer).from_dict(answer.to_dict()).timing == timing
