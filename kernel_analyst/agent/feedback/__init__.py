"""The judge: every decision about a model's reply or action, returned as a value.

:class:`~.judge.Judge` is asked after each reply, before and after each action, and after
each reply was acted on; it answers with a value of :mod:`.decisions`. Its policies, each a
small function with its unit test: replies and actions that are no step (:mod:`.replies`),
answers sent back (:mod:`.answers`, with the form of :mod:`.form`), lines after a step
(:mod:`.outcomes`: results that cannot be right, :mod:`.checks`; errors that teach,
:mod:`.hints`). Every message to the model about its work is written here (its texts are
in ``prompts/messages.txt``).

Room of ``agent/``: may import the agent's value modules, ``tools/`` (what a directive or an
undo is), ``briefing/`` (an uploaded table, for the hints), ``kernel_analyst.kernels`` and
``kernel_analyst.claims``; never ``loop/``.
"""

from .decisions import (
    Accept,
    ActionDecision,
    QuestionFacts,
    Reason,
    ReplyDecision,
    Rollback,
    Run,
    RunActions,
    SendBack,
    Skip,
    StepFacts,
    StepNotes,
    Stop,
    Tell,
    TurnFacts,
    Undo,
)
from .judge import MAX_IDLE_REPLIES, Budget, Judge, JudgeSettings, Policies

__all__ = ["MAX_IDLE_REPLIES", "Accept", "ActionDecision", "Budget", "Judge", "JudgeSettings", "Policies",
           "QuestionFacts", "Reason", "ReplyDecision", "Rollback", "Run", "RunActions", "SendBack", "Skip",
           "StepFacts", "StepNotes", "Stop", "Tell", "TurnFacts", "Undo"]
