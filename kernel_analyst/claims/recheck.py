"""Re-checking a recorded answer against re-run cells (what ``verify`` does with answers).

Each grounded claim is looked up again where it was found: the same cell (by position in
the notebook), the same part (``stdout``, ``output N``, a variable), and there the number
with the same label nearest to its old place (the ``mean`` row of a ``describe()``), or
the number at the same place when it had no label. The claim still holds when that number
matches it by the same rules as before (``38.4%`` holds for ``0.38384``); otherwise it
*moved*: the answer no longer reproduces, and the old and new values are reported. A
derived claim moves with either of its operands. A number found in code always holds;
one found only in a variable read without a recorded cell cannot be checked and is
counted as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._scan import Found
from .grounding import Claim, ClaimStatus, Grounding, Source
from .match import Mention, date_fits_number, factors, fits, read_mentions
from .sources import CellRef, Part, cell_parts


@dataclass(frozen=True)
class MovedClaim:
    """A number of an answer that the re-run no longer gives."""

    text: str
    """The number as the answer writes it."""
    old: str
    """The value its source showed when the answer was given (or the derivation)."""
    new: str | None
    """What the re-run shows in the same place; None when nothing is there any more."""
    cell: int | None = None
    """The execution count of the source cell."""
    part: str = ""
    """Which output or variable of that cell."""

    def describe(self) -> str:
        """One line: ``38.4% (cell [3] stdout): was 0.3838383838383838, now 0.4012``."""
        where = f"cell [{self.cell}] {self.part}".strip() if self.cell is not None or self.part else "derived"
        now = f"now {self.new}" if self.new is not None else "no longer appears"
        return f"{self.text} ({where}): was {self.old}, {now}"


@dataclass
class AnswerCheck:
    """One recorded answer, re-checked."""

    cell_index: int
    """The answer cell's position in the notebook."""
    claims: int = 0
    """Grounded and derived numbers checked."""
    moved: list[MovedClaim] = field(default_factory=list)
    """The numbers that no longer hold."""
    unchecked: list[str] = field(default_factory=list)
    """Numbers whose source could not be looked up again (no recorded cell)."""

    @property
    def reproduced(self) -> bool:
        """True when every checked number still holds."""
        return not self.moved

    def describe(self) -> str:
        """A short block for the terminal."""
        head = (
            f"answer (cell {self.cell_index}): {len(self.moved)} of {self.claims} numbers moved"
            if self.moved
            else f"answer (cell {self.cell_index}): all {self.claims} numbers hold"
        )
        return "\n".join([head, *(f"  {m.describe()}" for m in self.moved)])

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {
            "cell_index": self.cell_index,
            "claims": self.claims,
            "reproduced": self.reproduced,
            "moved": [vars(m) | {"describe": m.describe()} for m in self.moved],
            "unchecked": list(self.unchecked),
        }


def recheck(
    grounding: Grounding, cells: Mapping[int, dict[str, Any]], *, cell_index: int = -1
) -> AnswerCheck:
    """Re-check ``grounding``'s claims against ``cells`` (notebook position -> the re-run
    code cell as an nbformat dict: its outputs and its variables in metadata)."""
    check = AnswerCheck(cell_index)
    mentions = {(m.found.start, m.found.end): m for m in read_mentions(grounding.text)}
    parts: dict[int, list[Part]] = {}
    moved_claims: set[int] = set()
    for i, claim in enumerate(grounding.claims):
        if claim.status is not ClaimStatus.GROUNDED or claim.source is None:
            continue
        source = claim.source
        if source.where == "code":
            check.claims += 1
            continue
        if source.cell_index is None or source.cell_index not in cells:
            check.unchecked.append(claim.text)
            continue
        check.claims += 1
        if source.cell_index not in parts:
            cell = cells[source.cell_index]
            parts[source.cell_index] = cell_parts(
                cell, CellRef(source.cell_index, source.cell_id, source.cell)
            )
        moved = _moved(claim, source, parts[source.cell_index], mentions.get((claim.start, claim.end)))
        if moved is not None:
            check.moved.append(moved)
            moved_claims.add(i)
    for claim in grounding.claims:
        if claim.status is ClaimStatus.DERIVED and claim.derivation is not None:
            check.claims += 1
            changed = [grounding.claims[j].text for j in claim.derivation.operands if j in moved_claims]
            if changed:
                check.moved.append(
                    MovedClaim(
                        claim.text,
                        claim.derivation.expression,
                        f"{', '.join(changed)} moved",
                        None,
                        "derived",
                    )
                )
    return check


def _moved(claim: Claim, source: Source, parts: list[Part], mention: Mention | None) -> MovedClaim | None:
    part = next((p for p in parts if p.where == source.where and p.name == source.part), None)
    number = _same_place(part, source) if part is not None else None
    if (
        number is not None
        and part is not None
        and (number.text == source.value or (mention is not None and _holds(mention, number, part)))
    ):
        return None
    return MovedClaim(
        claim.text, source.value, number.text if number is not None else None, source.cell, source.part
    )


def _same_place(part: Part, source: Source) -> Found | None:
    if source.label:
        same = [
            (abs(k - source.position), n) for k, n in enumerate(part.numbers) if part.label(n) == source.label
        ]
        if same:
            return min(same, key=lambda pair: pair[0])[1]
    return part.numbers[source.position] if source.position < len(part.numbers) else None


def _holds(mention: Mention, number: Found, part: Part) -> bool:
    if number.date is not None:
        return date_fits_number(mention, number)
    label = part.label(number) if mention.p_value else ""
    return any(fits(mention, number, factor, label=label) is not None for factor in factors(mention))


__all__ = ["AnswerCheck", "MovedClaim", "recheck"]
