"""Attempts that must agree: a question in doubt tried again in forked branches.

When the first answer to a question is in doubt (it still fails a check after its one
send-back, or the steps ran out: the judge says which, as :attr:`Outcome.doubts`), or on
request for every question (``Analyst(attempts=N)``), the question is tried again:

1. the conversation's state after the first attempt is forked aside (a branch, the
   kernel's pages shared copy-on-write);
2. the conversation goes back to before the question's first step (``session.undo``: the
   checkpoint the agent's sessions take before every cell); where that checkpoint is gone,
   the other attempts start from the state after the first one (only for a question that
   did not ask to change the data: the data guard left the person's tables as they were);
3. each further attempt is a branch forked from there, running the same question from the
   same messages (so a model server reuses the cached prompt) at a sampling temperature,
   several at once (``parallel_attempts``), within a time budget (twice the first
   attempt's seconds, or twice the median first attempt of the latest questions when that
   is longer: a first answer given without computing is quick, the attempts compute);
   attempts made because an answer is in doubt also share one account: over the latest
   questions they may add at most half their first attempts' seconds and a minute
   (``attempts_time_share``), so the average question takes at most about 1.5 times its
   single attempt, and a question in doubt is not tried again when the account cannot pay
   for one attempt (the answer says so);
4. the answers' values are compared (:mod:`kernel_analyst.agent.feedback.agreement`); the
   answer given is the one most attempts reach, and it says how many agreed;
5. the chosen branch is kept (``manager.keep``: its variables, files and cells become the
   conversation's; the conversation's own line since the fork stays in the trail, marked
   abandoned, so ``verify`` re-runs the chosen path) and the others are discarded with their
   cells recorded, abandoned, in the conversation's trail.

Kernels that cannot be forked from a template (a gateway, ``sandbox``) are copied instead
(the branch loads a snapshot of the namespace): slower, and the agreement says so. A
conversation whose session cannot be forked at all keeps its first answer, with a note.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ...claims import SourceIndex, ground
from ...kernels import KernelAnalystError, KernelSession
from ..briefing.note import refresh_variables
from ..events import AgentNote
from ..feedback.agreement import Attempt, Vote, vote
from ..feedback.hints import ErrorTeacher
from ..feedback.judge import Judge, JudgeSettings
from ..prompting import message, shortened
from ..results import Agreement, Usage
from ..tools.background import BackgroundSteps
from .ending import Outcome, timing_of
from .settings import TIME_SHARE
from .state import Conversation, Turn

log = logging.getLogger(__name__)

ATTEMPT_TEMPERATURE = 0.7
"""Every model call of a further attempt samples at this temperature (a greedy model given
the same messages would only repeat the first attempt)."""
MIN_BUDGET_S = 60.0
"""The further attempts may take the first attempt's time twice, and at least this long."""
COMPUTING_CALLS = 4
"""Model calls an attempt that computes makes at least (its code, a fix, the code's output
read, its answer): a first attempt that answered at once tells only what one call takes."""
RECENT_QUESTIONS = 20
"""How many latest questions tell what a question takes (the median of their first attempts)."""
Runner = Callable[[Turn, Judge], Awaitable[Outcome]]
"""Runs one attempt's turn to its end (the loop's own run)."""


class Attempts:
    """Tries questions again in forked branches, for an :class:`~.answer.AnswerLoop`."""

    def __init__(self, *, every: int, on_doubt: int, parallel: int, judging: JudgeSettings,
                 share: float | None = TIME_SHARE) -> None:
        self.every = every
        self.on_doubt = on_doubt
        self.parallel = parallel
        self.judging = judging
        self.share = share
        """The share of the latest questions' time that attempts on doubt may add (None: no bound)."""
        self.recent: collections.deque[float] = collections.deque(maxlen=RECENT_QUESTIONS)
        """Seconds of the latest questions' first attempts (what a question takes here now)."""
        self.extra: collections.deque[float] = collections.deque(maxlen=RECENT_QUESTIONS)
        """Seconds the same questions' further attempts took (0: not tried again)."""

    def observe(self, first: Outcome) -> None:
        """Remember how long a question's first attempt took (for the attempts' budget)."""
        self.remember(first.answer.duration_s)

    def remember(self, first_s: float, extra_s: float = 0.0) -> None:
        """Count a question in the account: its first attempt's seconds, and what its further
        attempts took (a question answered before this process: a resumed run, a restart)."""
        self.recent.append(max(first_s, 0.0))
        self.extra.append(max(extra_s, 0.0))

    def credit_s(self) -> float:
        """Seconds attempts on doubt may still add: :attr:`share` of the latest questions'
        first attempts and :data:`MIN_BUDGET_S`, less what their attempts took (unbounded
        without a share)."""
        if self.share is None:
            return float("inf")
        return self.share * sum(self.recent) + MIN_BUDGET_S - sum(self.extra)

    def one_attempt_s(self, first: Outcome) -> float:
        """What one further attempt is likely to take: the first one, or what a question
        takes here lately, or :data:`COMPUTING_CALLS` of the first attempt's model calls,
        whichever is longest (a first attempt that answered without computing is quick; the
        attempts compute, on a server as busy as it is)."""
        typical = statistics.median(self.recent) if self.recent else 0.0
        timing = first.answer.timing
        computing = COMPUTING_CALLS * timing.model_s / timing.calls if timing and timing.calls else 0.0
        return max(first.answer.duration_s, typical, computing)

    def budget_s(self, first: Outcome) -> float:
        """Seconds the further attempts may take: twice what one is likely to take
        (:meth:`one_attempt_s`), and at least :data:`MIN_BUDGET_S`."""
        return max(2 * self.one_attempt_s(first), MIN_BUDGET_S)

    def time_for(self, first: Outcome) -> float:
        """Seconds this question's further attempts get: :meth:`budget_s`, for attempts on
        doubt no more than the account holds (:meth:`credit_s`), and never past the
        question's own bound (:meth:`time_left_s`)."""
        budget = self.budget_s(first) if self.every > 1 else min(self.budget_s(first), self.credit_s())
        return min(budget, self.time_left_s(first))

    def time_left_s(self, first: Outcome) -> float:
        """Seconds the question's bound (``question_timeout``) leaves after its first attempt
        (infinite without one): the attempts are part of the question (DABench hard 39 ran 51
        minutes under a bound of 30, its attempts after a first attempt of 20)."""
        limit = self.judging.max_seconds
        return float("inf") if limit is None else limit - first.answer.duration_s

    def wanted(self, outcome: Outcome) -> int:
        """Attempts in all for this question (1: the first one is enough, or the attempts'
        time account cannot pay for another: the answer's notes say so)."""
        if outcome.answer.stop_reason == "error":
            return 1
        if self.every <= 1 and (not outcome.doubts or self.on_doubt <= 1):
            return 1
        if (left := self.time_left_s(outcome)) < (need := self.one_attempt_s(outcome)):
            said = message("attempts_past_timeout", why=_why(outcome), need=f"{need:.0f}",
                           left=f"{max(left, 0):.0f}")
            _note(outcome.turn, said)
            outcome.answer.notes.append(said)
            return 1
        if self.every > 1:
            return self.every
        if (credit := self.credit_s()) < need:
            said = message("attempts_over_budget", why=_why(outcome), need=f"{need:.0f}",
                           left=f"{max(credit, 0):.0f}")
            _note(outcome.turn, said)
            outcome.answer.notes.append(said)  # the answer is made already: its notes too
            return 1
        return self.on_doubt

    async def run(self, first: Outcome, judge: Judge, total: int, run: Runner) -> Outcome:
        """Try the question ``total`` times in all (the first attempt done) and keep the
        answer most attempts agree on."""
        started = time.monotonic()
        try:
            return await self._run(first, judge, total, run)
        finally:
            if self.extra:
                self.extra[-1] += time.monotonic() - started

    async def _run(self, first: Outcome, judge: Judge, total: int, run: Runner) -> Outcome:
        turn = first.turn
        main = turn.session
        stem = f"{turn.conversation_id}~q{turn.conversation.turns + 1}"
        _note(turn, message("attempts_start", count=total - 1, why=_why(first)))
        try:
            aside = await main.fork(f"{stem}-a1")
        except KernelAnalystError as exc:
            _note(turn, message("attempts_unavailable", error=str(exc)))
            return first
        if not await self._rewind(main, first) and judge.question.asks_change:
            await _discard(main, aside.id)
            _note(turn, message("attempts_no_rewind"))
            return first
        branches: list[KernelSession] = []
        try:
            for k in range(2, total + 1):
                branches.append(await main.fork(f"{stem}-a{k}"))
            outcomes = await self._all(first, judge, branches, run)
        except BaseException:
            for branch in [aside, *branches]:
                await _discard(main, branch.id)
            raise
        return await self._choose(first, aside, branches, outcomes)

    async def _rewind(self, main: KernelSession, first: Outcome) -> bool:
        """Put the conversation back to before the question's first step (False: it cannot)."""
        steps = [s for s in first.answer.steps if s.execution.execution_count is not None]
        if not steps:
            return True
        try:
            await main.undo(steps[0].execution.execution_count)
        except KernelAnalystError as exc:
            log.info("cannot go back to before the question in %s: %s", main.id, exc)
            return False
        return True

    async def _all(self, first: Outcome, judge: Judge, branches: list[KernelSession],
                   run: Runner) -> dict[int, Outcome]:
        """Run the further attempts, ``parallel`` at once, within the time budget."""
        gate = asyncio.Semaphore(self.parallel)
        budget = self.time_for(first)

        async def one(k: int, branch: KernelSession) -> tuple[int, Outcome | None]:
            async with gate:
                try:
                    return k, await self._attempt(first, judge, branch, k, run)
                except KernelAnalystError as exc:
                    _note(first.turn, message("attempt_failed", number=k, error=str(exc)))
                    return k, None

        tasks = [asyncio.create_task(one(k, b)) for k, b in enumerate(branches, start=2)]
        done, pending = await asyncio.wait(tasks, timeout=budget)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if pending:
            _note(first.turn, message("attempts_out_of_time", count=len(pending), seconds=f"{budget:.0f}"))
        found = dict(task.result() for task in done if not task.cancelled() and task.exception() is None)
        return {k: o for k, o in found.items() if o is not None}

    async def _attempt(self, first: Outcome, judge: Judge, branch: KernelSession, k: int,
                       run: Runner) -> Outcome:
        """One further attempt in ``branch``: the same question from the same messages."""
        main = first.turn
        conversation = _clone(main.conversation)
        await refresh_variables(branch, conversation.variables)
        frames = {n: i for n, i in conversation.variables.items() if i.type.endswith("DataFrame")}
        facts = dataclasses.replace(judge.question, first_cell=_question_cell(branch), frames=frames)
        messages = list(main.messages[:main.question_at + 1])
        turn = Turn(branch.id, main.question, branch, conversation, messages, _quiet, files=list(main.files),
                    question_at=main.question_at, sampling=ATTEMPT_TEMPERATURE)
        outcome = await run(turn, Judge(self.judging, facts, teacher=conversation.teacher))
        with contextlib.suppress(KernelAnalystError):
            said = outcome.answer.text or "(no answer)"
            await branch.add_markdown(f"### Attempt {k}\n\n{said}", role="model", attempt=k)
        _note(main, message("attempt_done", number=k, answer=shortened(outcome.answer.text)))
        return outcome

    async def _choose(self, first: Outcome, aside: KernelSession, branches: list[KernelSession],
                      outcomes: dict[int, Outcome]) -> Outcome:
        """Vote, keep the chosen branch, discard the others; the answer as the conversation gives it."""
        main = first.turn.session
        every = {1: first, **outcomes}
        attempts = [Attempt(k, o.answer.text, o.answer.claims, bool(o.doubts))
                    for k, o in sorted(every.items())]
        result = vote(attempts, first.turn.question)
        session_of = {1: aside, **{k: b for k, b in enumerate(branches, start=2)}}
        method = "forked"
        for k, branch in session_of.items():
            if k != result.chosen:
                await _discard(main, branch.id, record_cells=k != 1)
        try:
            report = await main.keep(session_of[result.chosen].id)
            method = report.method
        except KernelAnalystError as exc:
            _note(first.turn, message("attempt_keep_failed", error=str(exc)))
        return self._given(first, every, result, method)

    def _given(self, first: Outcome, every: dict[int, Outcome], result: Vote, method: str) -> Outcome:
        """The chosen attempt's answer, grounded in the conversation's cells as they are now."""
        chosen = every[result.chosen]
        turn = first.turn
        agreement = Agreement(result.chosen, list(result.agree), result.total,
                              {k: list(v) for k, v in result.values.items()},
                              {k: o.answer.text for k, o in every.items()}, method,
                              {k: round(o.answer.duration_s, 2) for k, o in every.items()})
        _note(turn, agreement.summary())
        answer = chosen.answer
        index = SourceIndex.from_cells(turn.session.audit.cells)
        claims = ground(answer.text, index, question=turn.question, files=turn.files,
                        prefer_from=_question_cell(turn.session)) if answer.text else None
        used = [o.answer.usage for o in every.values() if o.answer.usage is not None]
        usage = Usage(sum(u.input_tokens for u in used), sum(u.output_tokens for u in used),
                      sum(u.total_tokens for u in used), sum(u.model_calls for u in used))
        given = dataclasses.replace(answer, conversation_id=turn.conversation_id,
                                    notebook_path=turn.session.notebook_path, claims=claims,
                                    agreement=agreement, notes=list(turn.notes), timing=timing_of(turn),
                                    duration_s=time.monotonic() - turn.started, usage=usage if used else None)
        if result.chosen != 1:
            _adopt(turn.conversation, chosen.turn.conversation)
            turn.messages[:] = chosen.turn.messages
        return Outcome(given, turn, chosen.doubts)


def _clone(conversation: Conversation) -> Conversation:
    """A conversation's state for an attempt in a branch (its own memory, the same history)."""
    protocol = dataclasses.replace(conversation.protocol)
    teacher = ErrorTeacher(last=conversation.teacher.last, tables=dict(conversation.teacher.tables))
    return Conversation(protocol, list(conversation.history), {}, conversation.turns, teacher,
                        BackgroundSteps(), dict(conversation.changes), dict(conversation.origins),
                        asked=list(conversation.asked), answered=list(conversation.answered))


def _adopt(conversation: Conversation, attempt: Conversation) -> None:
    """The conversation goes on as the chosen attempt left it (its protocol, hints, changes)."""
    conversation.protocol = attempt.protocol
    conversation.teacher = attempt.teacher
    conversation.changes = attempt.changes
    conversation.origins = attempt.origins


def _question_cell(session: KernelSession) -> int:
    """The position of the notebook's last question cell (0 when there is none)."""
    cells = session.audit.cells
    for i in range(len(cells) - 1, -1, -1):
        meta = (cells[i].get("metadata") or {}).get("kernel_analyst") or {}
        if isinstance(meta, dict) and meta.get("role") == "question":
            return i
    return 0


async def _discard(main: KernelSession, branch_id: str, *, record_cells: bool = False) -> None:
    try:
        await main.discard(branch_id, record_cells=record_cells)
    except KernelAnalystError as exc:
        log.warning("could not discard attempt %s: %s", branch_id, exc)


def _why(outcome: Outcome) -> str:
    if not outcome.doubts:
        return message("attempts_asked")
    return "; ".join(r.text.lstrip("- ").split(":")[0].split(".")[0] for r in outcome.doubts[:2])



def _note(turn: Turn, text: str) -> None:
    turn.notes.append(text)
    turn.emit(AgentNote("attempts", text))


def _quiet(event: Any) -> None:
    """An attempt's own events stay in its branch (its notes reach the conversation)."""


__all__ = ["ATTEMPT_TEMPERATURE", "Attempts", "Runner"]
