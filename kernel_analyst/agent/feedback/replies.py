"""Replies and actions that are no step: the policies that say so, each a function of a case.

A small model wastes replies in a handful of ways, each answered with one message that
says what to do instead (and none of them counted as work done):

- a reply **cut while it repeated itself** (:mod:`.runaway`), one that is **empty**,
  **only code** under ``tools`` (code is never an answer), or one that **echoes** what the
  agent told the model (a send-back, a hint, a rollback's notice, copied as the answer);
- a block **cut** at the reply's length limit (a native call too), or a call written as
  text that **cannot be read** (both count against the step limit: the model tried to run
  something); a cut block is not read back and the next call samples, since a greedy model
  shown it writes it again to the same limit;
- a **wait, check or cancel with no background run**, or an **undo right after a step that
  only read** (copied from the prompt after the work was done): no step, and prose beside
  such a block is the reply's answer;
- **the code of the previous step again**: after a failure it would fail the same way
  (told once to fix the cause, then to write a new, shorter cell); after a success its
  output is above already;
- an action after the kernel **failed** earlier in the same reply.

:func:`answer_in` decides whether a reply is an answer at all: prose with no action, prose
beside code that already ran (work shown again), or prose beside blocks that are no step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..prompting import message
from ..protocols import Action, Reading
from ..results import Step
from ..tools.background import find_directive
from ..tools.undo import find_undo, only_read
from .decisions import Reason
from .form import AnswerForm
from .slips import slips_in


@dataclass(frozen=True)
class ActionCase:
    """One action of a reply, with what its policies read."""

    action: Action
    """The code the model asked to run."""
    steps: Sequence[Step] = ()
    """This answer's steps so far."""
    undone_at: int = -1
    """The number of steps when the model last undid a cell (-1: never)."""
    idle: int = 0
    """Replies in a row that ran nothing before this one."""
    failed: bool = False
    """The kernel failed earlier in this answer."""
    pending: Callable[[], bool] | None = None
    """Whether a background run goes on (or ended unseen); asked only for a directive."""
    undo: bool = True
    """The model can undo cells."""
    question: str = ""
    """The question (what the slips of the previous step are read against)."""

    @property
    def last_step(self) -> Step | None:
        """The previous step, unless the model undid it since."""
        return self.steps[-1] if self.steps and self.undone_at != len(self.steps) else None


@dataclass(frozen=True)
class ReplyCase:
    """One model reply as the protocol read it."""

    reading: Reading
    """What the reply asks for."""
    text: str
    """The reply's whole text."""
    actions: Sequence[ActionCase] = ()
    """Its text actions, each as a case (for the blocks that are no step)."""
    steps: Sequence[Step] = ()
    """This answer's steps so far."""
    tool_name: str = "python"
    """The Python tool's name, for the messages."""
    cut: str = ""
    """Why the reply was cut short while it streamed ("" when it ended by itself): ``limit``,
    or what it kept repeating (:mod:`.runaway`)."""
    told: Sequence[str] = ()
    """What the agent told the model in its own words in this answer (send-backs, hints, a
    rollback's notice)."""
    has_files: bool = False
    """The question is about data files (an answer must come from a cell)."""
    protocol: str = "tools"
    """How the model runs code now (``tools`` or ``code``), for the messages."""


ActionPolicy = Callable[[ActionCase], Reason | None]
"""A reason an action is no step, or None."""


# -- actions that are no step, and count nothing ---------------------------------------------


def after_failure(case: ActionCase) -> Reason | None:
    """The kernel failed earlier in this answer: nothing more runs."""
    return Reason("after_failure", message("not_run_after_failure")) if case.failed else None


def no_background_run(case: ActionCase) -> Reason | None:
    """A wait, check or cancel with no background run to act on."""
    directive = find_directive(case.action.code)
    if directive is None or directive.kind == "background" or (case.pending is not None and case.pending()):
        return None
    return Reason("no_background_run", message("background_none", action=directive.kind))


def nothing_to_undo(case: ActionCase) -> Reason | None:
    """An undo of the last step when that step only read (printed, changed no variable)."""
    undo, to = find_undo(case.action.code) if case.undo else (False, None)
    last = case.last_step
    if undo and to is None and last is not None and only_read(last.code, last.execution):
        return Reason("nothing_to_undo", message("undo_nothing", step=last.index))
    return None


IDLE_DIRECTIVES: tuple[ActionPolicy, ...] = (no_background_run, nothing_to_undo)
"""Directives with nothing to act on: prose beside them is the reply's answer."""
NO_STEP: tuple[ActionPolicy, ...] = (after_failure, *IDLE_DIRECTIVES)
"""Actions that are no step and use no code run, in the order they are asked."""


# -- actions that count as a code run but do not run ----------------------------------------------


def repeated_failure(case: ActionCase) -> Reason | None:
    """The previous step's code again, after it failed: told once to fix the cause; sent
    again, a different way out (small models repeat one long cell that fails: an f-string
    answer template, a chained call)."""
    last = _ran_just_before(case)
    if last is None or last.execution.error is None:
        return None
    key = "repeated_failure_again" if case.idle else "repeated_failure"
    return Reason("repeated_failure", message(key, step=last.index, error=str(last.execution.error)))


def repeated_success(case: ActionCase) -> Reason | None:
    """The previous step's code again, after it ran: its output is above; or, when it printed
    nothing (assignments only), that it printed nothing and what to print (DABench medium 6:
    the same cell of assignments sent four times, each refused as "its output is above", and
    the answer made up); or, when a slip was named after it, that line again, not "answer
    now" (the conversation benchmark's taxis: `df['tip'] / df['passengers']` named as a ratio
    nobody asked for, the cell sent again unchanged, and "answer now" was what it read)."""
    last = _ran_just_before(case)
    if last is None or last.execution.status != "ok":
        return None
    if not last.execution.text.strip() and not last.execution.outputs:
        return Reason("repeated_success", message("repeated_silent", step=last.index))
    slipped = slips_in(case.question, last.code) if case.question else []
    if slipped:
        return Reason("repeated_success", message("repeated_slip", step=last.index,
                                                  slip=slipped[0].text.removeprefix("- ")))
    return Reason("repeated_success", message("repeated_success", step=last.index))


REPEATS: tuple[ActionPolicy, ...] = (repeated_failure, repeated_success)
"""Actions that use a code run and are not run, in the order they are asked."""


def _ran_just_before(case: ActionCase) -> Step | None:
    """The previous step, when it ran exactly this code (nothing ran since, so running it
    again would only repeat its outcome; a repeat after other steps may differ and runs)."""
    last = case.last_step
    return last if last is not None and last.code.strip() == case.action.code.strip() else None


# -- replies -----------------------------------------------------------------------------------


def cut_short(case: ReplyCase) -> Reason | None:
    """A reply cut while it repeated itself: never run, never an answer. Before any step
    about data files, the model is told to compute first: the 1.5B model's runaway is most
    often the answer's long form recited before anything was computed (DABench 8, three
    times in a row after "write it once, short")."""
    if not case.cut or case.cut == "limit":
        return None
    if case.has_files and not case.steps:
        key = "runaway_before_work_code" if case.protocol == "code" else "runaway_before_work_tools"
        return Reason("runaway", message(key, what=case.cut, tool_name=case.tool_name))
    return Reason("runaway", message("runaway", what=case.cut))


def empty_reply(case: ReplyCase) -> Reason | None:
    """A reply with nothing in it."""
    if case.reading.is_answer and not case.reading.text.strip():
        return Reason("empty_reply", message("empty_reply"))
    return None


def code_in_answer(case: ReplyCase) -> Reason | None:
    """Under ``tools``, a reply that is only code written as text: never run, never an answer."""
    if not case.reading.code_only:
        return None
    return Reason("code_in_answer", message("code_in_answer", tool_name=case.tool_name))


ECHO_SHARE = 0.8
"""A reply whose sentences are nearly all (this share of its characters, or more) copied word
for word from what the agent told the model echoes it: it is no answer."""
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\n+")
_WORD = re.compile(r"\w+")
_RUN = 4
"""Words in a row a paraphrased copy shares with the agent's message, at least."""
_VERDICTS = frozenset({"yes", "no", "not", "true", "false", "none"})
"""Words of a reply's own that answer a yes/no question (a restated question with one is an answer)."""
_ADDS = re.compile(r"\d")
"""What a reply's own words (those not copied) may hold that makes it more than a copy: a
number (a restated question followed by its result is an answer)."""


_OUTPUT_HEADER = re.compile(re.escape(message("code_output", step=999)).replace("999", r"\d+"))
"""The line above a step's output in the agent's message (code written as text): a reply that
holds it copies the message, whatever numbers the copy carries."""


def echoed(case: ReplyCase) -> Reason | None:
    """A reply that repeats what the agent told the model (the question, a send-back, a hint,
    the notice of a rollback) instead of answering: a small model copies the last message it
    read, and the copy would be given as the answer, with the agent's own words in it. A
    reply whose few words of its own hold a number adds a result: it is read as an answer."""
    reading = case.reading
    if reading.is_answer and _OUTPUT_HEADER.search(reading.text):
        # DABench easy 129 with the 1.5B model: the whole message (the line after the step, its
        # output, the question restated) copied, and given as the answer of three attempts
        return Reason("echoed", message("echoed"))
    if not case.told or not reading.is_answer:
        return None
    told = " ".join(" ".join(text.split()) for text in case.told)
    sentences = [part for part in (" ".join(part.split()) for part in _SENTENCE.split(reading.text)) if part]
    total = sum(len(part) for part in sentences)
    copied = sum(len(part) for part in sentences if len(part) >= 20 and part in told)
    if total < 40:
        return None
    if copied >= ECHO_SHARE * total:
        if any(_ADDS.search(part) for part in sentences if part not in told):
            return None
        return Reason("echoed", message("echoed"))
    return Reason("echoed", message("echoed")) if _paraphrased(reading.text, told) else None


def _paraphrased(text: str, told: str) -> bool:
    """Nearly every word of ``text`` is in a run of :data:`_RUN` words the agent wrote in that
    order, and its other words hold no number and no verdict ("Yes, non-smokers tip more ..."
    restates the question and answers it): a copy with a word or two changed (conversation
    benchmark, brussels-hotels: "The question was not accepted yet: - Your last code failed
    (KeyError: ...)", the send-back with its error swapped, was the answer)."""
    words = _WORD.findall(text.lower())
    said = _WORD.findall(told.lower())
    if len(words) < 2 * _RUN:
        return False
    runs = {tuple(said[i:i + _RUN]) for i in range(len(said) - _RUN + 1)}
    covered = [False] * len(words)
    for i in range(len(words) - _RUN + 1):
        if tuple(words[i:i + _RUN]) in runs:
            covered[i:i + _RUN] = [True] * _RUN
    own = [word for word, copied in zip(words, covered, strict=True) if not copied]
    return sum(covered) >= ECHO_SHARE * len(words) and not any(
        _ADDS.search(word) or word in _VERDICTS for word in own)


ReplyPolicy = Callable[[ReplyCase], Reason | None]
"""A reason a reply is no step and no answer, or None."""
NO_STEP_REPLIES: tuple[ReplyPolicy, ...] = (cut_short, empty_reply, code_in_answer, echoed)
"""Replies that are no step and no answer, asked before whether a reply is an answer."""
RESAMPLE_AFTER = frozenset({"runaway", "echoed"})
"""No-step replies a greedy model writes again when asked again: the next call samples, and
the reply is not read back (the notebook keeps it): text repeated until it was cut, or the
agent's own words copied, only anchor the next reply."""


def answer_in(case: ReplyCase) -> str | None:
    """The reply's answer, or None when it is no answer: its prose when it asks for nothing;
    the whole reply when its code only repeats work that ran (shown beside the answer); its
    prose when every block beside it is a directive with nothing to act on
    (:data:`IDLE_DIRECTIVES`)."""
    reading = case.reading
    if reading.is_answer:
        return reading.text
    if _repeats_work(case):
        return reading.text if reading.calls else case.text
    if reading.text.strip() and reading.actions and not reading.calls and not reading.invalid and all(
            any(policy(action) is not None for policy in IDLE_DIRECTIVES) for action in case.actions):
        return reading.text
    return None


def _repeats_work(case: ReplyCase) -> bool:
    """Code that already ran without error in this answer, beside prose: a model showing its
    work beside its answer, not a new step. Written as text, any prose counts; in native
    calls (where prose beside a call is most often what the model is about to do) only prose
    with ``@name[value]`` items (DABench medium 219: the right items beside the tool called
    again with the code that printed them, refused as a repeat three times, then a wrong
    partial answer)."""
    reading = case.reading
    if not reading.actions or reading.invalid:
        return False
    if reading.calls and (len(reading.actions) != len(reading.calls) or not AnswerForm.given(reading.text)):
        return False
    if not (reading.text + reading.trailing).strip():
        return False
    done = {step.code.strip() for step in case.steps if step.execution.status == "ok"}
    return all(action.code.strip() in done for action in reading.actions)


def nothing_to_run(reading: Reading) -> Reason:
    """A reply whose code cannot run: cut at the length limit, or a call that cannot be read."""
    if reading.cut:
        return Reason("cut_code", message("cut_code"))
    return Reason("unreadable_call", message("unreadable_call"))


__all__ = [
    "IDLE_DIRECTIVES",
    "NO_STEP",
    "NO_STEP_REPLIES",
    "REPEATS",
    "RESAMPLE_AFTER",
    "ActionCase",
    "ActionPolicy",
    "ReplyCase",
    "ReplyPolicy",
    "after_failure",
    "answer_in",
    "code_in_answer",
    "cut_short",
    "echoed",
    "empty_reply",
    "no_background_run",
    "nothing_to_run",
    "nothing_to_undo",
    "repeated_failure",
    "repeated_success",
]
