"""The summary of findings that opens the report: size, alerts ranked by severity, key numbers.

Written on the host from the ``findings`` dict the cells filled in the kernel; every
number in it is computed by a code cell of the same notebook.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["SEVERITY", "summary_markdown"]

SEVERITY = {3: "high", 2: "check", 1: "note"}
"""Alert severities as words: 3 fix or drop before analysis, 2 check, 1 keep in mind."""
_MAX_ALERTS = 12


class _Plan(Protocol):
    def describe(self) -> str: ...


class _Step(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def title(self) -> str: ...

    @property
    def error(self) -> str | None: ...


def summary_markdown(file: str, findings: dict[str, Any], *, plan: _Plan | None = None,
                     steps: Sequence[_Step] = (), error: str | None = None) -> str:
    """The "Summary of findings" markdown for a finished run."""
    lines = [f"## Summary of findings: `{file}`", ""]
    if error:
        lines += [f"**The playbook stopped:** {error}", ""]
    lines += [f"- {item}" for item in (_size(findings), _missing(findings), _duplicates(findings)) if item]
    lines += _alerts(findings)
    key = [item for item in (_out_of_core(findings), _associations(findings), _target(findings),
                             _dates(findings), _outliers(findings), _kinds(findings), _loading(plan),
                             _failed(steps)) if item]
    if key:
        lines += ["", "**Key numbers**", "", *[f"- {item}" for item in key]]
    return "\n".join(lines).rstrip()


def _size(f: dict[str, Any]) -> str:
    if "shape" not in f:
        return ""
    rows, cols = f["shape"]
    mib = f.get("memory_mib", 0)
    size = f"{mib:,.1f} MiB" if mib >= 1 else f"{max(mib * 1024, 1):,.0f} KiB"
    where = "on disk, profiled out of core" if "out_of_core" in f else "in memory"
    return f"**Size:** {rows:,} rows x {cols:,} columns ({size} {where})."


def _out_of_core(f: dict[str, Any]) -> str:
    """Which numbers are exact, approximate or from the sample, when DuckDB profiled the file."""
    info = f.get("out_of_core")
    if not info:
        return ""
    approximate = info.get("approximate") or []
    approx = (f" Approximate (HyperLogLog, marked ≈): {', '.join(approximate)}." if approximate else "")
    return (f"**Out of core:** {info.get('engine', 'DuckDB')} read the file in bounded memory (limit "
            f"{info.get('memory_limit', '?')}); counts, missing values, distinct values, means, quantiles, "
            "skewness, value counts, histograms, duplicates, outliers and Pearson r are exact over all rows. "
            f"From a fixed sample of {info.get('sample_rows', 0):,} rows: Spearman ρ, Cramér's V, η, scatter "
            f"plots, the target's measures, means per period and the mixed-types check.{approx}")


def _missing(f: dict[str, Any]) -> str:
    if "missing_cells" not in f:
        return ""
    if not f["missing_cells"]:
        return "**Missing values:** none."
    rows = max(f.get("shape", [1])[0], 1)
    worst = ", ".join(f"`{c}` {n:,} ({100 * n / rows:.1f}%)" for c, n in f.get("missing", {}).items())
    share = f" ({100 * f['missing_share']:.1f}% of all cells)" if "missing_share" in f else ""
    return (f"**Missing values:** {f['missing_cells']:,} cells{share} in {f.get('missing_columns', 0)} "
            f"column(s); most in {worst}.")


def _duplicates(f: dict[str, Any]) -> str:
    if "duplicates" not in f:
        return ""
    n = f["duplicates"]
    return "**Duplicate rows:** none." if not n else f"**Duplicate rows:** {n:,}."


def _alerts(f: dict[str, Any]) -> list[str]:
    alerts: list[list[Any]] = f.get("alerts") or []
    if "alerts" not in f:
        return []
    if not alerts:
        return ["", "**Alerts:** none (rules in the Alerts section)."]
    lines = ["", f"**Alerts** ({len(alerts)}, most severe first; rules in the Alerts section)", "",
             "| severity | column | alert | detail |", "| --- | --- | --- | --- |"]
    for severity, column, name, detail in alerts[:_MAX_ALERTS]:
        lines.append(f"| {SEVERITY.get(severity, severity)} | `{_cell(column)}` | {name} | {_cell(detail)} |")
    if len(alerts) > _MAX_ALERTS:
        lines += ["", f"... and {len(alerts) - _MAX_ALERTS} more in the Alerts section."]
    return lines


def _cell(text: Any) -> str:
    """Text that cannot break a markdown table row."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def _associations(f: dict[str, Any]) -> str:
    pairs = f.get("associations")
    if pairs is None:
        return ""
    if not pairs:
        return "**Associations:** fewer than two columns to relate."
    shown = "; ".join(_pair(a, b, measure, value, n, caveat) for a, b, measure, value, n, caveat in pairs[:3])
    return f"**Strongest associations:** {shown}."


def _pair(a: str, b: str, measure: str, value: float, n: int, caveat: str) -> str:
    sign = "+" if measure in ("Pearson r", "Spearman ρ") else ""
    text = f"`{a}` ~ `{b}` {measure} = {value:{sign}.2f} (n = {n:,}"
    return text + (f"; {caveat})" if caveat else ")")


def _target(f: dict[str, Any]) -> str:
    target = f.get("target")
    if not target:
        return ""
    ranked = "; ".join(f"`{c}` {m} = {v:.2f} (n = {n:,})" for c, m, v, n in target["ranked"][:3])
    return f"**Target `{target['column']}`:** most associated features: {ranked or 'none'}."


def _dates(f: dict[str, Any]) -> str:
    spans: dict[str, list[str]] = f.get("dates") or {}
    if not spans:
        return ""
    return "**Dates:** " + "; ".join(f"`{c}` from {a} to {b}" for c, (a, b) in spans.items()) + "."


def _outliers(f: dict[str, Any]) -> str:
    if "outliers" not in f:
        return ""
    flagged = f["outliers"]
    if not flagged:
        return "**Outliers (IQR rule):** none."
    parts = [f"`{c}` {n:,} ({p:g}%{', ' + caveat if caveat else ''})" for c, n, p, caveat in flagged]
    return "**Outliers (IQR rule):** " + "; ".join(parts) + "."


def _kinds(f: dict[str, Any]) -> str:
    kinds: dict[str, int] = f.get("kinds", {})
    if not kinds:
        return ""
    ordered = sorted(kinds.items(), key=lambda kv: -kv[1])
    return "**Columns:** " + ", ".join(f"{n} {k}" for k, n in ordered) + "."


def _loading(plan: _Plan | None) -> str:
    return f"**Loading:** {plan.describe()}." if plan is not None else ""


def _failed(steps: Sequence[_Step]) -> str:
    failed = [s for s in steps if not s.ok]
    if not failed:
        return ""
    return "**Steps that failed:** " + "; ".join(f"{s.title} ({s.error})" for s in failed) + "."
