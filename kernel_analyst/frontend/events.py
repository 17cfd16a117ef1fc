"""Typed dispatch of the agent's events: one method per event class, chosen by type.

The terminal printer and the service's event stream both subclass
:class:`AgentEventHandler` and override the methods they need; an event is never
matched by its ``type`` string::

    class Printer(AgentEventHandler):
        def step_code(self, event: StepCode) -> None:
            print(event.code)

    analyst.ask(conversation, question, on_event=Printer().dispatch)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agent.events import (
        AgentEvent,
        AgentNote,
        FinalAnswer,
        ModelDelta,
        ModelReplied,
        ModelText,
        StepCode,
        StepFinished,
        StepOutput,
        StepStarted,
    )


class AgentEventHandler:
    """Receives agent events; every method does nothing unless overridden."""

    def dispatch(self, event: AgentEvent) -> None:
        """Call the method for ``event``'s class."""
        from ..agent.events import (
            AgentNote,
            FinalAnswer,
            ModelDelta,
            ModelReplied,
            ModelText,
            StepCode,
            StepFinished,
            StepOutput,
            StepStarted,
        )

        match event:
            case StepStarted():
                self.step_started(event)
            case StepCode():
                self.step_code(event)
            case StepOutput():
                self.step_output(event)
            case StepFinished():
                self.step_finished(event)
            case ModelText():
                self.model_text(event)
            case ModelDelta():
                self.model_delta(event)
            case ModelReplied():
                self.model_replied(event)
            case AgentNote():
                self.agent_note(event)
            case FinalAnswer():
                self.final_answer(event)
            case _:
                raise TypeError(f"not an agent event: {type(event).__name__}")

    def step_started(self, event: StepStarted) -> None:
        """The model asked to run code."""

    def step_code(self, event: StepCode) -> None:
        """The code of a step, as sent to the kernel."""

    def step_output(self, event: StepOutput) -> None:
        """One output of the running step."""

    def step_finished(self, event: StepFinished) -> None:
        """A step ended."""

    def model_text(self, event: ModelText) -> None:
        """Text the model wrote beside its tool calls."""

    def model_delta(self, event: ModelDelta) -> None:
        """A piece of the model's reply as it is written."""

    def model_replied(self, event: ModelReplied) -> None:
        """A model call ended (its seconds and tokens)."""

    def agent_note(self, event: AgentNote) -> None:
        """Something the loop did (a protocol switch, an answer sent back, a trimmed context)."""

    def final_answer(self, event: FinalAnswer) -> None:
        """The answer (always the last event)."""


__all__ = ["AgentEventHandler"]
