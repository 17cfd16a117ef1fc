"""What the loop keeps of a conversation between answers, and of one answer while it is built.

:class:`Conversation` lives between answers (its history, the variables as the model knows
them, the protocol it follows, the hints' memory). :class:`Turn` is one answer: the
messages sent to the model, the steps, the notes for the user; the judge reads a snapshot
of it (:meth:`Turn.facts`), never the turn. The judge's own counters are in its budget,
not here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from ...kernels import KernelSession, VariableInfo
from ..events import AgentEvent, ModelReplied
from ..feedback.decisions import TurnFacts
from ..feedback.hints import ErrorTeacher
from ..prompting import message
from ..protocols import ProtocolState
from ..results import Step, TableChange, Usage
from ..tools.background import BackgroundSteps

EventCallback = Callable[[AgentEvent], None]
"""Receives each event of an answer, in order (called synchronously)."""


@dataclass
class Conversation:
    """What the analyst remembers of one conversation between answers."""

    protocol: ProtocolState
    """The action protocol it follows."""
    history: list[BaseMessage] = field(default_factory=list)
    """The messages of its completed answers (figures replaced by a note)."""
    variables: dict[str, VariableInfo] = field(default_factory=dict)
    """The kernel's variables as the model last learned of them."""
    turns: int = 0
    """Answers completed."""
    teacher: ErrorTeacher = field(default_factory=ErrorTeacher)
    """Its uploaded tables and the last step's error (:mod:`kernel_analyst.agent.feedback.hints`)."""
    background: BackgroundSteps = field(default_factory=BackgroundSteps)
    """Its background runs, as the model has seen them."""
    changes: dict[str, TableChange] = field(default_factory=dict)
    """The changes to the person's tables questions asked for, the latest of each table."""
    origins: dict[str, int] = field(default_factory=dict)
    """Each changed table's rows before its first change."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One answer at a time."""
    asked: list[str] = field(default_factory=list)
    """The questions of its completed answers, in order."""
    answered: list[str] = field(default_factory=list)
    """The texts of its completed answers, in the same order."""


@dataclass
class Turn:
    """The state of one answer while it is being built."""

    conversation_id: str
    """The conversation's id."""
    question: str
    """The question as asked."""
    session: KernelSession
    """The conversation's kernel session."""
    conversation: Conversation
    """What is kept between answers."""
    messages: list[BaseMessage]
    """What the model is sent: the system prompt, the history, this answer so far."""
    emit: EventCallback
    """Where events go."""
    files: list[str] = field(default_factory=list)
    """The files uploaded with the question."""
    question_at: int = 0
    """The index in :attr:`messages` of the question's message (an attempt starts from there)."""
    first_cell: int = 0
    """The position of the question's cell in the notebook."""
    steps: list[Step] = field(default_factory=list)
    """The code runs of this answer."""
    usage: Usage = field(default_factory=Usage)
    """Tokens, summed over the model calls."""
    replies: int = 0
    """Model replies so far."""
    remade: int = 0
    """Model calls made again (the server's cache was full, or the request did not fit): each
    one numbers its events anew, so a front end shows the new reply apart from the cut one."""
    error: str | None = None
    """What failed (the model call, the kernel): the answer ends with it."""
    notes: list[str] = field(default_factory=list)
    """What the loop did that the user should know (the answer's notes)."""
    trimmed: int = 0
    """Observations trimmed from the messages to fit the model's context."""
    reply_at: dict[int, int] = field(default_factory=dict)
    """Each step's reply: the index in :attr:`messages` of the model message that asked for it."""
    current_reply: int = 0
    """The index of the reply whose actions are being done."""
    rolled_back: bool = False
    """The current reply's turns were taken out of the messages (a rollback)."""
    temperature: float | None = None
    """The temperature of the next model call only (None: the model's own)."""
    sampling: float | None = None
    """The temperature of every call of this answer (an attempt in a branch samples)."""
    started: float = field(default_factory=time.monotonic)
    """When the answer began (``time.monotonic``)."""
    calls: list[ModelReplied] = field(default_factory=list)
    """Each model call's seconds and tokens, in order."""
    first_call_at: float | None = None
    """When the first model call began (``time.monotonic``)."""

    @property
    def protocol(self) -> ProtocolState:
        """The conversation's action protocol."""
        return self.conversation.protocol

    @property
    def cells(self) -> list[dict[str, Any]]:
        """The conversation's notebook cells."""
        return self.session.audit.cells

    def facts(self) -> TurnFacts:
        """The answer as the judge reads it, now (a snapshot)."""
        conversation = self.conversation
        return TurnFacts(steps=tuple(self.steps), cells=tuple(self.cells),
                         variables=dict(conversation.variables), protocol=conversation.protocol,
                         failed=self.error is not None,
                         pending=lambda: conversation.background.pending(self.session),
                         lookup=self.session.column_values, told=self.told(),
                         elapsed_s=time.monotonic() - self.started)

    def told(self) -> tuple[str, ...]:
        """The agent's own words to the model since the question (the question itself, which
        each output restates; send-backs, hints, the notice of a rollback; not the outputs of
        its code, which an answer may quote), for the judge to tell an echo from an answer."""
        output = message("code_output", step=0).split("(")[0]
        said = [text for m in self.messages[self.question_at + 1:]
                if m.type == "human" and (text := str(m.text)) and not text.startswith(output)]
        return (self.question, *said)


__all__ = ["Conversation", "EventCallback", "Turn"]
