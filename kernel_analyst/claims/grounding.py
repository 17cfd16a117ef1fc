"""What grounding an answer gives: each claim, its status and where its number came from."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ClaimStatus(str, enum.Enum):
    """How a number of an answer is supported by the conversation's cells."""

    GROUNDED = "grounded"
    """A cell printed it, showed it as a result, or holds it in a variable (restated:
    rounded, as a percentage, with separators, in scientific notation, a sign in words)."""
    DERIVED = "derived"
    """A difference, sum, ratio or relative change of two grounded numbers of the answer."""
    UNSUPPORTED = "unsupported"
    """No cell produced it."""


@dataclass(frozen=True)
class Source:
    """Where a grounded number came from."""

    cell: int | None
    """The cell's execution count (``[3]`` in the notebook), None when unknown."""
    cell_id: str
    """The nbformat cell id (the anchor ``#cell-id=...``); "" when unknown."""
    cell_index: int | None
    """The cell's position in the notebook (0-based, markdown cells included)."""
    where: str
    """``output`` (printed text or a shown result), ``variable`` or ``code``."""
    part: str
    """Which output (``stdout``, ``output 1`` for the first result or display), or the
    variable's name; ``code`` for the cell's source."""
    value: str
    """The number exactly as the source shows it (``0.3838383838383838``)."""
    position: int = 0
    """Its place among the numbers of that part (0-based): how ``verify`` finds it again."""
    label: str = ""
    """The row or name the value stands beside (``mean``, ``pvalue``), if any."""
    form: str = ""
    """How the answer restates it: ``exact``, ``rounded``, ``as a percentage``, ``as a
    ratio``, ``sign in words``, ``approximately``, ``a bound``."""

    def describe(self) -> str:
        """``cell [3] stdout: 0.3838383838383838`` (one line)."""
        where = f"cell [{self.cell}]" if self.cell is not None else "a cell"
        part = f"variable {self.part}" if self.where == "variable" else self.part
        return f"{where} {part}: {self.value}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {
            "cell": self.cell,
            "cell_id": self.cell_id,
            "cell_index": self.cell_index,
            "where": self.where,
            "part": self.part,
            "value": self.value,
            "position": self.position,
            "label": self.label,
            "form": self.form,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Source:
        """Rebuild from :meth:`to_dict` output."""
        cell, index = data.get("cell"), data.get("cell_index")
        return cls(
            int(cell) if cell is not None else None,
            str(data.get("cell_id", "")),
            int(index) if index is not None else None,
            str(data["where"]),
            str(data["part"]),
            str(data["value"]),
            int(data.get("position", 0)),
            str(data.get("label", "")),
            str(data.get("form", "")),
        )


@dataclass(frozen=True)
class Derivation:
    """How a derived number follows from two grounded numbers of the same answer."""

    op: str
    """``difference``, ``sum``, ``ratio`` or ``change`` (relative change)."""
    operands: tuple[int, int]
    """The two grounded claims, as indices into :attr:`Grounding.claims`."""
    expression: str
    """The arithmetic as a reader checks it: ``74.2% − 18.9%``."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"op": self.op, "operands": list(self.operands), "expression": self.expression}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Derivation:
        """Rebuild from :meth:`to_dict` output."""
        first, second = data["operands"]
        return cls(str(data["op"]), (int(first), int(second)), str(data.get("expression", "")))


@dataclass(frozen=True)
class Claim:
    """One number of an answer and what supports it."""

    text: str
    """The number as the answer writes it (``41.2%``, ``$32.20``, ``1.2 million``)."""
    value: float
    """Its value as written (``41.2`` for ``41.2%``; a date's year)."""
    start: int
    """Where it starts in the answer's text."""
    end: int
    """Where it ends."""
    status: ClaimStatus
    """grounded, derived or unsupported."""
    kind: str = "number"
    """``number``, ``percent``, ``year`` or ``date``."""
    source: Source | None = None
    """Where a grounded number came from."""
    derivation: Derivation | None = None
    """How a derived number follows from two grounded ones."""

    def describe(self) -> str:
        """One line: the number, its status, and its source or derivation."""
        if self.source is not None:
            return f"{self.text}: {self.status.value} ({self.source.describe()}, {self.source.form})"
        if self.derivation is not None:
            return f"{self.text}: derived ({self.derivation.op}: {self.derivation.expression})"
        return f"{self.text}: {self.status.value}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {
            "text": self.text,
            "value": self.value,
            "start": self.start,
            "end": self.end,
            "status": self.status.value,
            "kind": self.kind,
            "source": self.source.to_dict() if self.source else None,
            "derivation": self.derivation.to_dict() if self.derivation else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Claim:
        """Rebuild from :meth:`to_dict` output."""
        source, derivation = data.get("source"), data.get("derivation")
        return cls(
            str(data["text"]),
            float(data["value"]),
            int(data["start"]),
            int(data["end"]),
            ClaimStatus(data["status"]),
            str(data.get("kind", "number")),
            Source.from_dict(source) if source else None,
            Derivation.from_dict(derivation) if derivation else None,
        )


@dataclass(frozen=True)
class Ignored:
    """A number of the answer that is not a claim."""

    text: str
    """The number as written."""
    start: int
    """Where it starts in the answer."""
    reason: str
    """``question`` (it restates the question), ``file name``, or ``small`` (a whole
    number from 0 to 10 with no unit, percent or sign: these appear in every output)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"text": self.text, "start": self.start, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ignored:
        """Rebuild from :meth:`to_dict` output."""
        return cls(str(data["text"]), int(data["start"]), str(data["reason"]))


@dataclass
class Grounding:
    """Every number of one answer, matched against the conversation's cells."""

    text: str = ""
    """The answer that was grounded."""
    claims: list[Claim] = field(default_factory=list)
    """Its numbers in order of appearance."""
    ignored: list[Ignored] = field(default_factory=list)
    """Numbers that are not claims (they restate the question, name a file, or are small)."""
    variables_read: bool = False
    """True when the kernel's variables were read (one request) to find some numbers."""

    @property
    def unsupported(self) -> list[Claim]:
        """The claims no cell produced."""
        return [c for c in self.claims if c.status is ClaimStatus.UNSUPPORTED]

    @property
    def all_grounded(self) -> bool:
        """True when every number is grounded or derived (also when there is none)."""
        return not self.unsupported

    def cells(self) -> list[int]:
        """The execution counts of the cells the grounded numbers came from, in order."""
        return sorted({c.source.cell for c in self.claims if c.source and c.source.cell is not None})

    def summary(self) -> str:
        """One line: ``5 numbers: 4 from cells 3, 5, 7; 1 unsupported: 41.2%``."""
        if not self.claims:
            return "no numbers to check"
        total = len(self.claims)
        grounded = [c for c in self.claims if c.status is ClaimStatus.GROUNDED]
        derived = sum(c.status is ClaimStatus.DERIVED for c in self.claims)
        parts = []
        if grounded:
            cells = self.cells()
            named = f"cell{'s' if len(cells) > 1 else ''} {', '.join(map(str, cells))}" if cells else ""
            if len(cells) < len({c.source.cell for c in grounded if c.source}):
                named = f"{named} and variables" if named else "variables"
            parts.append(f"{len(grounded)} from {named}")
        if derived:
            parts.append(f"{derived} derived from them")
        if self.unsupported:
            shown = [c.text for c in self.unsupported[:5]]
            more = ", ..." if len(self.unsupported) > 5 else ""
            parts.append(f"{len(self.unsupported)} unsupported: {', '.join(shown)}{more}")
        return f"{total} number{'s' if total > 1 else ''}: {'; '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (with the :meth:`summary` line, ignored when read back)."""
        return {
            "summary": self.summary(),
            "text": self.text,
            "claims": [c.to_dict() for c in self.claims],
            "ignored": [i.to_dict() for i in self.ignored],
            "variables_read": self.variables_read,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Grounding:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            str(data.get("text", "")),
            [Claim.from_dict(c) for c in data.get("claims", [])],
            [Ignored.from_dict(i) for i in data.get("ignored", [])],
            bool(data.get("variables_read")),
        )


__all__ = ["Claim", "ClaimStatus", "Derivation", "Grounding", "Ignored", "Source"]
