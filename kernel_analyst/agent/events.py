"""Events of one answer, in the order :meth:`Analyst.stream` yields them.

For each model call: any number of :class:`ModelDelta` (the reply as it is written), then
:class:`ModelReplied` (its seconds and tokens). For each step: :class:`StepStarted`,
:class:`StepCode`, any number of :class:`StepOutput` (as the kernel produces them),
:class:`StepFinished`. Between model calls, :class:`ModelText` carries text the model wrote
beside its code, and
:class:`AgentNote` what the loop itself did (a protocol switch, an answer sent back). The last
event is always :class:`FinalAnswer`. Every event has ``type`` and ``to_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..kernels.execution import Execution
from .results import Answer


@dataclass(frozen=True)
class StepStarted:
    """The model asked to run code; the step is about to start."""

    step: int
    """1-based step number within the answer."""
    tool_call_id: str = ""
    """The id of the model's tool call ("" for code written as text)."""
    via: str = "tool_call"
    """How the code arrived (see :class:`~kernel_analyst.agent.protocols.Via`)."""
    type: Literal["step_started"] = "step_started"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "step": self.step, "tool_call_id": self.tool_call_id, "via": self.via}


@dataclass(frozen=True)
class StepCode:
    """The code of a step, sent to the kernel."""

    step: int
    """1-based step number within the answer."""
    code: str
    """The source being run."""
    type: Literal["step_code"] = "step_code"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "step": self.step, "code": self.code}


@dataclass(frozen=True)
class StepOutput:
    """One output (or stream chunk) of a running step, as it arrives."""

    step: int
    """1-based step number within the answer."""
    output: dict[str, Any]
    """An nbformat v4 output dict (streams arrive as chunks)."""
    type: Literal["step_output"] = "step_output"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "step": self.step, "output": self.output}


@dataclass(frozen=True)
class StepFinished:
    """A step ended; what the model will be shown about it."""

    step: int
    """1-based step number within the answer."""
    execution: Execution
    """The kernel's result."""
    observation: str
    """The text the model is shown."""
    type: Literal["step_finished"] = "step_finished"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "step": self.step, "execution": self.execution.to_dict(),
                "observation": self.observation}


@dataclass(frozen=True)
class ModelText:
    """Text the model wrote beside its tool calls (its reasoning between steps)."""

    text: str
    """The text."""
    type: Literal["model_text"] = "model_text"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True)
class ModelDelta:
    """A piece of the model's reply as it is written: text, or the code of a tool call."""

    text: str
    """The new text (append it to what came before in this call)."""
    call: int
    """The model call it belongs to (1-based within the answer; a call made again, after the
    server failed it on the way, has a number of its own)."""
    kind: Literal["text", "code"] = "text"
    """``text``: the reply's text (code written as text included); ``code``: the code of a
    native tool call, as its arguments arrive."""
    type: Literal["model_delta"] = "model_delta"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "text": self.text, "call": self.call, "kind": self.kind}


@dataclass(frozen=True)
class ModelReplied:
    """A model call ended: where its seconds and tokens went."""

    call: int
    """The model call (1-based within the answer)."""
    seconds: float
    """From the request to the reply's end."""
    first_token_s: float | None = None
    """From the request to the first visible piece of the reply (None: nothing visible)."""
    input_tokens: int = 0
    """Prompt tokens, as the provider counts them."""
    cached_tokens: int = 0
    """Of those, the ones the server had cached (it did not process them again)."""
    output_tokens: int = 0
    """Tokens generated."""
    cut: str = ""
    """Why the reply was cut short ("" when it ended by itself): ``limit`` (the token limit),
    or what it kept repeating."""
    type: Literal["model_replied"] = "model_replied"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "call": self.call, "seconds": self.seconds,
                "first_token_s": self.first_token_s, "input_tokens": self.input_tokens,
                "cached_tokens": self.cached_tokens, "output_tokens": self.output_tokens, "cut": self.cut}


@dataclass(frozen=True)
class AgentNote:
    """Something the loop did that the user should know about (not model text)."""

    kind: Literal["protocol_switched", "answer_returned", "context_trimmed", "undo", "reply_not_run",
                  "partial", "answer_completed", "rollback", "attempts"]
    """``protocol_switched``: the model writes code as text, and the conversation now runs
    it; ``answer_returned``: an answer was sent back to the model (see the text);
    ``context_trimmed``: earlier outputs were removed to fit the model's context;
    ``undo``: the model undid cells (the text is the report, or why nothing was undone);
    ``reply_not_run``: a reply ran nothing (the same code again, code cut at the length
    limit, an unreadable call: the text says which); ``partial``: the steps ran out and the
    answer is partial (the text says why); ``answer_completed``: the answer lacked the
    form's ``@name[value]`` items and they were taken from what its cells printed;
    ``rollback``: steps that failed the same way were undone and taken out of the model's
    messages; ``attempts``: the question is tried again in forked branches (the text says
    why, each attempt's answer, and how they agreed)."""
    text: str
    """One line for a person."""
    type: Literal["note"] = "note"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "kind": self.kind, "text": self.text}


@dataclass(frozen=True)
class FinalAnswer:
    """The answer is complete (always the last event)."""

    answer: Answer
    """The same object :meth:`Analyst.ask` returns."""
    type: Literal["answer"] = "answer"
    """Event type tag."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"type": self.type, "answer": self.answer.to_dict()}


AgentEvent = (StepStarted | StepCode | StepOutput | StepFinished | ModelText | ModelDelta | ModelReplied
              | AgentNote | FinalAnswer)
"""Any event of :meth:`Analyst.stream`."""
