#!/usr/bin/env python
"""What the model reads, part by part, before and after: the system prompt, the tools, the
question's note on the data; for the first question of a conversation and a follow-up.

Each tree (``--tree DIR``, repeatable, e.g. a ``git worktree`` of an older commit; default
this one) asks the first two questions of each conversation of ``benchmarks/conversation_cases.py``
with its own defaults, against the scripted OpenAI-compatible server of the tests (a model
that runs one cell and answers with what it printed), so the requests are exactly what that
tree sends a model. Each request is cut into its parts and counted in characters and in
tokens of the local model (Qwen2.5-Coder-1.5B: llama-server's ``/apply-template`` with the
tools, and ``/tokenize``; ``--base-url``); with no server, characters only. Medians over the
conversations::

    python benchmarks/prompt_parts.py --tree ../base --tree . [--base-url http://127.0.0.1:8766]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _llama import Tokenizer
from _tree_runs import run_in_tree
from _trees import use_tree
from conversation_cases import CONVERSATIONS, DEFAULT_DATA

PARTS = ("system", "tools", "question", "note", "whole request")
_NOTE_MARK = "\n\n---\n"


async def capture(data: Path) -> dict[str, Any]:
    """The first model request of the first and of the second question of each conversation,
    as this process's kernel_analyst sends them."""
    from langchain_openai import ChatOpenAI

    from kernel_analyst import Analyst, SessionManager
    from tests.openai_server import OpenAIServer, ScriptedReply

    captured: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as root:
        async with SessionManager(root) as manager:
            for conversation in CONVERSATIONS:
                requests = []
                for n, question in enumerate(conversation.questions[:2]):
                    replies = [ScriptedReply(code="print(df.shape)"), ScriptedReply(text="It is done."),
                               *[ScriptedReply(text="It is done.")] * 6]
                    with OpenAIServer(replies) as server:
                        model = ChatOpenAI(base_url=server.url, api_key="local", model="scripted")
                        files = [conversation.path(data)] if n == 0 else []
                        try:
                            await Analyst(model, manager).ask(conversation.name, question.text, files=files)
                        except Exception as exc:  # the script ran out: the first request is all we need
                            print(f"{conversation.name} {n + 1}: {exc}", file=sys.stderr)
                        requests.append(server.requests[0])
                captured[conversation.name] = requests
                await manager.close(conversation.name)
    return captured


def _content(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(str(p.get("text", "")) for p in content)


def parts(request: dict[str, Any]) -> dict[str, Any]:
    """A request cut into its parts (texts; the tools as the JSON the server reads)."""
    messages = request["messages"]
    system = "\n".join(_content(m) for m in messages if m["role"] == "system")
    user = _content([m for m in messages if m["role"] == "user"][-1])
    question, _, note = user.partition(_NOTE_MARK)
    return {"system": system, "tools": request.get("tools") or [], "question": question, "note": note,
            "messages": messages}


class Counter:
    """Tokens of the local model, through llama-server (None without one)."""

    def __init__(self, base_url: str | None) -> None:
        self.tokenizer = Tokenizer(base_url) if base_url else None

    def tokens(self, text: str) -> int | None:
        return None if self.tokenizer is None else self.tokenizer.tokens(text)

    def templated(self, messages: list[dict[str, Any]], tools: list[Any]) -> int | None:
        return None if self.tokenizer is None else self.tokenizer.templated(messages, tools)


def measure(request: dict[str, Any], counter: Counter) -> dict[str, dict[str, int | None]]:
    """Characters and tokens of each part of one request."""
    p = parts(request)
    tools_json = json.dumps(p["tools"]) if p["tools"] else ""
    whole = counter.templated(p["messages"], p["tools"])
    without_tools = counter.templated(p["messages"], [])
    figures: dict[str, dict[str, int | None]] = {
        "system": {"chars": len(p["system"]), "tokens": counter.tokens(p["system"])},
        "tools": {"chars": len(tools_json),
                  "tokens": None if whole is None or without_tools is None else whole - without_tools},
        "question": {"chars": len(p["question"]), "tokens": counter.tokens(p["question"])},
        "note": {"chars": len(p["note"]), "tokens": counter.tokens(p["note"])},
        "whole request": {"chars": sum(len(json.dumps(m)) for m in p["messages"]) + len(tools_json),
                          "tokens": whole},
    }
    return figures


def _median(values: list[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarize(captured: dict[str, Any], counter: Counter) -> dict[str, Any]:
    """Medians over the conversations, per part, for the first question and the follow-up."""
    out: dict[str, Any] = {}
    for which, label in ((0, "first question"), (1, "follow-up")):
        requests = [asked[which] for asked in captured.values() if len(asked) > which]
        measured = [measure(request, counter) for request in requests]
        out[label] = {part: {unit: _median([m[part][unit] for m in measured]) for unit in ("chars", "tokens")}
                      for part in PARTS}
    return out


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def report(results: dict[str, dict[str, Any]]) -> None:
    for label in ("first question", "follow-up"):
        print(f"\n{label} (medians over {len(CONVERSATIONS)} conversations): chars / tokens")
        print(f"{'part':<14}" + "".join(f"{tree[:18]:>22}" for tree in results))
        for part in PARTS:
            figures = [r[label][part] for r in results.values()]
            cells = [f"{_fmt(f['chars'])} / {_fmt(f['tokens'])}" for f in figures]
            print(f"{part:<14}" + "".join(f"{c:>22}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--tree", action="append", type=Path, default=[], help="a source tree (repeat to compare)")
    p.add_argument("--base-url", default="http://127.0.0.1:8766", help="llama-server, for token counts")
    p.add_argument("--no-tokens", action="store_true", help="characters only (no model server)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--capture", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.capture:
        use_tree()
        print(json.dumps(asyncio.run(capture(args.data))))
        return 0
    counter = Counter(None if args.no_tokens else args.base_url)
    results: dict[str, dict[str, Any]] = {}
    for tree in args.tree or [Path(__file__).resolve().parents[1]]:
        captured, why = run_in_tree(__file__, ["--capture", "--data", str(args.data)], tree)
        if captured is None:
            raise SystemExit(f"{tree}: {why}")
        results[tree.resolve().name] = summarize(captured, counter)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
