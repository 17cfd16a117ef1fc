"""The numbers a conversation's cells produced, indexed once per answer.

A code cell gives these parts, each with its numbers in order (their place is how
``verify`` finds a number again after a re-run):

- ``stdout``: everything the cell printed (stderr is left out: warnings are not results);
- ``output N``: its N-th result or display (1-based), read from ``text/plain``, or from
  ``text/html`` / ``text/markdown`` when the plain text is only an object's repr;
- each variable it created or changed, as recorded in the cell's metadata (the summary of
  a scalar, the shape of a table);
- ``code``: its source, for numbers the analysis chose (a threshold, a year to filter on),
  which only match when the answer writes them exactly; not for a loader's cell (role
  ``profile``), whose code is the profile function's, numbers nobody chose for the data.

A table's row numbers are not results: a run of line-leading integers counting up from 0
or 1 (or any run of three or more that are not years) is a RangeIndex and is left out, so
``df.head(20)`` does not ground every number up to 19.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._scan import Found, source_numbers, visible_text

_NUMPY_REPR = re.compile(r"^(?:np|numpy)\.\w+\((.*)\)$", re.DOTALL)
_NAME_BEFORE = re.compile(r"([A-Za-z_][\w.\-]*(?: [A-Za-z_][\w.\-]*)?)\s*[=:]\s*(?:(?:np|numpy)\.\w+\()?\s*$")
_REPR_ONLY = re.compile(r"^<[^\n]*>$")
_WORD = re.compile(r"[a-z]{3,}")


@dataclass(frozen=True)
class CellRef:
    """Which notebook cell a part belongs to."""

    index: int | None
    """Position in the notebook (0-based), None when unknown."""
    id: str
    """The nbformat cell id ("" when unknown)."""
    count: int | None
    """The execution count."""
    role: str = ""
    """The cell's role in the agent's notebook (``profile`` for a table loaded before a
    question; "" for the cells the conversation ran)."""


@dataclass
class Part:
    """One output, variable or source of a cell, with its numbers."""

    cell: CellRef
    """The cell it belongs to."""
    where: str
    """``output``, ``variable`` or ``code``."""
    name: str
    """``stdout``, ``output N``, the variable's name, or ``code``."""
    text: str
    """Its text (HTML reduced to its visible text)."""
    numbers: list[Found] = field(default_factory=list)
    """Its numbers and dates, in order (row numbers left out)."""
    code: str = ""
    """The source of its cell (its words help choose between equal numbers)."""
    _words: set[str] | None = field(default=None, repr=False, compare=False)

    def words(self) -> set[str]:
        """The words of its cell's code, cut to five letters (``survi`` for ``survived``)."""
        if self._words is None:
            self._words = {w[:5] for w in _WORD.findall(self.code.lower())}
        return self._words

    def label(self, number: Found) -> str:
        """The name or row a number stands beside: ``pvalue`` in ``pvalue=0.03``, ``mean``
        in a ``describe()`` row; "" when there is none."""
        line_start = self.text.rfind("\n", 0, number.start) + 1
        before = self.text[line_start : number.start]
        named = _NAME_BEFORE.search(before)
        if named:
            return named.group(1).strip()[-40:]
        first = before.split(None, 1)
        return first[0][:40] if first and any(c.isalpha() for c in first[0]) else ""


def _join(value: Any) -> str:
    return "".join(str(v) for v in value) if isinstance(value, list) else str(value or "")


def _rich_text(data: dict[str, Any]) -> str:
    plain = _join(data.get("text/plain", "")).strip()
    if plain and not _REPR_ONLY.match(plain):
        return plain
    if "text/html" in data:
        return visible_text(_join(data["text/html"]))
    for mime in ("text/markdown", "text/latex"):
        if mime in data:
            return _join(data[mime])
    return ""


def _variable_text(info: dict[str, Any]) -> str:
    summary = str(info.get("summary", "") or "")
    inner = _NUMPY_REPR.match(summary)
    text = inner.group(1) if inner else summary
    shape = info.get("shape")
    if isinstance(shape, list) and shape:
        text = f"{text} shape=({', '.join(str(n) for n in shape)})".strip()
    return text


def _meta(cell: dict[str, Any]) -> dict[str, Any]:
    meta = cell.get("metadata", {})
    found = meta.get("kernel_analyst", {}) if isinstance(meta, dict) else {}
    return found if isinstance(found, dict) else {}


def variable_infos(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """The variables a code cell created or changed, as recorded in its metadata."""
    changes = _meta(cell).get("variables", {})
    if not isinstance(changes, dict):
        return []
    return [v for key in ("created", "changed") for v in changes.get(key, []) if isinstance(v, dict)]


def cell_parts(cell: dict[str, Any], ref: CellRef) -> list[Part]:
    """The parts of one code cell (see the module docstring), numbers found."""
    outputs = [o for o in cell.get("outputs", []) if isinstance(o, dict)]
    code = _join(cell.get("source", ""))
    parts = []
    stdout = "".join(
        _join(o.get("text", ""))
        for o in outputs
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )
    if stdout:
        parts.append(_part(ref, "output", "stdout", stdout))
    rich = [o for o in outputs if o.get("output_type") in ("execute_result", "display_data")]
    for number, out in enumerate(rich, start=1):
        data = out.get("data", {})
        text = _rich_text(data) if isinstance(data, dict) else ""
        if text:
            parts.append(_part(ref, "output", f"output {number}", text))
    for info in variable_infos(cell):
        parts.append(_part(ref, "variable", str(info.get("name", "")), _variable_text(info)))
    if ref.role != "profile":  # a loader's cell: its code is the profile's own, not the person's numbers
        parts.append(_part(ref, "code", "code", code))
    for part in parts:
        part.code = code
    return [p for p in parts if p.numbers]


def _part(ref: CellRef, where: str, name: str, text: str) -> Part:
    numbers = source_numbers(text)
    if where == "output" and numbers:
        numbers = _without_row_numbers(text, numbers)
    return Part(ref, where, name, text, numbers)


def _is_row_head(text: str, number: Found) -> bool:
    if not number.integer or number.signed or number.percent or number.date is not None:
        return False
    line_start = text.rfind("\n", 0, number.start) + 1
    line_end = text.find("\n", number.end)
    rest = text[number.end : line_end if line_end >= 0 else len(text)]
    return not text[line_start : number.start].strip() and bool(rest.strip())


def _without_row_numbers(text: str, numbers: list[Found]) -> list[Found]:
    heads = [i for i, n in enumerate(numbers) if _is_row_head(text, n)]
    if len(heads) < 2:
        return numbers
    drop: set[int] = set()
    run: list[int] = []
    for i in [*heads, -1]:
        if i >= 0 and run and numbers[i].value == numbers[run[-1]].value + 1:
            run.append(i)
            continue
        values = [numbers[j].value for j in run]
        if (len(run) >= 2 and values[0] in (0, 1)) or (
            len(run) >= 3 and not all(1800 <= v <= 2100 for v in values)
        ):
            drop.update(run)
        run = [i] if i >= 0 else []
    return [n for i, n in enumerate(numbers) if i not in drop] if drop else numbers


def _ref(cell: dict[str, Any], index: int) -> CellRef:
    count = cell.get("execution_count")
    role = _meta(cell).get("role")
    return CellRef(index, str(cell.get("id", "") or ""), count if isinstance(count, int) else None,
                   role if isinstance(role, str) else "")


@dataclass(frozen=True)
class Hit:
    """A number of a part (what a lookup yields)."""

    part: Part
    """The output, variable or source it is in."""
    position: int
    """Its place among the part's numbers."""
    number: Found
    """The number."""


class SourceIndex:
    """Every number of a conversation's code cells, sorted by magnitude for range lookups."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self._entries: list[tuple[float, int, int]] = []
        self._keys: list[float] | None = None
        self._years: dict[int, list[tuple[int, int]]] = {}

    @classmethod
    def from_cells(cls, cells: Sequence[dict[str, Any]]) -> SourceIndex:
        """The index of a notebook's code cells (nbformat dicts, as in the audit trail); cells
        marked ``undone`` (an undo, a rolled-back streak, an abandoned branch) are left out: the
        conversation's state does not come from them, and ``verify`` does not re-run them."""
        index = cls()
        for position, cell in enumerate(cells):
            if isinstance(cell, dict) and cell.get("cell_type") == "code" and not _meta(cell).get("undone"):
                for part in cell_parts(cell, _ref(cell, position)):
                    index.add(part)
        return index

    def add(self, part: Part) -> None:
        """Index one more part."""
        p = len(self.parts)
        self.parts.append(part)
        for k, number in enumerate(part.numbers):
            if number.date is not None:
                self._years.setdefault(number.date[0], []).append((p, k))
            else:
                self._entries.append((abs(number.value), p, k))
        self._keys = None

    def add_variables(self, infos: Sequence[dict[str, Any]], cells: Sequence[dict[str, Any]]) -> int:
        """Index the variables of one namespace read (``VariableInfo.to_dict()`` each), each
        under the last cell that recorded it; skip those already indexed as they are.
        Returns how many were added."""
        known = {(p.name, p.text) for p in self.parts if p.where == "variable"}
        made_by: dict[str, CellRef] = {}
        for position, cell in enumerate(cells):
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                for info in variable_infos(cell):
                    made_by[str(info.get("name", ""))] = _ref(cell, position)
        added = 0
        for info in infos:
            name, text = str(info.get("name", "")), _variable_text(info)
            if (name, text) in known:
                continue
            part = _part(made_by.get(name, CellRef(None, "", None)), "variable", name, text)
            if part.numbers:
                self.add(part)
                added += 1
        return added

    def between(self, low: float, high: float) -> Iterator[Hit]:
        """Numbers whose magnitude is within [low, high]."""
        if self._keys is None:
            self._entries.sort()
            self._keys = [e[0] for e in self._entries]
        start = bisect.bisect_left(self._keys, low)
        for magnitude, p, k in self._entries[start:]:
            if magnitude > high:
                break
            yield Hit(self.parts[p], k, self.parts[p].numbers[k])

    def dates_in(self, year: int) -> Iterator[Hit]:
        """Dates of the given year."""
        for p, k in self._years.get(year, []):
            yield Hit(self.parts[p], k, self.parts[p].numbers[k])

    def __len__(self) -> int:
        return len(self._entries) + sum(len(v) for v in self._years.values())


__all__ = ["CellRef", "Hit", "Part", "SourceIndex", "cell_parts", "variable_infos"]
