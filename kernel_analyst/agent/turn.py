"""What the analyst keeps of a conversation between answers, and of one answer while it is
being built (the loop in :mod:`.analyst` and the steps in :mod:`.steps` share these)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from ..kernels import KernelSession, VariableInfo
from .events import AgentEvent
from .hints import ErrorTeacher
from .protocols import ProtocolState
from .results import Step, Usage
from .review import AnswerReview

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
    """Its uploaded tables and the last step's error (:mod:`.hints`)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One answer at a time."""


@dataclass
class Turn:
    """The state of one answer while it is being built."""

    conversation_id: str
    question: str
    session: KernelSession
    conversation: Conversation
    messages: list[BaseMessage]
    emit: EventCallback
    files: list[str]
    review: AnswerReview
    has_files: bool = False
    cells_before: int = 0
    evidence: str = ""
    """What the model was shown from the data before its first step (the profiles)."""
    first_cell: int = 0
    """The index of this question's first cell in the notebook (its question cell)."""
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    """Replies that asked to run code (or tried to), counted against ``max_steps``."""
    replies: int = 0
    """Model replies so far."""
    idle: int = 0
    """Replies in a row that ran nothing (repeats, unreadable calls, cut code)."""
    error: str | None = None
    last_text: str = ""
    notes: list[str] = field(default_factory=list)
    trimmed: int = 0
    trim_note: str = ""
    undone_at: int = -1
    """The number of steps when the model last undid a cell (code may run again after it)."""
    undos: int = 0
    """Undos the model asked for in this answer (a reply that undoes is not idle)."""
    started: float = field(default_factory=time.monotonic)


__all__ = ["Conversation", "EventCallback", "Turn"]
