"""After a step ran: what the model is told beside its output, each line from one policy.

In order: comparisons against values a column never holds, empty selections and NaN
results (:mod:`.checks`), code that computes a near neighbour of what the question asks
(the sample standard deviation for the population one, MSE for RMSE: :mod:`.slips`), text
columns left in a table the question asks to encode whole, the hint for an error
(:mod:`.hints`), and the rare instructions when they apply (a step stopped at the time
limit: how to run it in the background; code that changes something outside the kernel:
how to keep it from running twice); then, apart, the note that this was the last code run
allowed. Each policy is an async function of a :class:`StepCase` (only the comparison
check asks the kernel anything: a column's values, through :attr:`StepCase.lookup`, so a
test gives it a dict). What a step did to the person's tables is :mod:`.keeping`'s.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ...kernels import VariableInfo
from ..prompting import message
from .checks import ValueLookup, carried_filter_notes, comparison_notes, result_notes, text_columns
from .coercion import coerced_notes
from .decisions import Reason, StepFacts
from .hints import ErrorTeacher
from .reapplied import reapplied
from .slips import encodes_whole, recomputed_columns, slips_in


@dataclass(frozen=True)
class StepCase:
    """A step that ran, with what the policies read."""

    step: StepFacts
    """The code and its outcome."""
    variables: Mapping[str, VariableInfo] = field(default_factory=dict)
    """The variables as the model knows them after the step."""
    teacher: ErrorTeacher = field(default_factory=ErrorTeacher)
    """The conversation's uploaded tables and last error."""
    lookup: ValueLookup | None = None
    """Asks the kernel for a column's values (None: not asked)."""
    steps_used: int = 0
    """Code runs used in this answer, this one included."""
    max_steps: int = 15
    """Code runs allowed."""
    check_results: bool = True
    """Whether the checks of results that cannot be right run."""
    question: str = ""
    """The question the step is for (what :func:`slips` reads)."""
    earlier: tuple[str, ...] = ()
    """The conversation's earlier questions (what :func:`carried_filters` reads)."""
    columns: Mapping[str, str] = field(default_factory=dict)
    """The uploaded tables' column names, each -> its file (:attr:`.QuestionFacts.columns`)."""
    before: tuple[tuple[int | None, str], ...] = ()
    """The conversation's earlier cells that ran and stand (not undone), as (execution count,
    code): what :func:`transformed_again` reads."""

    @property
    def ran(self) -> bool:
        """The code ran and ended ``ok``, and there is an outcome to look at."""
        return self.step.observed and self.step.execution.status == "ok"


StepCheck = Callable[[StepCase], Awaitable[list[Reason]]]
"""The lines a policy adds after a step (none, one or more)."""


async def wrong_values(case: StepCase) -> list[Reason]:
    """Comparisons with a value the column never holds (with its real values)."""
    if not case.check_results or not case.ran:
        return []
    notes = await comparison_notes(case.step.code, case.variables, case.lookup)
    return [Reason("check_values", note) for note in notes]


async def empty_results(case: StepCase) -> list[Reason]:
    """An empty selection, or a NaN or empty result printed as the finding."""
    if not case.check_results or not case.ran:
        return []
    return [Reason("check_empty", note) for note in result_notes(case.step.execution)]


async def slips(case: StepCase) -> list[Reason]:
    """Code that computes a near neighbour of what the question asks (:mod:`.slips`)."""
    if not case.check_results or not case.ran or not case.question:
        return []
    recomputed = recomputed_columns(case.question, case.step.code, case.columns)
    return slips_in(case.question, case.step.code) + recomputed


def encoding_example(question: str, info: VariableInfo) -> str:
    """The code that encodes the text columns of ``info`` the way ``question`` asks (label
    encoding or one-hot), for a question that encodes every categorical column and names
    none; "" otherwise."""
    left = text_columns(info)
    if not left or not encodes_whole(question):
        return ""
    if re.search(r"\blabel\b", question, re.I):
        return " " + message("text_left_label", frame=info.name, columns=repr(left))
    if re.search(r"one[- ]hot|dumm", question, re.I):
        return " " + message("text_left_one_hot", frame=info.name, columns=repr(left))
    return ""


async def text_left(case: StepCase) -> list[Reason]:
    """The question asks to encode the categorical columns, and a table the step changed still
    holds text (DSEval housing-price-prediction with the 1.5B model: one of seven text columns
    encoded, ``furnishingstatus``, the answer "The categorical features have been encoded", and
    the model of the next questions fit on text)."""
    if not case.check_results or not case.ran or not encodes_whole(case.question):
        return []
    for info in case.step.execution.variables.changed:
        left = text_columns(info)
        if not left:
            continue
        shown = ", ".join(f"`{name}`" for name in left[:8]) + (", ..." if len(left) > 8 else "")
        how = encoding_example(case.question, info)
        return [Reason("check_text_left", message("check_text_left", frame=info.name, names=shown, how=how))]
    return []


async def carried_filters(case: StepCase) -> list[Reason]:
    """A filter an earlier question asked for, carried into a question that does not ask
    for it (:func:`.checks.carried_filter_notes`)."""
    if not case.check_results or not case.ran or not case.question or not case.earlier:
        return []
    notes = carried_filter_notes(case.step.code, case.variables, case.question, case.earlier)
    return [Reason("check_carried", note) for note in notes]


async def coerced(case: StepCase) -> list[Reason]:
    """A conversion that silently makes NaN of most of a column (:mod:`.coercion`)."""
    if not case.check_results or not case.ran or "coerce" not in case.step.code:
        return []
    return [Reason("check_coerced", note) for note in coerced_notes(case.step.code, case.teacher.tables)]


async def error_hint(case: StepCase) -> list[Reason]:
    """What went wrong in terms of the data, and what to run instead (:mod:`.hints`)."""
    if not case.step.observed:
        return []
    hint = case.teacher.hint(case.step.execution, case.step.code, case.variables)
    return [Reason("hint", hint)] if hint else []


async def timed_out(case: StepCase) -> list[Reason]:
    """A step stopped at the time limit: how to run long code (told when it applies)."""
    if case.step.execution.status != "timeout":
        return []
    return [Reason("background_hint", message("background_rule"))]


_SIDE_EFFECTS = re.compile(r"\b(?:requests\.(?:post|put|patch|delete)|smtplib|\.to_sql\(|\.sendmail\(|"
                           r"urlopen\(|(?:INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b)", re.I)


async def transformed_again(case: StepCase) -> list[Reason]:
    """A column replaced by a transform of itself that an earlier cell already did
    (:mod:`.reapplied`)."""
    if not case.check_results or not case.ran:
        return []
    return [Reason("transformed_again", message("transformed_again", frame=t.frame, column=repr(t.column),
                                                cell=count if count is not None else "?", code=t.text))
            for t, count in reapplied(case.step.code, case.before)]


async def side_effects(case: StepCase) -> list[Reason]:
    """Code that changes something outside the kernel: how to keep it from being run again
    when the conversation's variables are rebuilt (told when it applies, once it ran)."""
    if not case.ran or not _SIDE_EFFECTS.search(case.step.code) or "no-replay" in case.step.code:
        return []
    return [Reason("no_replay_hint", message("no_replay_rule"))]


STEP_CHECKS: tuple[StepCheck, ...] = (wrong_values, empty_results, coerced, carried_filters, slips, text_left,
                                      transformed_again, error_hint, timed_out, side_effects)
"""The policies after a step, in the order the model reads their lines."""


def last_step(case: StepCase) -> Reason | None:
    """This was the last code run allowed: answer now (said apart, after the rest)."""
    if case.steps_used < case.max_steps:
        return None
    return Reason("last_step", message("last_step", max_steps=case.max_steps))


__all__ = ["STEP_CHECKS", "StepCase", "StepCheck", "empty_results", "encoding_example", "error_hint",
           "last_step", "side_effects", "slips", "text_left", "timed_out",
           "transformed_again", "wrong_values"]
