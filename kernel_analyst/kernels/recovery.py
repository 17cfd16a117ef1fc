"""What a recovery is asked to do and what it did: :class:`RecoveryPolicy`, :class:`RecoveryReport`.

A conversation's variables can be brought back into a fresh kernel after a loss (a
death, a restart, an idle cull, a host restart): by replaying the recorded cells, or
from a snapshot saved before a planned stop. The policy is a setting of the manager and
its sessions; the report rides on the :class:`~kernel_analyst.kernels.Execution` that
followed the recovery and on the notebook's ``resumed`` marker. How it is done:
``trail/restore.py``.

Value types only: this module imports nothing of the package but the clock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ._clock import utcnow

Mode = Literal["replay", "none"]
"""``replay``: bring lost variables back; ``none``: a lost namespace stays lost."""


@dataclass(frozen=True)
class RecoveryPolicy:
    """Whether and how a session brings its variables back after a loss."""

    mode: Mode = "none"
    """``replay``: rebuild the namespace (from a snapshot when one was taken, else by
    replaying cells); ``none``: a lost namespace stays lost."""
    time_factor: float = 2.0
    """Replay budget: this many times the recorded durations of the cells to replay..."""
    time_margin_s: float = 10.0
    """... plus this margin (seconds)."""
    time_budget_s: float | None = None
    """A fixed replay budget instead (seconds)."""
    snapshot: bool = True
    """Save the namespace before a planned loss (idle cull, orderly close)."""
    snapshot_max_mb: int = 8192
    """Largest snapshot; variables beyond it are replayed instead."""
    snapshot_timeout_s: float = 300.0
    """How long saving or loading a snapshot may take."""

    def __post_init__(self) -> None:
        if self.mode not in ("replay", "none"):
            raise ValueError(f"recovery mode must be 'replay' or 'none'; got {self.mode!r}")

    @classmethod
    def of(cls, value: str | RecoveryPolicy | None) -> RecoveryPolicy:
        """A policy from a mode name, a policy, or None (off)."""
        if isinstance(value, RecoveryPolicy):
            return value
        return cls(mode=value or "none")  # type: ignore[arg-type]

    @property
    def enabled(self) -> bool:
        """True when lost state is brought back."""
        return self.mode == "replay"

    def budget(self, recorded_s: float) -> float:
        """Seconds a replay of cells that took ``recorded_s`` may take."""
        if self.time_budget_s is not None:
            return self.time_budget_s
        return self.time_factor * recorded_s + self.time_margin_s

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


@dataclass(frozen=True)
class ReplayedCell:
    """One cell run again during a recovery."""

    cell_id: str
    """The recorded cell's id."""
    execution_count: int | None
    """Its recorded prompt number."""
    status: str
    """How it ended this time."""
    duration_s: float
    """How long it took this time."""
    differences: tuple[str, ...] = ()
    """How its output differs from the record (empty when it reproduced)."""

    @property
    def restored(self) -> bool:
        """True when it ran ``ok`` (its effects are back)."""
        return self.status == "ok"


@dataclass
class RecoveryReport:
    """What a recovery did, for the audit trail, the caller and the model."""

    reason: str
    """Why the namespace had to be rebuilt (``kernel died``, ``conversation reopened``)."""
    method: str = "replay"
    """``replay``, ``snapshot`` (plus replay of what it could not hold) or ``none``."""
    replayed: list[ReplayedCell] = field(default_factory=list)
    """Cells run again, in order."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Cell id -> why it was not run (marked no-replay, over the budget)."""
    restored_variables: list[str] = field(default_factory=list)
    """Variables loaded from the snapshot."""
    unsaved: dict[str, str] = field(default_factory=dict)
    """Variables the snapshot could not hold -> why (their cells were replayed)."""
    expected_variables: list[str] = field(default_factory=list)
    """Variables that existed before the loss (from the recorded variable changes)."""
    variables: list[str] = field(default_factory=list)
    """Variables that exist now."""
    restored_cells: list[str] = field(default_factory=list)
    """Ids of the cells whose effects are back (from the snapshot or replayed ok)."""
    duration_s: float = 0.0
    """How long the recovery took."""
    budget_s: float | None = None
    """The time the replay was allowed."""
    stopped: str | None = None
    """Why the recovery stopped early (an input changed, the budget ran out), if it did."""
    at: str = field(default_factory=utcnow)
    """When it happened (ISO-8601 UTC)."""

    @property
    def missing_variables(self) -> list[str]:
        """Variables that existed before the loss and do not now."""
        now = set(self.variables)
        return [name for name in self.expected_variables if name not in now]

    @property
    def differing(self) -> list[ReplayedCell]:
        """Replayed cells whose output or status differs from the record."""
        return [c for c in self.replayed if c.differences]

    @property
    def complete(self) -> bool:
        """True when every variable came back and nothing stopped the recovery."""
        return self.stopped is None and not self.missing_variables

    def describe(self) -> str:
        """A few lines for a person or a model."""
        how = {"snapshot": "loaded from a snapshot", "replay": "rebuilt by replaying recorded cells",
               "none": "not rebuilt"}.get(self.method, self.method)
        lines = [f"State was {how} ({self.reason}) in {self.duration_s:.1f} s."]
        if self.restored_variables:
            lines.append(f"Loaded from the snapshot: {', '.join(self.restored_variables)}.")
        if self.replayed:
            ok = sum(c.restored for c in self.replayed)
            lines.append(f"Replayed {len(self.replayed)} cell(s), {ok} ran ok.")
        for cell in self.differing:
            lines.append(f"Cell [{cell.execution_count}] came out differently: {cell.differences[0]}")
        for cell_id, why in self.skipped.items():
            lines.append(f"Not replayed: cell {cell_id} ({why}).")
        if self.stopped:
            lines.append(f"Stopped early: {self.stopped}")
        lines.append(f"Variables now: {', '.join(self.variables) or 'none'}.")
        if self.missing_variables:
            lines.append(f"Lost: {', '.join(self.missing_variables)}.")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the ``resumed`` marker's metadata)."""
        data = asdict(self)
        data.update(missing_variables=self.missing_variables, complete=self.complete)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecoveryReport:
        """Rebuild from :meth:`to_dict` output."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["replayed"] = [ReplayedCell(**{**c, "differences": tuple(c.get("differences", ()))})
                             for c in data.get("replayed", [])]
        return cls(**known)


__all__ = ["Mode", "RecoveryPolicy", "RecoveryReport", "ReplayedCell"]
