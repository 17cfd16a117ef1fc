"""Before an answer is accepted: the checks that can send it back to the model, once each.

An answer is sent back in ONE short message that lists every reason found, and each
reason at most once per question, so a model that insists still gets its answer through
(and the step limit bounds the loop either way). The reasons, in the order the model
reads them:

- ``failed``: the question's last step failed (an error, a timeout) and the model answered
  at once: nothing computed what that step was for, and a small model fills the gap with
  a guess (a name it saw in the profile). An answer that says what could not be computed
  is then accepted.

- ``change_undone``: the question asks to change the data, the change its step made was
  the wrong one and was undone, and no change was kept since: an answer that says it is
  done describes data that is not there.

- ``no_work``: a question in a conversation with data files ran no cell of its own: the
  answer cannot come from the data (a small local model wrote code but never ran it, then
  invented numbers; or read a column's minimum off the table's profile as the answer to a
  question about another column). The message says which: nothing ran yet; the numbers
  are the profile's (which describes the columns, cells compute); they are an earlier
  question's; or the answer (a name, a category, True/False) comes from no cell of this
  question. A follow-up that only restates an earlier result says so and is accepted.

- ``unsupported``: once code has run in the conversation, every number of the answer is
  grounded in its cells (:mod:`kernel_analyst.claims`: outputs, results, recorded
  variables, code), derived from two of them, or unsupported; unsupported ones are named,
  and the model gets one more turn to compute them in a cell or leave them out.

- ``unsupported_values``: a name or category the answer gives (inside ``@name[value]``,
  or a short answer) that no cell's output shows, named.

- ``verdict``: an ``@name[value]`` item whose value is a verdict the question's rule
  decides (True/False, yes/no, or one of the words the question offers: ``linear``,
  ``poor fit``, ``significant``) that no output of this question's cells shows. The
  numbers were computed, the verdict was judged by eye, and a small model judges
  ``p = 0.0`` "normal" and ``p = 0.41`` "nonlinear": it goes back, to be computed with the
  rule in a cell and printed.

- ``profile``: the question ran cells, but every number of the answer is only in a
  table's profile: none of its cells computed it.

- ``empty``: the answer is only ``nan``, ``None`` or an empty value (alone or in every
  ``@name[value]``): no finding, usually a filter that matched no row
  (:func:`~kernel_analyst.agent.feedback.checks.empty_answer`).

- ``form``: the question says how the answer must be written (``@name[value]``
  templates, decimals: :class:`~kernel_analyst.agent.feedback.form.AnswerForm`) and the
  answer does not follow it; the feedback names the form.

- ``doubtful``: a result that is trivially the whole (0% or 100% of a subset, the table's
  own row count for a count of some rows), or a list shorter than the question asks
  (:mod:`.doubts`).

- ``repeated_answer``: the answer is an earlier question's answer word for word (six words
  or more, with numbers), to another question.

- ``stale``: the question ran cells, but every number of the answer comes from the cells
  of an earlier question (a follow-up answered with the previous answer's total): the
  answer is grounded, but not in what this question computed.

Each check is a function of an :class:`AnswerCase`, registered with the judge
(:data:`~kernel_analyst.agent.feedback.judge.ANSWER_CHECKS`) under the setting that turns
it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...claims import Claim, ClaimStatus, Grounding, SourceIndex, ground
from ...kernels.trail import cell_meta, stands
from ..prompting import message, shortened
from .checks import empty_answer
from .decisions import QuestionFacts, Reason
from .form import AnswerForm, is_placeholder

_MAX_NAMED = 8
"""Numbers named in one reason, at most."""


@dataclass(frozen=True)
class AnswerCase:
    """An answer, with what the checks read."""

    answer: str
    """The answer's text."""
    grounding: Grounding
    """Its numbers against every cell of the conversation."""
    question: QuestionFacts
    """The question it answers."""
    cells: Sequence[dict[str, Any]] = ()
    """The conversation's notebook cells."""
    steps: int = 0
    """Steps this question ran."""
    protocol: str = "tools"
    """How the model runs code (``tools`` or ``code``): the feedback's wording."""
    tool_name: str = "python"
    """The Python tool's name, for the feedback."""
    failed: str | None = None
    """The error of this question's last step, if it did not end ``ok`` (one line)."""
    nan: tuple[str, ...] = ()
    """Numbers this question's steps left NaN (their names)."""
    refused: frozenset[float] = frozenset()
    """Numbers an earlier answer to this question gave that no cell produced (sent back as
    unsupported): one of them typed into code since is still not computed (:func:`typed_in`)."""
    told: tuple[str, ...] = ()
    """The lines after the question's last step that said its result is wrong (a conversion
    that made NaN of most of a column, a comparison with a value the column never holds)."""

    change_undone: tuple[int, str, str] | None = None
    """The step (and the table) whose change this question asks for was undone as the wrong
    change (:func:`.slips.wrong_change`), with no change of the data kept since, and the code
    that makes the change asked where it is known (" For example: ...", or "")."""

    @property
    def cells_run(self) -> int:
        """Code cells that computed something in the conversation, this question's included."""
        return self.question.cells_before + self.steps


AnswerCheck = Callable[[AnswerCase], Reason | None]
"""A reason to send an answer back, or None."""


def failed_last_step(case: AnswerCase) -> Reason | None:
    """The question's last step failed, and the model answered at once."""
    if case.failed is None:
        return None
    return Reason("failed", message("feedback_failed_last", error=case.failed))


def rests_on_nan(case: AnswerCase) -> Reason | None:
    """The question's steps left a number NaN, and the answer is not "NaN" itself: a verdict
    or a count from it is wrong (DABench easy 19: ``skew`` of a column with gaps is NaN, and
    ``-0.5 <= skewness <= 0.5`` printed False, given as the answer; hard 109 the same from a
    t-test's p-value)."""
    if not case.nan or empty_answer(case.answer) is not None:
        return None
    names = ", ".join(f"`{name}`" for name in case.nan[:4])
    return Reason("from_nan", message("feedback_from_nan", names=names,
                                      verb="is" if len(case.nan) == 1 else "are"))


def change_undone(case: AnswerCase) -> Reason | None:
    """The question asks to change the data, its change was undone as the wrong one, and the
    model answered that it is done: nothing of it is in the data (DSEval employee 7: one-hot
    for label encoding undone, then "The categorical columns have been encoded using label
    encoding." with no cell since; the next question split the text columns)."""
    if case.change_undone is None:
        return None
    step, name, example = case.change_undone
    return Reason("change_undone", message("feedback_change_undone", step=step, name=name, example=example))


def no_work(case: AnswerCase) -> Reason | None:
    """A question about the data answered with no cell of its own: nothing ran in the
    conversation yet; or its numbers are the table's profile (which describes, cells
    compute), or an earlier question's; or it names things no cell of its own showed."""
    q = case.question
    if not q.has_files or case.steps:
        return None
    found = _grounded(case)
    if found and all(_role(c, case.cells) == "profile" for c in found):
        return Reason("no_work", message("feedback_profile_no_code", numbers=_named(found, case.cells)))
    if case.cells_run == 0:
        key = "feedback_no_work_code" if case.protocol == "code" else "feedback_no_work_tools"
        return Reason("no_work", message(key, tool_name=case.tool_name))
    if found and all(c.source is not None and (c.source.cell_index or 0) < q.first_cell for c in found):
        return Reason("no_work", message("feedback_stale_no_code", numbers=_named(found, case.cells)))
    checkable = found or _text_values(case.answer, bare=True) or _is_boolean(case.answer)
    if checkable or _TASK_RE.match(q.question):
        return Reason("no_work", message("feedback_no_code_here"))
    return None  # prose that states nothing checkable (a remark about the conversation)


_SHOW_VERBS = ("show", "display", "print", "list", "return")
"""The leading verbs of a question that asks to show its result."""
_TASK_VERBS = (*_SHOW_VERBS, "identify", "calculate", "compute", "find", "count", r"analy[sz]e", "check",
               "determine", "create", "make", "plot", "draw", "compare", "test", "measure", "detect", "rank",
               "sort", "group", "estimate", "fit", "train", "predict", "encode", "convert", "rename", "drop",
               "remove", "delete", "fill", "impute", "merge", "join", "split", r"normali[sz]e", "scale",
               r"standardi[sz]e", "transform", "replace", "add", "filter", "select", "extract", "aggregate",
               "pivot", "build", "apply", "clean", "read", "load", "import", "save")
"""The leading verbs of a question that is a task on the data (the ones that show included)."""
_ASKING = (r"(?:please\s+|(?:can|could|would|will) you(?: please)?\s+|i(?:'d| would) like you to\s+|now\s+|"
           r"next,?\s+)?")
"""A polite or sequencing lead-in before a question's verb ("Could you list ...", "I'd like
you to list ...")."""
_TASK_RE = re.compile(rf"\s*{_ASKING}(?:{'|'.join(_TASK_VERBS)})\b", re.I)
"""A question that is a task on the data, by its first word ("Identify the data types for
each column.", "Rename the column ..."): answered with no cell, nothing was done or looked
at (DSEval housing-price-prediction with the 1.5B model: the dtypes given from the profile,
two of them wrong). "Describe" and "summarize" are left out: they may ask about the
conversation."""


def profile_only(case: AnswerCase) -> Reason | None:
    """Every number of the answer is only in a table's profile: no cell computed it."""
    found = _grounded(case)
    if not case.steps or not found or case.grounding.unsupported:
        return None
    if all(_role(c, case.cells) == "profile" for c in found):
        return Reason("profile", message("feedback_profile", numbers=_named(found, case.cells)))
    return None


def _grounded(case: AnswerCase) -> list[Claim]:
    return [c for c in case.grounding.claims if c.status is not ClaimStatus.UNSUPPORTED]


def _role(claim: Claim, cells: Sequence[dict[str, Any]]) -> str:
    """The role of the cell a claim's source is in ("" for a cell the conversation ran)."""
    index = claim.source.cell_index if claim.source is not None else None
    if index is None or not 0 <= index < len(cells):
        return ""
    meta = (cells[index].get("metadata") or {}).get("kernel_analyst") or {}
    return str(meta.get("role") or "") if isinstance(meta, dict) else ""


def _named(claims: list[Claim], cells: Sequence[dict[str, Any]]) -> str:
    return ", ".join(_with_origin(c, cells) for c in claims[:_MAX_NAMED])


def unsupported(case: AnswerCase) -> Reason | None:
    """Numbers no cell produced (once code ran), named."""
    found = case.grounding.unsupported
    if case.cells_run == 0 or not found:
        return None
    more = ", ..." if len(found) > _MAX_NAMED else ""
    named = ", ".join(c.text for c in found[:_MAX_NAMED]) + more
    key = "feedback_unsupported_code" if case.protocol == "code" else "feedback_unsupported_tools"
    return Reason("unsupported", message(key, numbers=named, tool_name=case.tool_name))


def typed_in(case: AnswerCase) -> Reason | None:
    """Numbers sent back as no cell's, given again with only code as their source: typed into
    a cell as literals, not computed (DSEval students-exam-scores with the 1.5B model: the
    correlations 0.85, 0.78 and 0.72 made up, sent back, then written into the matrix with
    ``correlation_matrix.iloc[0, 1] = 0.85`` and cited from that cell's code), or printed by
    a cell that writes them in as they are (DABench hard 125: ``print(f"R-squared: {0.705}")``
    after 0.705 was sent back, cited from that cell's output)."""
    if not case.refused:
        return None
    typed = [c for c in case.grounding.claims if c.status is ClaimStatus.GROUNDED and c.source is not None
             and c.value in case.refused and _typed_source(c, case.cells)]
    if not typed:
        return None
    named = ", ".join(c.text for c in typed[:_MAX_NAMED]) + (", ..." if len(typed) > _MAX_NAMED else "")
    return Reason("typed_in", message("feedback_typed_in", numbers=named))


def _typed_source(claim: Claim, cells: Sequence[dict[str, Any]]) -> bool:
    """The claim's source is a cell's code, or an output of a cell whose code holds the
    number as it was printed."""
    source = claim.source
    if source is None or source.where == "code":
        return source is not None
    index = source.cell_index
    if source.where != "output" or index is None or not 0 <= index < len(cells):
        return False
    code = cells[index].get("source", "")
    code = "".join(code) if isinstance(code, list) else str(code)
    return re.search(rf"(?<![\w.]){re.escape(source.value)}(?![\w.])", code) is not None


def unsupported_values(case: AnswerCase) -> Reason | None:
    """Names or categories the answer gives that no cell's output shows (once code ran)."""
    if case.cells_run == 0 or (case.question.has_files and not case.steps):
        return None  # no_work's domain
    values = _text_values(case.answer, bare=bool(_ASKS_FOR_A_NAME.search(case.question.question)))
    if not values:
        return None
    shown = " ".join(text for _, text in printed_since(case.cells, 0, skip_roles=("profile",))).lower()
    words = set(_WORD_RE.findall(shown)) | set(_WORD_RE.findall(case.question.question.lower()))
    missing = [v for v in values if v.lower() not in shown
               and not any(w in words for w in _WORD_RE.findall(v.lower()) if w not in _COMMON)]
    if not missing:
        return None
    named = ", ".join(repr(v) for v in missing[:_MAX_NAMED])
    key = f"feedback_unsupported_values_{'code' if case.protocol == 'code' else 'tools'}"
    return Reason("unsupported_values", message(key, values=named, tool_name=case.tool_name))


def uncomputed_verdicts(case: AnswerCase) -> Reason | None:
    """``@name[value]`` verdicts (True/False, yes/no, a word the question offers) that no
    output of this question's cells shows: judged by eye, not computed with the rule.
    Values no output and not the question shows are :func:`unsupported_values`'s."""
    q = case.question
    if not q.has_files or not case.steps:
        return None  # no_work's domain
    offered = set(_WORD_RE.findall(q.question.lower()))
    shown = " ".join(text for _, text in printed_since(case.cells, q.first_cell, skip_roles=("profile",)))
    missing = []
    for name, value in AnswerForm.given(case.answer).items():
        parts = [p.strip().strip("'\"`*").strip() for p in value.split(",")]
        verdicts = [p for p in parts if p and not any(ch.isdigit() for ch in p) and not is_placeholder(p)
                    and (p.lower() in _BOOLEAN or all(w in offered for w in _WORD_RE.findall(p.lower())))]
        if any(not re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", shown, re.I) for p in verdicts):
            missing.append(f"@{name}[{value.strip()}]")
    if not missing:
        return None
    key = f"feedback_verdict_{'code' if case.protocol == 'code' else 'tools'}"
    return Reason("verdict", message(key, items=", ".join(missing[:_MAX_NAMED]), tool_name=case.tool_name))


_WORD_RE = re.compile(r"[a-z][a-z0-9_'-]+")
_COMMON = frozenset({"the", "and", "for", "with", "are", "not", "yes", "true", "false", "none", "type",
                     "class", "group", "value", "values", "most", "least", "highest", "lowest"})
_BOOLEAN = frozenset({"yes", "no", "true", "false", "none", "n/a", "na", "nan"})
_SENTENCE = frozenset({"is", "are", "was", "were", "it", "the", "a", "an", "this", "that", "of", "in", "i",
                       "we", "has", "have", "not", "be", "there", "they", "with", "by", "to", "for"})


_ASKS_FOR_A_NAME = re.compile(r"\b(?:which|who|whom|whose)\b|\bwhat\b.{0,40}\b(?:name|type|kind|category|"
                              r"class|group|species|country|city|state|brand|model|day|month)\b", re.I)
"""A question that asks for a name or a category (its bare answer is checked)."""


def _is_boolean(answer: str) -> bool:
    """A bare yes/no or True/False (alone or in every ``@name[value]``)."""
    items = re.findall(r"@\w+\[(.*?)\]", answer) or [answer.strip().strip("*_`.!").strip()]
    return all(item.strip().lower() in ("yes", "no", "true", "false") for item in items)


def _text_values(answer: str, *, bare: bool) -> list[str]:
    """The answer's names and categories: its ``@name[value]`` values without digits, or
    (with ``bare``: the question asks for a name) a bare answer of up to three words, no
    sentence; yes/no, True/False and a template's placeholder are left out."""
    items = re.findall(r"@\w+\[(.*?)\]", answer)
    candidates = items if items else [answer.strip().strip("*_`.").strip()] if bare else []
    found = []
    for value in candidates:
        value = value.strip().strip("'\"`*")
        if not value or any(ch.isdigit() for ch in value) or value.lower() in _BOOLEAN:
            continue
        if is_placeholder(value):
            continue
        words = value.lower().split()
        if not items and (len(words) > 3 or "\n" in value or any(w in _SENTENCE for w in words)):
            continue
        found.append(value)
    return found


def empty(case: AnswerCase) -> Reason | None:
    """An answer that is only ``nan``, ``None`` or an empty value."""
    value = empty_answer(case.answer)
    return Reason("empty", message("feedback_empty", value=value)) if value is not None else None


_SHOW_RE = re.compile(rf"(?:^|[.;:!?]\s+|\n)\s*{_ASKING}({'|'.join(_SHOW_VERBS)})\b"
                      rf"|\band ({'|'.join(_SHOW_VERBS)})\b", re.I)
"""A question that asks to show its result: an imperative "Show ...", "List ...", "Return a
DataFrame ...", "... and display ..." (DSEval's "Show the result in a DataFrame with
'Education' as the index")."""


_TABLE_ASKED = re.compile(r"\b(?:return|show|display|give)\b[^.?!\n]{0,40}?\b(?:a|an|as|in)\s+"
                          r"(?:new\s+|single\s+)?(?:pandas\s+)?(data\s?frame|series|table)\b", re.I)
"""A question that asks for a table as its result: "Return a DataFrame with ParentEduc as the
index", "Show the result in a DataFrame" (61 of DSEval's questions; every reference cell of
them ends with the table as its value); not "Show the shape of the dataframe"."""
_TABLE_ROWS = 2
"""Printed lines of two fields or more that can be a table (numbers printed one per line are not)."""


def nothing_shown(case: AnswerCase) -> Reason | None:
    """A question that asks to show its result, answered while none of its own cells showed
    anything (DSEval employee-dataset: ``pivot = employee.pivot_table(...)`` displays nothing,
    and the answer was "The pivot table shows the average 'PaymentTier' for each level"); or
    one that asks for a table, answered while its last cell showed none (DSEval
    students-exam-scores 5: "Return a DataFrame ... only the rows that are outliers", and the
    last cell printed the two bounds)."""
    q = case.question
    asked = _SHOW_RE.search(q.question)
    if asked is None or not case.steps:
        return None
    cells = _code_cells(case.cells, q.first_cell, ("profile",))
    if not any(_shows(cell) for cell in cells):
        verb = (asked.group(1) or asked.group(2)).lower()
        return Reason("nothing_shown", message("feedback_nothing_shown", verb=verb))
    table = _TABLE_ASKED.search(q.question)
    ran = [cell for cell in cells if cell_meta(cell).get("status", "ok") == "ok"]
    if table is not None and ran and not _shows(ran[-1], table=True):
        return Reason("nothing_shown", message("feedback_no_table", shown=table.group(1)))
    return None


def _shows(cell: dict[str, Any], *, table: bool = False) -> bool:
    """The cell displayed a value, or printed something (``table``: printed a table, rows of
    two fields or more; the three correlations of DSEval students-exam-scores 6 printed one
    per line are no table)."""
    for output in cell.get("outputs") or []:
        kind = output.get("output_type")
        if kind in ("execute_result", "display_data"):
            return True
        text = _text(output.get("text", "")) if kind == "stream" else ""
        rows = [line for line in text.splitlines() if len(line.split()) >= 2]
        if text.strip() and (not table or len(rows) >= _TABLE_ROWS):
            return True
    return False


def wrong_form(case: AnswerCase) -> Reason | None:
    """Not in the form the question asks for (its templates, its decimals)."""
    form = AnswerForm.of(case.question.question)
    problems = form.problems(case.answer)
    if not problems:
        return None
    return Reason("form", message("feedback_form", form=form.template, problems="; ".join(problems)))


def stale(case: AnswerCase) -> Reason | None:
    """Every number from an earlier question's cells, none from this question's own."""
    q = case.question
    found = _grounded(case)
    if not case.steps or not found:
        return None
    here = ground(case.answer, SourceIndex.from_cells(case.cells[q.first_cell:]), question=q.question,
                  files=q.files)
    if any(c.status is not ClaimStatus.UNSUPPORTED for c in here.claims):
        return None
    return Reason("stale", message("feedback_stale", numbers=_named(found, case.cells)))


_REPEATED_WORDS = 6
"""Words an answer needs before it repeating an earlier one word for word is doubtful ("Yes"
answers two questions by right)."""


def repeated_answer(case: AnswerCase) -> Reason | None:
    """The answer of an earlier question, word for word, to another question (DSEval
    students-exam-scores 2 with the 1.5B model: "Return a DataFrame with ParentEduc as the
    index ..." answered "The dataset has 30641 rows and 14 columns.", question 1's answer;
    its numbers still held, so nothing else saw it). Only an answer with numbers: "Done: the
    last cell holds the result." answers every question whose result is a cell's value."""
    q = case.question
    said = _plain(case.answer)
    if len(said.split()) < _REPEATED_WORDS or not case.grounding.claims:
        return None
    for asked, answered in zip(q.earlier, q.earlier_answers, strict=False):
        if _plain(answered) == said and _plain(asked) != _plain(q.question):
            return Reason("repeated_answer", message("feedback_repeated_answer", question=shortened(asked)))
    return None


def _plain(text: str) -> str:
    """Text as two answers are compared: case, spacing and the ends' punctuation left out."""
    return " ".join(text.lower().split()).strip(" .!*_`")


def _with_origin(claim: Claim, cells: Sequence[dict[str, Any]]) -> str:
    """``800074 (cell [2]: df['TOTAL'].sum())``: a number and the code that printed it."""
    source = claim.source
    if source is None or source.cell_index is None or not 0 <= source.cell_index < len(cells):
        return claim.text
    cell = cells[source.cell_index]
    code = "".join(cell.get("source", ""))
    lines = [ln.strip() for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    line = lines[-1] if lines else ""
    if _role(claim, cells) == "profile":  # its last line deletes the profile's helpers: say what it is
        meta = (cell.get("metadata") or {}).get("kernel_analyst") or {}
        created = [str(v.get("name")) for v in ((meta.get("variables") or {}).get("created") or [])
                   if isinstance(v, dict) and v.get("name")]
        line = f"the profile of {', '.join(created)}" if created else "a table's profile"
    line = line if len(line) <= 60 else line[:57] + "..."
    where = f"cell [{source.cell}]" if source.cell is not None else "an earlier cell"
    return f"{claim.text} ({where}: {line})" if line else f"{claim.text} ({where})"


def printed_since(cells: Sequence[dict[str, Any]], since: int, *,
                  skip_roles: tuple[str, ...] = ()) -> list[tuple[int | None, str]]:
    """What each code cell from position ``since`` on printed (streams and plain-text
    results), as (its execution count, the text), oldest first; cells whose role is in
    ``skip_roles`` (``profile``) and undone cells left out."""
    found: list[tuple[int | None, str]] = []
    for cell in _code_cells(cells, since, skip_roles):
        parts = []
        for output in cell.get("outputs") or []:
            if output.get("output_type") == "stream":
                parts.append(_text(output.get("text", "")))
            elif output.get("output_type") in ("execute_result", "display_data"):
                parts.append(_text((output.get("data") or {}).get("text/plain", "")))
        count = cell.get("execution_count")
        found.append((count if isinstance(count, int) else None, "".join(parts)))
    return found


def code_since(cells: Sequence[dict[str, Any]], since: int, *, skip_roles: tuple[str, ...] = ()) -> list[str]:
    """The source of each code cell from position ``since`` on, oldest first; cells whose
    role is in ``skip_roles`` (``profile``) and undone cells left out."""
    return [_text(cell.get("source", "")) for cell in _code_cells(cells, since, skip_roles)]


def _code_cells(cells: Sequence[dict[str, Any]], since: int,
                skip_roles: tuple[str, ...]) -> list[dict[str, Any]]:
    """The code cells from ``since`` on that the state comes from: cells marked ``undone`` (an
    undo, a rolled-back streak, the first attempt's cells in a further attempt's branch) are
    left out, as grounding leaves them out (an attempt forked from before the question saw
    the first attempt's cells as its own: its form completed from their prints, its doubts
    read their code)."""
    return [cell for cell in cells[since:] if stands(cell) and cell_meta(cell).get("role") not in skip_roles]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def grounding_of(answer: str, cells: Sequence[dict[str, Any]], question: QuestionFacts) -> Grounding:
    """The answer's numbers against every cell of the conversation."""
    return ground(answer, SourceIndex.from_cells(cells), question=question.question, files=question.files,
                  prefer_from=question.first_cell)


__all__ = [
    "AnswerCase",
    "AnswerCheck",
    "change_undone",
    "code_since",
    "empty",
    "failed_last_step",
    "grounding_of",
    "no_work",
    "nothing_shown",
    "printed_since",
    "profile_only",
    "repeated_answer",
    "rests_on_nan",
    "stale",
    "typed_in",
    "uncomputed_verdicts",
    "unsupported",
    "unsupported_values",
    "wrong_form",
]
