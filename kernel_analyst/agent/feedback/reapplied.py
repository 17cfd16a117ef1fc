"""A column replaced by a function of itself, again: the transform applied twice.

A kernel keeps its state, and a small model sends a cell again after fixing something
else in it: ``df['importance.score'] = np.log(df['importance.score'])`` ran in one step, and
the next step ran it once more, so the column held the log of the log, NaN for every value
below 1 (DABench hard 39 with the 1.5B model, which then answered from NaN). The same for a
mapping (``df['Gender'] = df['Gender'].map({'Male': 0, 'Female': 1})`` a second time leaves
NaN in every row) and for arithmetic on the column itself. A step that does it again is
told beside its output, with the cell that did it first. Transforms that change nothing the
second time (``astype``, ``fillna``, ``str.strip``, ``clip``) are not counted.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from .checks import called_name, syntax_nodes

_ONCE_ONLY_CALLS = frozenset({"log", "log1p", "log2", "log10", "sqrt", "cbrt", "exp", "expm1", "square",
                              "reciprocal", "map", "replace", "cumsum", "cumprod", "diff", "pct_change",
                              "shift", "rank", "boxcox", "yeojohnson"})
"""Calls whose result changes again when they are applied to their own result."""
_OF_ITSELF = frozenset({"min", "max", "mean", "std", "median", "sum", "var", "quantile"})
"""A column's own statistics: arithmetic with them rescales it (min-max, z-scores), and
rescaling a rescaled column changes nothing."""


@dataclass(frozen=True)
class SelfTransform:
    """``frame[column] = f(frame[column])`` in one cell."""

    frame: str
    column: str
    text: str
    """The assignment as the code writes it (one line)."""


def self_transforms(code: str) -> list[SelfTransform]:
    """The assignments of ``code`` that replace a column by a transform of itself that is not
    the same when applied twice (a call of :data:`_ONCE_ONLY_CALLS` or arithmetic)."""
    found = []
    for node in syntax_nodes(code) or []:
        if not isinstance(node, (ast.Assign, ast.AugAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            column = _column(target)
            if column is None:
                continue
            if isinstance(node, ast.AugAssign) or _transforms(node.value, column):
                text = (ast.get_source_segment(code, node) or "").splitlines()
                found.append(SelfTransform(column[0], column[1], text[0] if text else ""))
    return found


def reapplied(code: str, before: Sequence[tuple[int | None, str]]) -> list[tuple[SelfTransform, int | None]]:
    """The self-transforms of ``code`` an earlier cell (its execution count, its code) did to
    the same column already, with that cell's count (the latest that did)."""
    found = []
    for transform in self_transforms(code):
        column = (transform.frame, transform.column)
        earlier = [count for count, old in before
                   if any((t.frame, t.column) == column for t in self_transforms(old))]
        if earlier:
            found.append((transform, earlier[-1]))
    return found


def _column(node: ast.AST) -> tuple[str, str] | None:
    """``df['col']`` (or ``df.loc[:, 'col']``) as (frame, column)."""
    if not isinstance(node, ast.Subscript):
        return None
    key = node.slice
    base = node.value
    located = isinstance(base, ast.Attribute) and base.attr == "loc"
    if located and isinstance(base, ast.Attribute) and isinstance(key, ast.Tuple) and len(key.elts) == 2:
        base, key = base.value, key.elts[1]
    if isinstance(base, ast.Name) and isinstance(key, ast.Constant) and isinstance(key.value, str):
        return base.id, key.value
    return None


def _transforms(value: ast.AST, column: tuple[str, str]) -> bool:
    """Whether ``value`` is a transform of ``column`` that is not the same applied twice:
    arithmetic on it, or a once-only call on it, wherever in the expression."""
    reads = [n for n in ast.walk(value) if _column(n) == column]
    if not reads or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in _OF_ITSELF for n in ast.walk(value)):
        return False  # (x - x.min()) / (x.max() - x.min()), (x - x.mean()) / x.std(): the same twice
    for node in ast.walk(value):
        if isinstance(node, (ast.BinOp, ast.UnaryOp)) and any(_column(n) == column for n in ast.walk(node)):
            return True
        if isinstance(node, ast.Call) and called_name(node.func) in _ONCE_ONLY_CALLS \
                and any(_column(n) == column for n in ast.walk(node)):
            return True
    return False


__all__ = ["SelfTransform", "reapplied", "self_transforms"]
