"""The judge: every decision about a model's reply or action, returned as a value.

One :class:`Judge` per question. The loop asks it at four moments and does what it returns
(:mod:`.decisions`):

- :meth:`Judge.on_reply`: a reply that is no step and no answer (:data:`.replies.NO_STEP_REPLIES`)
  is :class:`Tell`; an answer (:func:`.replies.answer_in`) goes to :meth:`Judge.on_answer`,
  which accepts it or sends it back with every reason of :data:`.answers.ANSWER_CHECKS`
  not sent yet; anything else is :class:`RunActions`;
- :meth:`Judge.on_action` (and :meth:`Judge.on_call` for a native call): a step runs, an
  undo is done, or the action is :class:`Skip` (:data:`.replies.NO_STEP`, the step limit,
  :data:`.replies.REPEATS`);
- :meth:`Judge.after_step`: the lines the model reads beside the output (:mod:`.outcomes`);
- :meth:`Judge.after_reply`: :class:`Stop` when the step limit was reached or too many
  replies in a row ran nothing.

The question's one :class:`Budget` (code runs, replies in a row that ran nothing, reasons
sent back, undos) is written here and nowhere else. Adding a policy means writing a
function in this room, registering it in :class:`Policies` and its text in
``prompts/messages.txt``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...kernels import Execution
from ...kernels.trail import cell_meta, stands
from ..prompting import message
from ..protocols import Action, InvalidCall, ProtocolState, Reading, Via
from ..results import Step
from ..tools.kernel_tool import TOOL_NAME
from ..tools.undo import UNDO_TOOL_NAME, find_undo
from .answers import (
    AnswerCase,
    AnswerCheck,
    change_undone,
    empty,
    failed_last_step,
    grounding_of,
    no_work,
    nothing_shown,
    printed_since,
    profile_only,
    repeated_answer,
    rests_on_nan,
    stale,
    typed_in,
    uncomputed_verdicts,
    unsupported,
    unsupported_values,
    wrong_form,
)
from .checks import nan_numbers
from .coercion import mended_coercion
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
from .doubts import DOUBT_CHECKS
from .form import AnswerForm
from .hints import ErrorTeacher
from .indentation import mended_indentation
from .keeping import Renamed, kept, read_again, renamed, table_changes, undone
from .outcomes import STEP_CHECKS, StepCase, StepCheck, encoding_example, last_step
from .replies import (
    NO_STEP,
    NO_STEP_REPLIES,
    REPEATS,
    RESAMPLE_AFTER,
    ActionCase,
    ActionPolicy,
    ReplyCase,
    ReplyPolicy,
    answer_in,
    nothing_to_run,
)
from .slips import mended_label_encoding, mended_population_std, mended_statistic_first, wrong_change

_NO_DOUBT = frozenset({"stale"})
"""Reasons that leave an accepted answer beyond doubt: a follow-up that says it reuses an
earlier result is right to."""

SEND_BACK_ALLOWANCE = {"no_work": 2, "form": 2, "unsupported": 2, "verdict": 2}
"""How many times a reason may send answers of one question back (the rest: once). A small
model answers from the profile, or makes numbers up, twice in a row (DABench hard 137:
``@model_score[0.85]``, which no cell printed, given after one send-back); or answers in
prose twice though the question asks for ``@name[value]`` items (medium 140, hard 125); or
gives a verdict by eye again: these go back a second time, sampled, with their own text
(``feedback_<key>_again_<code|tools>``, which may quote the first reason's), once no
reason is left that was not sent yet. A second send-back is one model call; the attempts
it may save are whole questions, and the attempts' account cannot always pay for them."""
_REMINDER_MAX = 1200
"""A question up to this long is restated after each output under ``code``."""
MAX_IDLE_REPLIES = 3
"""Replies in a row that run nothing (the same code again, unreadable or cut code) before
the answer ends with what the cells show: the user should not wait for a loop."""


@dataclass(frozen=True)
class JudgeSettings:
    """What the judge allows and checks (from the analyst's settings)."""

    max_steps: int = 15
    """Code runs allowed for one question."""
    max_idle: int = MAX_IDLE_REPLIES
    """Replies in a row that ran nothing before the answer ends."""
    undo: bool = True
    """The model can undo cells."""
    require_work: bool = True
    """Send back an answer given before any code ran in a conversation with data files."""
    check_numbers: bool = True
    """Send back an answer with numbers no cell produced."""
    check_results: bool = True
    """Check results that cannot be right, and answers that are empty or not in the form asked."""
    keep_data: bool = True
    """Undo a step that shrinks or replaces the person's tables for a question that does not
    ask to change the data (:mod:`.keeping`)."""
    max_rollbacks: int = 2
    """Failing streaks rolled back per question (then repeats are only told, not undone)."""
    max_seconds: float | None = None
    """Seconds one answer may take before it ends with what the cells show (None: no bound)."""
    tool_name: str = TOOL_NAME
    """The Python tool's name, for the messages."""


@dataclass(frozen=True)
class Registered:
    """An answer check and the setting that turns it off."""

    check: AnswerCheck
    """The check."""
    setting: str
    """The :class:`JudgeSettings` field that must be true for it to run (``require_work``,
    ``check_numbers``, ``check_results``)."""


ANSWER_CHECKS: tuple[Registered, ...] = (
    Registered(failed_last_step, "check_results"),
    Registered(rests_on_nan, "check_results"),
    Registered(change_undone, "check_results"),
    Registered(no_work, "require_work"),
    Registered(unsupported, "check_numbers"),
    Registered(typed_in, "check_numbers"),
    Registered(unsupported_values, "check_numbers"),
    Registered(uncomputed_verdicts, "check_numbers"),
    Registered(profile_only, "check_numbers"),
    Registered(empty, "check_results"),
    Registered(nothing_shown, "check_results"),
    *(Registered(check, "check_results") for check in DOUBT_CHECKS),
    Registered(wrong_form, "check_results"),
    Registered(stale, "check_results"),
    Registered(repeated_answer, "check_results"),
)
"""The answer checks (:mod:`.answers`, :mod:`.doubts`), in the order their reasons are read."""


@dataclass(frozen=True)
class Policies:
    """The policies the judge asks, by moment, in order."""

    replies: tuple[ReplyPolicy, ...] = NO_STEP_REPLIES
    """Replies that are no step and no answer."""
    no_step: tuple[ActionPolicy, ...] = NO_STEP
    """Actions that are no step and use no code run."""
    repeats: tuple[ActionPolicy, ...] = REPEATS
    """Actions that use a code run and are not run."""
    answers: tuple[Registered, ...] = ANSWER_CHECKS
    """Reasons to send an answer back."""
    steps: tuple[StepCheck, ...] = STEP_CHECKS
    """Lines after a step's output."""


@dataclass
class Budget:
    """One question's budget and counters; only the judge writes them."""

    steps: int = 0
    """Code runs used (replies that tried to run code count, capped at the limit)."""
    idle: int = 0
    """Replies in a row that ran nothing."""
    sent: Counter[str] = field(default_factory=Counter)
    """How many times each reason's account was sent back (:attr:`Reason.account`; see
    :data:`SEND_BACK_ALLOWANCE`)."""
    refused: set[float] = field(default_factory=set)
    """Values of numbers sent back as no cell's (:attr:`.AnswerCase.refused`)."""
    undone_at: int = -1
    """The number of steps when the model last undid a cell (code may run again after it)."""
    undos: int = 0
    """Undos done (a reply that undoes is not idle)."""
    progress_mark: int = 0
    """Steps and undos when the current reply's actions began."""
    limit_reached: bool = False
    """The step limit was already used up when the current reply's actions began."""
    rollbacks: int = 0
    """Failing streaks rolled back."""
    floor: int = 0
    """Steps at the last rollback: a new streak starts after them."""
    reverted: dict[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    """Code undone because it changed the person's tables -> its step and those tables."""
    rewritten: Rewritten | None = None
    """The running step's code as the judge rewrote it before it ran, and what the model is
    told of each rewrite."""
    told: tuple[str, ...] = ()
    """The lines after the last step that said its result is wrong (:data:`TOLD_WRONG`)."""
    change_undone: tuple[int, str, str] | None = None
    """The step and table of a change undone as the wrong one, no change kept since, and the
    code that makes the change asked where it is known (:attr:`.AnswerCase.change_undone`)."""
    rewrites: dict[str, Renamed] = field(default_factory=dict)
    """Undone code -> the code it last ran as, renamed: sent again right after, it is renamed
    the same way, and so a repeat (DABench hard 124: the same cell sent four times after its
    undo ran as ``df_work``, ``df_work2``, ``df_work3``, ``df_work4``, never a repeat)."""

    def count(self, max_steps: int, *, capped: bool = True) -> None:
        """Count a reply that tried to run code and could not."""
        if not capped or self.steps < max_steps:
            self.steps += 1


class Judge:
    """Every decision of one question; see the module docstring."""

    def __init__(self, settings: JudgeSettings, question: QuestionFacts, *,
                 teacher: ErrorTeacher | None = None, policies: Policies | None = None) -> None:
        self.settings = settings
        self.question = question
        self.teacher = teacher if teacher is not None else ErrorTeacher()
        self.policies = policies or Policies()
        self.budget = Budget()

    # -- a reply ---------------------------------------------------------------------------------

    def on_reply(self, reading: Reading, text: str, facts: TurnFacts, *, cut: str = "") -> ReplyDecision:
        """What a model reply leads to (it was read by the conversation's protocol; ``cut``:
        why it was cut short while it streamed)."""
        case = ReplyCase(reading, text, [self._case(a, facts) for a in reading.actions], facts.steps,
                         self.settings.tool_name, cut, facts.told, self.question.has_files,
                         facts.protocol.prompt_protocol)
        for policy in self.policies.replies:
            if (reason := policy(case)) is not None:
                again = reason.key in RESAMPLE_AFTER
                return Tell(reason, resample=again, forget=again)
        answer = answer_in(case)
        if answer is not None:
            return self.on_answer(answer, facts)
        self.budget.progress_mark = len(facts.steps) + self.budget.undos
        self.budget.limit_reached = self.budget.steps >= self.settings.max_steps
        return RunActions()

    def on_answer(self, answer: str, facts: TurnFacts) -> Accept | SendBack:
        """Accept an answer, or send it back with the reasons not sent yet (none left: with a
        reason :data:`SEND_BACK_ALLOWANCE` allows again, sampled). An answer that lacks the form's
        templates the question's cells printed is completed from them first, and its items are
        rounded as the question asks."""
        q = self.question
        answer, completed_from = self.completed(answer, facts)
        switch = (self.settings.require_work and q.has_files and facts.protocol.active is None
                  and q.cells_before + len(facts.steps) == 0)
        grounding = grounding_of(answer, facts.cells, q)
        case = AnswerCase(answer, grounding, q, facts.cells, len(facts.steps),
                          "code" if switch else facts.protocol.prompt_protocol, self.settings.tool_name,
                          failed=_last_failure(facts.steps),
                          nan=tuple(nan_numbers([step.execution for step in facts.steps])),
                          refused=frozenset(self.budget.refused), told=self.budget.told,
                          change_undone=self.budget.change_undone)
        checks = [r.check for r in self.policies.answers if getattr(self.settings, r.setting)]
        reasons = [reason for check in checks if (reason := check(case)) is not None]
        sent = self.budget.sent
        fresh = tuple(reason for reason in reasons if not sent[reason.account])
        again = tuple(reason for reason in reasons
                      if 0 < sent[reason.account] < SEND_BACK_ALLOWANCE.get(reason.key, 1))
        if fresh:
            text = message("feedback", reasons="".join(f"\n{reason.text}" for reason in fresh))
        elif again:
            kind = "code" if case.protocol == "code" else "tools"
            form = AnswerForm.of(q.question).template
            text = "\n".join(message(f"feedback_{reason.key}_again_{kind}", tool_name=self.settings.tool_name,
                                      form=form, reason=_first_sentence(reason.text)) for reason in again)
        else:
            doubts = tuple(reason for reason in reasons if reason.key not in _NO_DOUBT)
            return Accept(answer, grounding, switch, completed_from, doubts)
        sent.update(reason.account for reason in fresh or again)
        if any(reason.key == "unsupported" for reason in fresh or again):
            self.budget.refused.update(claim.value for claim in grounding.unsupported)
        return SendBack(answer, fresh or again, text, grounding, switch, resample=not fresh)

    def completed(self, answer: str, facts: TurnFacts) -> tuple[str, tuple[int | None, ...]]:
        """The answer with the form's items it lacks taken from what this question's cells
        printed in the form, and those cells' numbers (none taken: the answer as it is); its
        items' numbers rounded to the decimals the question asks (:meth:`AnswerForm.rounded`).
        A partial answer too: the step limit or a stall ends in prose more often than not, and
        items a cell printed are the question's answer (DABench hard 271)."""
        if not self.settings.check_results:
            return answer, ()
        printed = printed_since(facts.cells, self.question.first_cell)
        form = AnswerForm.of(self.question.question)
        nan_cells = frozenset(count for step in facts.steps
                              if (count := step.execution.execution_count) is not None
                              and nan_numbers([step.execution]))
        answer, cells = form.complete(answer, printed, nan_cells)
        return form.spelled(form.rounded(answer)), tuple(cells)

    def after_reply(self, decision: ReplyDecision, facts: TurnFacts) -> Stop | None:
        """After the loop acted on a reply: stop, or go on (None)."""
        budget = self.budget
        if isinstance(decision, Tell):
            budget.idle += 1
        elif isinstance(decision, RunActions):
            progressed = len(facts.steps) + budget.undos > budget.progress_mark
            budget.idle = 0 if progressed else budget.idle + 1
            if budget.limit_reached:
                return Stop(Reason("step_limit", message("step_limit", max_steps=self.settings.max_steps)))
        if budget.idle >= self.settings.max_idle:
            return Stop(Reason("stalled", message("stalled", count=budget.idle)))
        limit = self.settings.max_seconds
        if limit is not None and facts.elapsed_s >= limit:
            return Stop(Reason("time_limit", message("time_limit", seconds=f"{limit:g}")))
        return None

    def after_output(self, facts: TurnFacts) -> str:
        """What follows a step's output written back as text (``code``): answer now, or write
        the next block, and the question again ("" when no code run is left)."""
        if self.budget.steps >= self.settings.max_steps or facts.failed:
            return ""
        return message("code_continue") + _question_reminder(self.question.question)

    def partial_request(self, stop: Stop | None = None) -> str:
        """What the model is asked when the answer stops (``stop``: why): its best answer
        without code."""
        if stop is not None and stop.reason.key == "time_limit":
            return message("time_limit_answer", seconds=f"{self.settings.max_seconds:g}")
        return message("step_limit_answer", max_steps=self.settings.max_steps)

    def partial_answer(self, text: str, *, calls: bool) -> str:
        """The prose of the reply to :meth:`partial_request`: "" when it is code (written as
        text, cut, or a tool call) or nothing, which is never an answer."""
        reading = ProtocolState("tools").read(text, tool_name=self.settings.tool_name)
        return "" if reading.code_only or reading.cut or calls else reading.text

    # -- an action -------------------------------------------------------------------------------

    def on_call(self, name: str, args: Any, call_id: str, facts: TurnFacts) -> ActionDecision:
        """A native tool call: the Python tool's code or the undo tool are actions; another
        tool or missing code is no step (and counts as a try)."""
        if name == UNDO_TOOL_NAME and self.settings.undo:
            to = args.get("to") if isinstance(args, dict) else None
            directive = "# kernel-analyst: undo" + (f" {to}" if isinstance(to, int) else "")
            return self.on_action(Action(directive, Via.TOOL_CALL, call_id), facts)
        code = args.get("code") if isinstance(args, dict) else None
        if name == self.settings.tool_name and isinstance(code, str) and code.strip():
            return self.on_action(Action(code, Via.TOOL_CALL, call_id), facts)
        if not facts.failed:
            self.budget.count(self.settings.max_steps)
        tool_name = self.settings.tool_name
        if name != tool_name:
            key = "unknown_tool_undo" if self.settings.undo else "unknown_tool"
            return Skip(Reason("unknown_tool", message(key, name=name, tool_name=tool_name)))
        return Skip(Reason("bad_arguments", message("bad_arguments", tool_name=tool_name, detail="")))

    def on_invalid_call(self, bad: InvalidCall) -> Skip | None:
        """A native call whose arguments could not be parsed (None without a call id to answer)."""
        if not bad.call_id:
            return None
        self.budget.count(self.settings.max_steps, capped=False)
        detail = f" ({bad.error})" if bad.error else ""
        return Skip(Reason("bad_arguments", message("bad_arguments", tool_name=self.settings.tool_name,
                                                    detail=detail)))

    def on_nothing_to_run(self, reading: Reading) -> Tell:
        """A reply with code that cannot run (cut, or a call that cannot be read): counts as a
        try. A block cut at the length limit is not read back and the next call samples: a
        greedy model shown its cut block writes it again to the same limit (DABench hard 142:
        three replies cut in a row, no step in 16 minutes)."""
        self.budget.count(self.settings.max_steps)
        return Tell(nothing_to_run(reading), resample=reading.cut, forget=reading.cut)

    def on_action(self, action: Action, facts: TurnFacts) -> ActionDecision:
        """Run the action, undo, or skip it with the reason."""
        case = self._case(action, facts)
        for policy in self.policies.no_step:
            if (reason := policy(case)) is not None:
                return Skip(reason)
        if self.budget.steps >= self.settings.max_steps:
            return Skip(Reason("step_limit", message("step_limit", max_steps=self.settings.max_steps)))
        self.budget.steps += 1
        rewritten = self._rewritten(action.code, facts, case.last_step)
        if rewritten is not None:  # runs rewritten, and is a repeat if the rewritten code just ran
            action = replace(action, code=rewritten.code)
            case = self._case(action, facts)
        undo, to = find_undo(action.code) if self.settings.undo else (False, None)
        if undo:
            self.budget.undone_at = len(facts.steps)
            self.budget.undos += 1
            return Undo(action, to)
        for policy in self.policies.repeats:
            if (reason := policy(case)) is not None:
                stuck = self._rollback(facts) if reason.key == "repeated_failure" else None
                return stuck if stuck is not None else Skip(reason, resample=True)
        self.budget.rewritten = rewritten
        return Run(action)

    def _rewritten(self, code: str, facts: TurnFacts, last: Step | None) -> Rewritten | None:
        """``code`` as it is to run, when the judge rewrites it, each rewrite on the one
        before: its indentation mended (:mod:`.indentation`); the population standard
        deviation the question asks for (:func:`.slips.mended_population_std`); the label
        encoding asked for, run for ``get_dummies`` (:func:`.slips.mended_label_encoding`); a
        scipy test's result unpacked p-value first, the two names swapped
        (:func:`.slips.mended_statistic_first`); a conversion that would make NaN of numbers
        written with text (:func:`.coercion.mended_coercion`); undone code sent again, the
        person's tables renamed (:meth:`_renaming`). None: it runs as sent."""
        notes = []
        mended = mended_indentation(code)
        if mended is not None:
            code = mended.code
            notes.append(Reason("indentation_mended", message("indentation_mended", lines=mended.named())))
        population = mended_population_std(self.question.question, code) \
            if self.settings.check_results else None
        if population is not None:
            code = population
            notes.append(Reason("population_std_mended", message("population_std_mended")))
        encoded = mended_label_encoding(self.question.question, code, self.question.frames) \
            if self.settings.check_results else None
        if encoded is not None:
            code = encoded[0]
            notes.append(Reason("label_encoding_mended", message("label_encoding_mended", frame=encoded[1],
                                                                   columns=", ".join(encoded[2]))))
        unpacked = mended_statistic_first(code) if self.settings.check_results else None
        if unpacked is not None:
            code = unpacked
            notes.append(Reason("statistic_first_mended", message("statistic_first_mended")))
        coerced = mended_coercion(code, self.teacher.tables) if self.settings.check_results else None
        if coerced is not None:
            code = coerced[0]
            notes.extend(Reason("coercion_mended", text) for text in coerced[1])
        renaming = self._renaming(code, facts, last)
        if renaming is not None:
            code = renaming[1].code
            notes.append(_renamed_note(*renaming))
        return Rewritten(code, tuple(notes)) if notes else None

    def _renaming(self, code: str, facts: TurnFacts, last: Step | None) -> tuple[int, Renamed] | None:
        """The step that first sent ``code`` and the code renamed, when it was undone for
        changing the person's tables (None otherwise, or when nothing can be renamed)."""
        key = code.strip()
        undone_before = self.budget.reverted.get(key)
        if undone_before is None:
            return None
        previous = self.budget.rewrites.get(key)
        if previous is not None and last is not None and last.code.strip() == previous.code.strip():
            return undone_before[0], previous  # it just ran renamed: the same names, a repeat
        rewrite = renamed(code, undone_before[1], facts.variables)
        if rewrite is None:
            return None
        self.budget.rewrites[key] = rewrite
        return undone_before[0], rewrite

    async def after_step(self, step: StepFacts, facts: TurnFacts) -> StepNotes:
        """The lines the model reads after a step's output."""
        case = StepCase(step, facts.variables, self.teacher, facts.lookup, self.budget.steps,
                        self.settings.max_steps, self.settings.check_results, self.question.question,
                        self.question.earlier, columns=self.question.columns,
                        before=_standing(facts.cells, step.execution.execution_count))
        reasons = [reason for check in self.policies.steps for reason in await check(case)]
        rewritten, self.budget.rewritten = self.budget.rewritten, None
        if rewritten is not None and rewritten.code == step.code:
            reasons[:0] = rewritten.notes
        self.budget.told = tuple(r.text for r in reasons if r.key in TOLD_WRONG)
        hints = [r.text for r in reasons if r.key == "hint"]
        stuck = self._rollback(facts, failing=step.execution, hint=hints)
        if stuck is not None:
            return StepNotes(tuple(reasons), last_step(case), rollback=stuck)
        changes = table_changes(step, self.question.frames) if self.settings.keep_data else []
        if changes and not self.question.asks_change:
            self.budget.undone_at = len(facts.steps) + 1  # the step's code may run again, under a new name
            if not read_again(changes, step.code):
                self.budget.reverted.setdefault(step.code.strip(), (len(facts.steps) + 1,
                                                                    tuple(c.name for c in changes)))
            return StepNotes(tuple(reasons), last_step(case),
                             revert=undone(changes, len(facts.steps) + 1, step.code))
        undone_before = self.budget.change_undone
        if undone_before is not None and step.execution.status == "ok" and any(
                info.name == undone_before[1] for info in step.execution.variables.changed):
            self.budget.change_undone = None  # changed again since (in place: no row or column less)
        if changes and self.settings.check_results and wrong_change(self.question.question, step.code):
            self.budget.undone_at = len(facts.steps) + 1
            name = changes[0].name
            before = self.question.frames.get(name)
            example = encoding_example(self.question.question, before) if before is not None else ""
            said = message("data_undone_slip", step=len(facts.steps) + 1, name=name, example=example)
            self.budget.change_undone = (len(facts.steps) + 1, name, example)
            # the lines about the table as the step left it no longer hold once it is undone
            reasons = [reason for reason in reasons if reason.key != "check_text_left"]
            self.budget.told = tuple(r.text for r in reasons if r.key in TOLD_WRONG)
            return StepNotes(tuple(reasons), last_step(case), revert=Reason("data_undone", said))
        if changes:
            reasons.append(kept(changes))
        return StepNotes(tuple(reasons), last_step(case), kept=tuple(changes))

    def _rollback(self, facts: TurnFacts, *, failing: Execution | None = None,
                  hint: list[str] | None = None) -> Rollback | None:
        """Stuck: the failing streak that ends at the last step (``failing``: at the step that
        just ran, which must fail as the one before it did) to roll back, or None."""
        if self.budget.rollbacks >= self.settings.max_rollbacks:
            return None
        steps = list(facts.steps)
        current = failing if failing is not None else (steps[-1].execution if steps else None)
        key = _error_key(current)
        if key is None:
            return None
        first = len(steps) + (1 if failing is not None else 0)
        while first - 1 > self.budget.floor and _error_key(steps[first - 2].execution) == key:
            first -= 1
        if failing is not None and first == len(steps) + 1:
            return None  # a first failure: the hint is enough
        last = steps[-1] if failing is None else None
        if hint is None and last is not None:
            found = self.teacher.hint(last.execution, last.code, facts.variables)
            hint = [found] if found else []
        self.budget.rollbacks += 1
        self.budget.floor = self.budget.undone_at = len(steps) + (1 if failing is not None else 0)
        numbers = f"{first}" if first == self.budget.floor else f"{first} to {self.budget.floor}"
        assert current is not None and current.error is not None
        which = "rollback_repeat" if failing is None and first == self.budget.floor else "rollback"
        text = message(which, steps=numbers, error=str(current.error).splitlines()[0],
                       hint=("\n" + "\n".join(hint)) if hint else "")
        return Rollback(Reason("rollback", text), first)

    def _case(self, action: Action, facts: TurnFacts) -> ActionCase:
        return ActionCase(action, facts.steps, self.budget.undone_at, self.budget.idle, facts.failed,
                          facts.pending, self.settings.undo, self.question.question)


TOLD_WRONG = frozenset({"check_coerced", "check_values", "check_text_left"})
"""The lines after a step that say its result is wrong: an answer from that step, the line
not acted on, is in doubt (:func:`.doubts.slip_kept`)."""


def _question_reminder(question: str) -> str:
    """The question restated after an output, so that a small model reads what it asks
    (and the form it asks for) right before it answers, not only at the start of a long
    context; empty for a question too long to repeat. Earlier outputs keep theirs: taking
    it out would change messages the model server has cached, and cost their whole
    prompt again."""
    question = question.strip()
    return "\n" + message("code_question", question=question) if 0 < len(question) <= _REMINDER_MAX else ""


def _standing(cells: Sequence[dict[str, Any]], current: int | None) -> tuple[tuple[int | None, str], ...]:
    """The conversation's code cells that ran ``ok`` and were not undone, before the step
    counted ``current``, as (execution count, code)."""
    found = []
    for cell in cells:
        meta = cell_meta(cell)
        count = cell.get("execution_count")
        if stands(cell) and meta.get("status") == "ok" and (current is None or count != current):
            source = cell.get("source", "")
            found.append((count if isinstance(count, int) else None,
                          "".join(source) if isinstance(source, list) else str(source)))
    return tuple(found)


def _error_key(ex: Execution | None) -> tuple[str, str] | None:
    """What makes two failures "the same": the exception's name and its message with the
    numbers blanked (positions and counts may differ); None for a step that did not fail."""
    if ex is None or ex.error is None:
        return None
    return ex.error.ename, re.sub(r"\d+", "#", ex.error.evalue)


def _first_sentence(text: str) -> str:
    """A reason's first sentence, what it found (``No output ... shows these numbers: 577.``),
    without what it asked (the again-messages ask for code only)."""
    return text.lstrip("- ").split(". ", 1)[0].rstrip(".") + "."


@dataclass(frozen=True)
class Rewritten:
    """A step's code as the judge rewrote it before it ran (:meth:`Judge._rewritten`)."""

    code: str
    """The code that runs."""
    notes: tuple[Reason, ...]
    """What the model reads of each rewrite above the step's output, in the order they were made."""


def _renamed_note(first: int, rewrite: Renamed) -> Reason:
    """The undone code of step ``first``, sent again, ran with the tables renamed."""
    old, new = rewrite.listed()
    return Reason("data_renamed",
                  message("data_renamed", step=first, renamed=rewrite.describe(), old=old, new=new))


def _last_failure(steps: Sequence[Step]) -> str | None:
    """The error of the last step, if it did not end ``ok`` (one line)."""
    last = steps[-1].execution if steps else None
    if last is None or last.status == "ok":
        return None
    return str(last.error).splitlines()[0] if last.error is not None else last.status


__all__ = ["ANSWER_CHECKS", "MAX_IDLE_REPLIES", "Budget", "Judge", "JudgeSettings", "Policies", "Registered"]
