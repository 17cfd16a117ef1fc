"""After a step: a conversion that silently makes NaN of most of a column.

``pd.to_numeric(df[col], errors='coerce')`` turns every value that is not a plain number
into NaN without a word. On a column of counts written with their ranges
(``'630308[495000-801000]'``: DABench's ``estimated_numbers.csv``, six questions) that is
nearly every value: the 1.5B model converted, dropped the NaN rows and answered with the
mean of the few plain values left (``@mean_cases[2200]`` for 2,081,990). No error is raised,
so no hint comes; the result is grounded and wrong.

When the values lost all begin with a number (``'630308[495000-801000]'``, ``'45%'``,
``'12 kg'``), the conversion is mended before the step runs (:func:`mended_coercion`): it
converts the number each value begins with, the way the check's line says, and the model
is told. The 1.5B model, told the line, dropped the NaN rows and answered 2,200 again (easy
55, twice).

The check reads the column's first rows from the uploaded file itself, on this host, with
the loader's own reading options (:meth:`~kernel_analyst.eda.LoadPlan.read_csv_kwargs`), and
says how many of its values the conversion loses, with one of them. Nothing runs in the
kernel, and a file that cannot be read this way (not a delimited file, gone, another
column name) is simply not checked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from ..briefing.uploads import UploadedTable
from ..prompting import message
from .checks import called_name, syntax_nodes

ROWS = 5000
"""Rows of the file read to judge a conversion, at most."""
LOST_SHARE = 0.2
"""A conversion that makes NaN of this share of a column's values (or more) is told."""
LEADING_SHARE = 0.9
"""A conversion is mended when this share of the values it loses (or more) begin with a
number (the rest, ``'N/A'`` or a word, stay NaN, as they would have)."""


def coerced_columns(code: str) -> list[str]:
    """The columns ``code`` converts with ``pd.to_numeric(frame[col], errors='coerce')``."""
    found = []
    for node in syntax_nodes(code) or []:
        if not (isinstance(node, ast.Call) and node.args and called_name(node.func) == "to_numeric"):
            continue
        coerce = any(k.arg == "errors" and isinstance(k.value, ast.Constant) and k.value.value == "coerce"
                     for k in node.keywords)
        column = _column(node.args[0])
        if coerce and column is not None:
            found.append(column)
    return list(dict.fromkeys(found))


def _column(node: ast.expr) -> str | None:
    """``col`` of ``frame['col']`` or ``frame['col'].astype(str)`` / ``.str.strip()`` ..."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
        while isinstance(node, ast.Attribute):
            node = node.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def coerced_notes(code: str, tables: Mapping[str, UploadedTable]) -> list[str]:
    """One line for each column ``code`` coerces to numbers whose values (in the uploaded
    file's first :data:`ROWS` rows) are mostly not plain numbers."""
    notes = []
    for column in coerced_columns(code):
        for table in tables.values():
            lost = _lost(table, column)
            if lost is not None:
                count, total, example = lost
                notes.append(message("check_coerced", column=repr(column), count=f"{count:,}",
                                     total=f"{total:,}", example=repr(example)))
                break
    return notes


_EXTRACT = ".astype(str).str.extract(r'(-?\\d+(?:\\.\\d+)?)')[0]"
"""What takes the number a value begins with out of its text (as ``check_coerced`` says)."""
_LEADING = re.compile(r"^\s*[^\d\s,.-]{0,3}\s*-?\d+(?:\.\d+)?(?![\d,]|[-/:]\d)")
"""A value that begins with a plain number (a currency sign or two before it at most), not
one written with thousands separators (``1,234``: its first number would be 1), nor a date,
a time or a range (``2020-01-05``, ``12:30``, ``10-20``)."""


def mended_coercion(code: str, tables: Mapping[str, UploadedTable]) -> tuple[str, list[str]] | None:
    """``code`` with each ``pd.to_numeric(frame['col'], errors='coerce')`` that would lose
    values which nearly all begin with a number converting that number instead
    (``frame['col'].astype(str).str.extract(...)[0]``), and a line for each (None when
    nothing is mended)."""
    nodes = syntax_nodes(code)
    if nodes is None:
        return None
    lines = [line.encode() for line in code.split("\n")]  # ast's offsets count UTF-8 bytes
    edits: list[tuple[int, int, bytes]] = []
    said = []
    for node in nodes:
        if not (isinstance(node, ast.Call) and node.args and called_name(node.func) == "to_numeric"):
            continue
        arg = node.args[0]
        coerce = any(k.arg == "errors" and isinstance(k.value, ast.Constant) and k.value.value == "coerce"
                     for k in node.keywords)
        if not coerce or not isinstance(arg, ast.Subscript) or _column(arg) is None \
                or arg.end_lineno is None or arg.end_col_offset is None or arg.end_lineno != arg.lineno:
            continue
        column = _column(arg)
        assert column is not None
        found = (_lost(table, column, leading=True) for table in tables.values())
        lost = next((one for one in found if one is not None), None)
        if lost is None:
            continue
        edits.append((arg.end_lineno - 1, arg.end_col_offset, _EXTRACT.encode()))
        said.append(message("coercion_mended", column=repr(column), count=f"{lost[0]:,}",
                            total=f"{lost[1]:,}", example=repr(lost[2])))
    for line, at, text in sorted(edits, reverse=True):
        lines[line] = lines[line][:at] + text + lines[line][at:]
    mended = "\n".join(line.decode() for line in lines)
    return (mended, said) if edits and syntax_nodes(mended) is not None else None


def _lost(table: UploadedTable, column: str, *, leading: bool = False) -> tuple[int, int, str] | None:
    """(values lost, values present, one lost value) when the conversion loses enough
    (``leading``: and nearly every value lost begins with a number)."""
    kwargs = getattr(table.plan, "read_csv_kwargs", None)
    if table.source is None or kwargs is None or getattr(table.plan, "compression", None):
        return None
    import pandas as pd  # only when a step converts: the agent does not import pandas otherwise

    try:
        options = {**kwargs(), "nrows": ROWS, "usecols": [column]}
        options.pop("dtype", None)
        options.pop("parse_dates", None)
        values = pd.read_csv(table.source, **options)[column].dropna()
    except (ValueError, KeyError, OSError, UnicodeDecodeError, pd.errors.ParserError):
        return None
    if values.empty:
        return None
    numbers = pd.to_numeric(values, errors="coerce")
    lost = values[numbers.isna()]
    if len(lost) < max(1, LOST_SHARE * len(values)):
        return None
    if leading and sum(bool(_LEADING.match(str(value))) for value in lost) < LEADING_SHARE * len(lost):
        return None
    return len(lost), len(values), str(lost.iloc[0])


__all__ = ["LEADING_SHARE", "LOST_SHARE", "ROWS", "coerced_columns", "coerced_notes", "mended_coercion"]
