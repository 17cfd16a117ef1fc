"""Results that cannot be right: cheap checks on what a step produced, said in one line each.

A small model filters ``df[df['smoker'] == True]`` on a column of ``'Yes'``/``'No'``,
prints ``nan`` and answers ``nan``. These checks look at a step's code and outcome and
say what is wrong before the model builds on it:

- **a comparison against a value the column never holds**: ``==``, ``!=``, ``isin`` and
  ``query("col == 'x'")`` on a column of a DataFrame the conversation has, against a
  literal. A type that cannot match (``True`` or ``'1'`` against an ``int64`` column,
  ``3`` against text) is judged from the dtypes the variable listing already has; text
  against text asks the kernel for the column's values once, in a request that adds no
  cell (:meth:`~kernel_analyst.kernels.KernelSession.column_values`), and the note lists
  them;
- **an empty selection**: a DataFrame or Series the step created or changed with 0 rows;
- **a NaN or empty result printed as the finding**: the step's last output line is
  ``nan``, ``None``, ``[]``, an empty DataFrame or Series, or ``name: nan``.

:func:`empty_answer` is the same judgement on an answer's text, for the review.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...kernels import ColumnValues, Execution, VariableInfo
from ..prompting import message

ValueLookup = Callable[[str, str, tuple[Any, ...]], Awaitable[ColumnValues | None]]
"""Asks the kernel for a column's values: (frame, column, the literals compared with)."""

_MAX_COMPARISONS = 4
_MAX_SHOWN_VALUES = 12
_EMPTY_VALUE = r"(?:nan|NaN|None|NaT|<NA>|\[\]|\{\}|set\(\)|''|\"\"|Series\(\[\],.*\)|Index\(\[\],.*\))"
_NAN_SCALAR_RE = re.compile(r"(?:np\.float(?:16|32|64)?\()?nan\)?")
_EMPTY_LINE_RE = re.compile(rf"^\s*(?:[^:=]{{0,80}}[:=]\s*)?{_EMPTY_VALUE}\s*$")
_EMPTY_FRAME_RE = re.compile(r"^Empty DataFrame$|^Series\(\[\], |^Index\(\[\], ", re.MULTILINE)
_NUMERIC = ("int", "float", "uint", "complex")


@dataclass(frozen=True)
class Comparison:
    """A column of a DataFrame compared with literal values in a step's code."""

    frame: str
    """The DataFrame's name."""
    column: str
    """The column."""
    values: tuple[Any, ...]
    """The literal values it is compared with."""
    text: str
    """The comparison as written (for the note)."""


_TEXT_DTYPES = frozenset({"object", "str", "string", "category"})


def text_columns(info: VariableInfo) -> list[str]:
    """The columns of a DataFrame's summary (its dtypes) that hold text."""
    if not info.type.endswith("DataFrame"):
        return []
    return [name for name, dtype in (info.dtypes or {}).items()
            if name and (dtype in _TEXT_DTYPES or dtype.startswith("string"))]


def syntax_nodes(code: str) -> list[ast.AST] | None:
    """Every node of ``code``'s syntax tree, the module first (``ast.walk``'s order); None
    when the code does not parse (a syntax error, a null byte): what the checks that read
    code share."""
    try:
        return list(ast.walk(ast.parse(code)))
    except (SyntaxError, ValueError):
        return None


def called_name(func: ast.expr) -> str:
    """The name a call's function goes by: ``read_csv`` for ``pd.read_csv(...)``, ``len``
    for ``len(...)``; "" for anything else (a call of a call, a subscript)."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def comparisons(code: str, frames: Mapping[str, VariableInfo]) -> list[Comparison]:
    """The comparisons of known DataFrame columns with literals in ``code`` (at most four)."""
    nodes = syntax_nodes(code) or []
    frames = _with_copies(nodes, frames)
    found: list[Comparison] = []
    for node in nodes:
        found.extend(_compared(node, code, frames))
    unique = {(c.frame, c.column, c.values): c for c in found}
    return list(unique.values())[:_MAX_COMPARISONS]


def _with_copies(nodes: list[ast.AST], frames: Mapping[str, VariableInfo]) -> Mapping[str, VariableInfo]:
    """``frames`` and the names the code binds to one of them or to something made from one
    (``df_work = df``, ``europe = df[df.origin == 'europe']``, ``s = df.sort_values('mpg')``),
    in the order it binds them: a filter on a copy of a table is a filter on the table (the
    conversation benchmark's mpg: the data guard undid ``df = df[...]``, and the model
    filtered ``df_work = df`` the same way in every later question)."""
    known = dict(frames)
    assigns = sorted((node for node in nodes if isinstance(node, ast.Assign)),
                     key=lambda node: (node.lineno, node.col_offset))
    for node in assigns:
        root = node.value
        while isinstance(root, (ast.Subscript, ast.Attribute, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name) and root.id in known:
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id not in frames:
                    known[target.id] = known[root.id]
    return known


def _compared(node: ast.AST, code: str, frames: Mapping[str, VariableInfo]) -> list[Comparison]:
    if _equality(node):
        assert isinstance(node, ast.Compare)
        left, right = node.left, node.comparators[0]
        for column_side, literal in ((left, right), (right, left)):
            target = _column(column_side, frames)
            if target is not None and isinstance(literal, ast.Constant):
                return [Comparison(*target, (literal.value,), _segment(code, node))]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        listed = node.args and isinstance(node.args[0], (ast.List, ast.Tuple, ast.Set))
        if node.func.attr == "isin" and listed:
            target = _column(node.func.value, frames)
            values = tuple(e.value for e in node.args[0].elts  # type: ignore[attr-defined]
                           if isinstance(e, ast.Constant))
            if target is not None and values:
                return [Comparison(*target, values, _segment(code, node))]
        if node.func.attr == "query" and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            if name in frames and isinstance(node.args[0].value, str):
                return _in_query(name, node.args[0].value, frames)
    return []


def _equality(node: ast.AST) -> bool:
    """``a == b`` or ``a != b`` (one comparison)."""
    return (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Eq, ast.NotEq)))


def _column(node: ast.AST, frames: Mapping[str, VariableInfo]) -> tuple[str, str] | None:
    """``(frame, column)`` for ``df['col']``, ``df.col`` or ``df.loc[:, 'col']`` of a known frame."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return _known(node.value.id, key.value, frames)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return _known(node.value.id, node.attr, frames)
    return None


def _known(frame: str, column: str, frames: Mapping[str, VariableInfo]) -> tuple[str, str] | None:
    """``(table, column)``: a copy's comparison is named by the table it copies."""
    info = frames.get(frame)
    return (info.name or frame, column) if info is not None and column in (info.columns or []) else None


def _in_query(frame: str, expression: str, frames: Mapping[str, VariableInfo]) -> list[Comparison]:
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if not _equality(node):
            continue
        assert isinstance(node, ast.Compare)
        sides = (node.left, node.comparators[0])
        for name, literal in (sides, sides[::-1]):
            if (isinstance(name, ast.Name) and isinstance(literal, ast.Constant)
                    and _known(frame, name.id, frames) is not None):
                found.append(Comparison(frame, name.id, (literal.value,), expression))
    return found


def _segment(code: str, node: ast.AST) -> str:
    text = ast.get_source_segment(code, node) or ""
    return " ".join(text.split())[:120]


# -- judging ------------------------------------------------------------------------------------------


def never_matches_by_type(comparison: Comparison, dtype: str) -> bool | None:
    """True when no value of a column of ``dtype`` can equal the literals; None when the
    dtype cannot tell (text against text, an ``object`` column)."""
    numeric = dtype.startswith(_NUMERIC)
    texty = dtype in ("str", "string") or dtype.startswith("string")
    literals = comparison.values
    if all(isinstance(v, bool) for v in literals):
        return True if numeric is False and texty else None
    if all(isinstance(v, str) for v in literals):
        return True if numeric else None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in literals):
        return True if texty else None
    return None


async def comparison_notes(code: str, variables: Mapping[str, VariableInfo],
                           lookup: ValueLookup | None) -> list[str]:
    """One line for each comparison in ``code`` against a value its column never holds."""
    frames = {name: info for name, info in variables.items() if info.columns}
    notes = []
    for comparison in comparisons(code, frames):
        dtype = (frames[comparison.frame].dtypes or {}).get(comparison.column, "")
        by_type = never_matches_by_type(comparison, dtype)
        facts = await lookup(comparison.frame, comparison.column, comparison.values) if lookup else None
        column = repr(comparison.column)
        if facts is not None and not facts.matched and facts.values:
            notes.append(message("check_values", comparison=comparison.text, column=column,
                                 values=_values(facts), dtype=facts.dtype))
        elif by_type and facts is None:
            notes.append(message("check_type", comparison=comparison.text, column=column, dtype=dtype))
    return notes


_WORD_RE = re.compile(r"[^\W\d_]{3,}")
_GROUP_REFERENCE = re.compile(r"\b(?:of|among|for|in|from|with) (?:them|those|these|that group|this group)\b|"
                              r"^\s*(?:and\s+)?(?:they|their|those|these|them)\b|\bthe same\b|\bremaining\b",
                              re.IGNORECASE)
"""Words by which a question goes on with the previous one's rows ("Of those, ...")."""


_BACK_REFERENCE = re.compile(r"\b(?:that|this|those|these|the same)\s+([a-z]{3,})", re.IGNORECASE)
"""A question's words that point back at something named before: "that borough"."""


def _refers_back(question: str, column: str) -> bool:
    """The question points back at the compared column's value ("Which 2 dropoff zones are
    reached most often from that borough?" with ``df['pickup_borough'] == 'Manhattan'``, the
    previous answer): the filter is asked for, though the value is not named again."""
    parts = set(column_words(column))
    return any(match.group(1).lower() in parts or match.group(1).lower().rstrip("s") in parts
               for match in _BACK_REFERENCE.finditer(question))


def column_words(column: str) -> list[str]:
    """The words of a column's name, 3 letters or more (``pickup_borough``: pickup, borough)."""
    return [word for word in re.split(r"[^a-z]+", column.lower()) if len(word) >= 3]


def mentions(text: str, literal: str) -> bool:
    """``text`` has a word that ``literal`` (a text value, 3 letters or more) is or begins, or
    that begins it: ``'Sat'`` in "Saturday", ``'Dinner'`` in "dinners"."""
    value = literal.strip().lower()
    if len(value) < 3:
        return False
    return any(word.startswith(value) or value.startswith(word)
               for word in (w.lower() for w in _WORD_RE.findall(text)))


def carried_filters(code: str, variables: Mapping[str, VariableInfo], question: str,
                    earlier: Sequence[str]) -> list[Comparison]:
    """The filters of ``code`` on a text value an earlier question named and this one does
    not (tips: "Of the Saturday dinners, what percent ...?" then "What was the bill of the
    customer who tipped the highest percent?", computed on ``df[df['day'] == 'Sat']`` again);
    none when the question goes on with the previous rows ("Of those, ...")."""
    if _GROUP_REFERENCE.search(question):
        return []
    frames = {name: info for name, info in variables.items() if info.columns}
    found = []
    for comparison in comparisons(code, frames):
        if _refers_back(question, comparison.column):
            continue
        texts = [v for v in comparison.values if isinstance(v, str)]
        carried = [v for v in texts if not mentions(question, v) and any(mentions(q, v) for q in earlier)]
        if carried and len(carried) == len(texts):
            found.append(comparison)
    return found


def carried_filter_notes(code: str, variables: Mapping[str, VariableInfo], question: str,
                         earlier: Sequence[str]) -> list[str]:
    """One line for each of :func:`carried_filters`, after the step."""
    return [message("check_carried", comparison=c.text, frame=c.frame)
            for c in carried_filters(code, variables, question, earlier)]


def _values(facts: ColumnValues) -> str:
    shown = ", ".join(repr(v) for v in facts.values[:_MAX_SHOWN_VALUES])
    more = facts.distinct - min(len(facts.values), _MAX_SHOWN_VALUES)
    return shown + (f" and {more:,} more" if more > 0 else "")


def result_notes(ex: Execution) -> list[str]:
    """Lines on an empty selection or a NaN/empty result (nothing for a failed step)."""
    if ex.status != "ok":
        return []
    notes = []
    made = [*ex.variables.created, *ex.variables.changed]
    for info in made:
        if info.shape and info.shape[0] == 0 and info.type.endswith(("DataFrame", "Series")):
            notes.append(message("check_empty_selection", name=info.name, type=info.type.rsplit(".", 1)[-1]))
    # a NaN number the step made but did not print: a verdict from it is wrong too (p < 0.05 is
    # False for NaN: DABench hard 109 printed "no significant" from a t-test on a column with gaps)
    nan = [f"`{info.name}`" for info in made if is_nan_number(info)]
    if nan:
        verb = "is" if len(nan) == 1 else "are"
        notes.append(message("check_nan_variables", names=", ".join(nan), verb=verb))
    last = last_output_line(ex)
    if last is not None and (_EMPTY_LINE_RE.match(last) or _EMPTY_FRAME_RE.search(ex.text)):
        notes.append(message("check_empty_result", line=repr(last[:80])))
    return notes


def is_nan_number(info: VariableInfo) -> bool:
    """The variable is a float that is NaN."""
    return (info.type.endswith(("float", "float64", "float32"))
            and bool(_NAN_SCALAR_RE.fullmatch(info.summary.strip())))


def nan_numbers(executions: Sequence[Execution]) -> list[str]:
    """The names of the NaN numbers ``executions`` (in order) left: made NaN by one of them and
    not made again since."""
    nan: dict[str, bool] = {}
    for ex in executions:
        if ex.status != "ok":
            continue
        for info in (*ex.variables.created, *ex.variables.changed):
            nan[info.name] = is_nan_number(info)
        for name in ex.variables.deleted:
            nan.pop(name, None)
    return [name for name, is_nan in nan.items() if is_nan]


def last_output_line(ex: Execution) -> str | None:
    """The last non-empty line of the step's text output (None without any)."""
    lines = [line for line in ex.text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


def empty_answer(text: str) -> str | None:
    """The empty value an answer amounts to (``nan``, ``None``, ``[]`` ..., alone or in
    every ``@name[value]``), or None when it says something."""
    stripped = text.strip().strip("*_`").strip()
    values = re.findall(r"@\w+\[(.*?)\]", stripped)
    if values:
        empty = [v for v in values if re.fullmatch(_EMPTY_VALUE, v.strip()) or not v.strip()]
        return empty[0] or "an empty value" if empty and len(empty) == len(values) else None
    if not stripped:
        return None
    return stripped if re.fullmatch(_EMPTY_VALUE + r"\.?", stripped) else None


__all__ = ["Comparison", "ValueLookup", "carried_filter_notes", "carried_filters", "column_words",
           "comparison_notes", "comparisons", "empty_answer", "is_nan_number", "last_output_line", "mentions",
           "nan_numbers", "never_matches_by_type", "result_notes", "syntax_nodes", "text_columns"]
