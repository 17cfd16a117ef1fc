"""Options the agent benchmarks share: ``--analyst KEY=VALUE`` as keywords for ``Analyst(...)``."""

from __future__ import annotations

from typing import Any


def analyst_keywords(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as keywords: ints, floats, true/false and none parsed, else text."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--analyst takes KEY=VALUE, e.g. attempts=3; got {pair!r}")
        options[key] = parse_value(raw)
    return options


def parse_value(raw: str) -> Any:
    """A command-line value as Python: an int, a float, True/False/None, else the text."""
    special = {"true": True, "false": False, "none": None}
    if raw.lower() in special:
        return special[raw.lower()]
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            continue
    return raw
