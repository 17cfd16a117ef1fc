"""What the judge decides, as values, and what it reads to decide.

The judge (:mod:`.judge`) is asked at four moments of an answer and answers each with one
of these values; the loop (:mod:`kernel_analyst.agent.loop`) does what the value says and
holds no policy of its own:

- after a model reply: :class:`RunActions`, :class:`Tell` (the reply is no step),
  :class:`SendBack` (an answer, not accepted yet) or :class:`Accept`;
- before each action of a reply: :class:`Run`, :class:`Undo`, :class:`Skip` or
  :class:`Rollback` (the same failing code again: go back, not on);
- after a step ran: :class:`StepNotes` (what the model is told beside the output; a
  rollback when it failed as the step before it did);
- after a reply was acted on: :class:`Stop` (end with a partial answer) or None.

Every decision that tells the model something carries the :class:`Reason` (the policy's key
and the text) it used. What the judge reads of the answer being built is :class:`TurnFacts`
(a snapshot the loop takes of its turn for each decision) and
:class:`QuestionFacts` (fixed for the question).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...claims import Grounding
from ...kernels import Execution, VariableInfo
from ..protocols import Action, ProtocolState
from ..results import Step, TableChange
from .checks import ValueLookup


@dataclass(frozen=True)
class Reason:
    """One thing a policy found, as the model is told it."""

    key: str
    """The policy's key (``form``, ``repeated_failure``, ``cut_code`` ...): notebook
    records and events name it, and a send-back reason is given once per question."""
    text: str
    """What the model reads."""
    kind: str = ""
    """Which of the key's checks found it, where one key has several (each doubt of
    :mod:`.doubts`): each kind draws on its own send-back account, so a second doubt is
    sent back although the first was (DABench medium 11: a p-value doubt went back, and
    the verdict the code wrote as it stood, found next, went on unsent)."""

    @property
    def account(self) -> str:
        """The send-back account the reason draws on: its key, and its kind if it has one."""
        return f"{self.key}:{self.kind}" if self.kind else self.key


# -- after a reply -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunActions:
    """Run what the reply asks for; each action is judged again before it runs."""


@dataclass(frozen=True)
class Tell:
    """The reply ran nothing and is no answer: it is recorded, and the model reads the reason."""

    reason: Reason
    """Why it is no step, as the model is told."""
    resample: bool = False
    """The next model call samples at a higher temperature, where the model takes one: a
    greedy model asked again after a reply that repeated itself, or the agent's own words,
    writes the same reply again (seen: three runaway replies in a row, the question lost)."""
    forget: bool = False
    """The reply is not read back: the model is told the reason without its own reply (a
    small model shown the text it repeated again and again repeats it once more; DABench
    medium 8 ran away three times in a row from its first reply, hard 273 after an error)."""


@dataclass(frozen=True)
class Accept:
    """The reply is the answer."""

    answer: str
    """The answer's text."""
    grounding: Grounding
    """Its numbers, each grounded in a cell, derived, or unsupported."""
    switch_to_code: bool = False
    """An undecided ``auto`` conversation writes code as text from now on (its model
    answered instead of calling the tool)."""
    completed_from: tuple[int | None, ...] = ()
    """The cells whose printed ``@name[value]`` items completed the answer's form (the
    model answered without them); empty when it was given as written."""
    doubts: tuple[Reason, ...] = ()
    """Checks the answer still fails (each was sent back once already): it is accepted, but
    in doubt, and the question may be tried again in branches."""


@dataclass(frozen=True)
class SendBack:
    """The answer goes back to the model with every reason found (each once per question)."""

    answer: str
    """The answer's text (recorded in the notebook as returned)."""
    reasons: tuple[Reason, ...]
    """The reasons, in the order the model reads them."""
    text: str
    """The one message the model reads."""
    grounding: Grounding
    """The answer's numbers, as for :class:`Accept`."""
    switch_to_code: bool = False
    """As for :class:`Accept`."""
    resample: bool = False
    """The next model call samples (a greedy model sent back with the same reason would
    likely answer the same way again)."""


ReplyDecision = RunActions | Tell | Accept | SendBack
"""What happens after a model reply."""


# -- before an action --------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Run the action's code as a step."""

    action: Action
    """What to run."""


@dataclass(frozen=True)
class Undo:
    """Undo cells (the model asked for it): the last one, or back to before cell ``to``."""

    action: Action
    """The model's request (a directive or the undo tool's call)."""
    to: int | None
    """The cell's prompt number, or None for the last cell."""


@dataclass(frozen=True)
class Skip:
    """No step: the model reads the reason in place of an output."""

    reason: Reason
    """Why it is no step."""
    resample: bool = False
    """The next model call samples, where the model takes a temperature: a greedy model told
    its code just ran sends the same code again (DABench hard 177: the same cell three times
    after its slip was named, then the answer ended with a statistic of 49572 as its p-value)."""


@dataclass(frozen=True)
class Rollback:
    """Stuck: go back, not on. The steps from ``first_step`` on failed the same way; the
    kernel is undone to before them, their turns are taken out of what the model is sent
    (the notebook keeps them), and the model reads the reason (with the hint) instead."""

    reason: Reason
    """What the model reads after the rollback."""
    first_step: int
    """The first step of the failing streak (1-based, within the answer)."""


ActionDecision = Run | Undo | Skip | Rollback
"""What happens to one action of a reply."""


# -- after a step, after a reply ---------------------------------------------------------------


@dataclass(frozen=True)
class StepNotes:
    """What the model is told after a step's output: checks, a hint, the last step's note."""

    reasons: tuple[Reason, ...] = ()
    """The lines of feedback, in order, with the policies that wrote them."""
    closing: Reason | None = None
    """Said apart after everything else (the last code run allowed was used)."""
    revert: Reason | None = None
    """Undo the step: it changed the person's tables for a question that does not ask to
    (:mod:`.keeping`); the reason is what the model reads."""
    kept: tuple[TableChange, ...] = ()
    """The changes to the person's tables the question asked for, kept."""
    rollback: Rollback | None = None
    """The step failed as the one before it did: roll the streak back (:class:`Rollback`)."""

    @property
    def notes(self) -> list[str]:
        """The lines' texts."""
        return [reason.text for reason in self.reasons]


@dataclass(frozen=True)
class Stop:
    """End the answer with the best partial answer the cells support."""

    reason: Reason
    """Why (the step limit; replies that ran nothing): said to the user, not the model."""


# -- what the judge reads ----------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionFacts:
    """What is fixed for one question when its first model call is made."""

    question: str = ""
    """The question as asked."""
    files: tuple[str, ...] = ()
    """The files uploaded with it (an answer may restate their names)."""
    has_files: bool = False
    """The conversation has data files (an answer must then come from a cell)."""
    cells_before: int = 0
    """Code cells that computed something before this question (not the loading of files)."""
    first_cell: int = 0
    """The index of this question's first cell (its question cell) in the notebook."""
    table_rows: tuple[int, ...] = ()
    """The rows of the uploaded tables' DataFrames when the question began."""
    frames: Mapping[str, VariableInfo] = field(default_factory=dict)
    """The DataFrames that existed when the question began (the person's tables and what
    earlier answers relied on), by name."""
    asks_change: bool = False
    """The question asks to change the data (:mod:`.intent`): its steps may shrink them."""
    earlier: tuple[str, ...] = ()
    """The conversation's earlier questions, in order."""
    earlier_answers: tuple[str, ...] = ()
    """The answers given to them, in the same order."""
    columns: Mapping[str, str] = field(default_factory=dict)
    """The uploaded tables' column names, each -> the file it is a column of."""


@dataclass(frozen=True)
class StepFacts:
    """One step that ran, for the policies that look at its outcome."""

    code: str
    """The code as it ran."""
    execution: Execution
    """Its result (a view of a background run's new output while it goes on)."""
    observed: bool = True
    """False when there was nothing to observe beyond a note (code not run: a busy kernel)."""


@dataclass(frozen=True)
class TurnFacts:
    """The answer being built, as the judge reads it: a snapshot the loop takes for each
    decision (the judge never holds the turn, so it cannot change it)."""

    steps: Sequence[Step] = ()
    """The steps of this answer so far, in order."""
    cells: Sequence[dict[str, Any]] = ()
    """The conversation's notebook cells, this question's included."""
    variables: Mapping[str, VariableInfo] = field(default_factory=dict)
    """The kernel's variables as the model knows them."""
    protocol: ProtocolState = field(default_factory=ProtocolState)
    """The conversation's action protocol (read, never changed, by the judge)."""
    failed: bool = False
    """The kernel or the model failed in this answer: nothing more runs."""
    pending: Callable[[], bool] | None = None
    """Whether a background run is going on, or one ended whose end the model was not
    shown (asked only for a directive; None: never)."""
    lookup: ValueLookup | None = None
    """Asks the kernel for a column's values without adding a cell (None: not asked)."""
    told: Sequence[str] = ()
    """What the agent told the model in its own words in this answer (send-backs, hints, a
    rollback's notice; not its code's outputs), latest last."""
    elapsed_s: float = 0.0
    """Seconds since the answer began."""

    @property
    def background_pending(self) -> bool:
        """A background run is going on, or ended unseen."""
        return self.pending is not None and self.pending()


__all__ = [
    "Accept",
    "ActionDecision",
    "QuestionFacts",
    "Reason",
    "ReplyDecision",
    "Rollback",
    "Run",
    "RunActions",
    "SendBack",
    "Skip",
    "StepFacts",
    "StepNotes",
    "Stop",
    "Tell",
    "TurnFacts",
    "Undo",
]
