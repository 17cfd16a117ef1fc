#!/usr/bin/env python
"""The route of one question through ``kernel_analyst/agent``: which modules the answer's
turn passes through, in order, and how often it comes back to one it already left.

One question with a scripted model and a real kernel: a table uploaded, two steps, one
answer sent back (it states a number no cell produced), the next answer accepted. A
profiler hook watches every call of a function in ``kernel_analyst.agent``; a call is on
the route when the turn (the loop's ``Turn`` object), or something it holds (its session,
conversation, messages, steps, variables, event callback), is one of its arguments or its
``self`` (the turn's own methods, in the module that defines it, do not count; a coroutine
resumed after an ``await`` is no new call). The route is the sequence of modules of those
calls, a module's consecutive calls merged into one visit; a return is a visit to a module
already visited before. It is printed twice: following the turn and what it holds, and
following the turn object alone. Run it on an older checkout to compare
(``KA_BENCH_TREE=../old python benchmarks/route.py``)::

    python benchmarks/route.py            # this checkout
    KA_BENCH_TREE=../old python benchmarks/route.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trees import use_tree

use_tree()

from kernel_analyst import Analyst, Limits, SessionManager  # noqa: E402
from kernel_analyst.agent.testing import ScriptedChatModel, tool_call  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "penguins.csv"
PACKAGE = "kernel_analyst.agent"


def _is_turn(value: Any) -> bool:
    return type(value).__name__ == "Turn" and type(value).__module__.startswith(PACKAGE)


def _parts(turn: Any) -> set[int]:
    """The turn and what it holds: its session, conversation, messages, steps, variables."""
    conversation = getattr(turn, "conversation", None)
    held = [turn, turn.session, conversation, turn.messages, turn.steps, getattr(turn, "emit", None),
            getattr(conversation, "variables", None), getattr(conversation, "history", None),
            getattr(turn, "review", None), getattr(turn, "usage", None)]
    return {id(value) for value in held if value is not None}


class Route:
    """The modules the turn passes through, recorded by a profiler hook: ``modules`` follows
    the turn and what it holds, ``turn_only`` the turn object alone."""

    def __init__(self) -> None:
        self.modules: list[str] = []
        self.turn_only: list[str] = []
        self.ran: set[str] = set()
        """Every module of the agent whose code ran for the question."""
        self._frames: set[FrameType] = set()  # a coroutine resumed after an await is no new call
        self.turn: Any = None

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame in self._frames:
            return
        self._frames.add(frame)
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE + "."):
            return
        self.ran.add(module)
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(name) for name in names]
        if self.turn is None:
            self.turn = next((value for value in values if _is_turn(value)), None)
        if self.turn is None or module == type(self.turn).__module__:  # the turn's own methods are no route
            return
        short = module[len(PACKAGE) + 1:]
        parts = _parts(self.turn)
        if any(id(value) in parts for value in values):
            _visit(self.modules, short)
        if any(value is self.turn for value in values):
            _visit(self.turn_only, short)

    def report(self) -> str:
        modules = sum(1 for _ in Path(__import__(PACKAGE, fromlist=["x"]).__file__).parent.rglob("*.py"))
        return "\n".join([f"modules of the agent whose code ran: {len(self.ran)} of {modules}",
                          "the turn and what it holds:", _described(self.modules, by_reply=True),
                          "the turn object alone:", _described(self.turn_only)])


def _visit(route: list[str], module: str) -> None:
    if not route or route[-1] != module:
        route.append(module)


def _described(route: list[str], *, by_reply: bool = False) -> str:
    seen: set[str] = set()
    lines, returns = [], 0
    for module in route:
        again = module in seen
        returns += again
        seen.add(module)
        lines.append(f"  {'<- ' if again else '-> '}{module}")
    within = f"; {_returns_within_replies(route)} of them within one reply" if by_reply else ""
    return "\n".join([*lines, f"  {len(route)} visits to {len(seen)} modules, {returns} returns{within}"])


def _returns_within_replies(route: list[str]) -> int:
    """Returns to a module left earlier in the same reply: the route is cut into replies at
    each visit to ``results`` (a model call's usage is added there, once per reply)."""
    returns, seen = 0, set()
    for module in route:
        if module == "results":
            seen = set()
        returns += module in seen
        seen.add(module)
    return returns


async def main() -> None:
    model = ScriptedChatModel(script=[
        tool_call("print(df['bill_length_mm'].mean().round(2))"),
        tool_call("print(df['species'].value_counts())"),
        lambda call: "The mean bill length is 43.92 mm over 345 penguins.",  # 345: no cell shows it
        lambda call: "The mean bill length is 43.92 mm; Adelie is the most common species.",
    ])
    route = Route()
    with tempfile.TemporaryDirectory() as root:
        async with SessionManager(root, limits=Limits(timeout_s=60), pool_size=1) as manager:
            analyst = Analyst(model, manager)
            sys.setprofile(route.hook)
            try:
                answer = await analyst.ask("route", "What is the mean bill length?", files=[DATA])
            finally:
                sys.setprofile(None)
    print(f"answer: {answer.stop_reason}, {len(answer.steps)} steps, notes: {len(answer.notes)}")
    print(route.report())


if __name__ == "__main__":
    asyncio.run(main())
