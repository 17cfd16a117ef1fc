"""The kernel as a tool inside a LangGraph agent: one persistent kernel per thread id.

Needs: `pip install "kernel-analyst[openai]"` (LangChain, whose `create_agent` builds a
LangGraph ReAct agent) and a model that calls tools: OPENAI_API_KEY, or OPENAI_BASE_URL for
a local OpenAI-compatible server. Without a model, `--scripted` runs a scripted stand-in
so you can see the wiring:

    python examples/langgraph_tool.py --scripted
    python examples/langgraph_tool.py --model openai:gpt-4o-mini
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from kernel_analyst import KernelTool, SessionManager
from kernel_analyst.agent import load_chat_model
from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call

QUESTIONS = [
    ("alice", "Store the first 10 square numbers in a list named squares."),
    ("bob", "Store the first 10 prime numbers in a list named primes."),
    ("alice", "What is the sum of squares?"),
    ("bob", "Which variables exist in your Python session? Use dir()."),
]


def scripted_model() -> BaseChatModel:
    """Answers the four questions above with fixed code, reporting what the kernel printed."""
    code = {"square numbers": "squares = [i * i for i in range(1, 11)]",
            "prime numbers": "primes = [p for p in range(2, 30) if all(p % d for d in range(2, p))]",
            "sum of squares": "print(sum(squares))",
            "Which variables": "print([n for n in dir() if not n.startswith('_')])"}

    def reply(call: ModelCall) -> AIMessage | str:
        last = call.last_message
        if isinstance(last, HumanMessage):
            return tool_call(next(c for key, c in code.items() if key in str(last.content)))
        return f"The kernel says: {call.last_tool_output}"

    return ScriptedChatModel(function=reply)


async def main(args: argparse.Namespace) -> int:
    model = scripted_model() if args.scripted else load_chat_model(args.model, base_url=args.base_url)
    async with SessionManager(args.workdir) as manager:
        agent: Any = create_agent(model, [KernelTool(manager)], checkpointer=InMemorySaver())
        for thread, question in QUESTIONS:
            state = await agent.ainvoke({"messages": [HumanMessage(question)]},
                                        config={"configurable": {"thread_id": thread}})
            print(f"[{thread}] {question}\n  -> {state['messages'][-1].content}")
        print(f"\nkernels: {manager.list()}; notebooks under {manager.root_dir}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="openai:gpt-4o-mini",
                        help='"provider:model" (default: %(default)s)')
    parser.add_argument("--base-url", help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    parser.add_argument("--scripted", action="store_true", help="no LLM: a scripted stand-in model")
    parser.add_argument("--workdir", default="runs", help="sessions and notebooks (default: %(default)s)")
    sys.exit(asyncio.run(main(parser.parse_args())))
