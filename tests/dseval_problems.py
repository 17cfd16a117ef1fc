"""DSEval's Kaggle problem sets as (set, question, the authors' reference code), read from
``../shared/datasets/dseval-kaggle/problems``: the checks that read a question's words and a
step's code are scanned against them, right code that must not be faulted."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator

import yaml

from tests.conftest import SHARED

PROBLEMS = SHARED / "datasets" / "dseval-kaggle" / "problems"


def reference_cells() -> Iterator[tuple[str, str, str]]:
    """Each question of every set, with its reference cell's code."""
    for path in sorted(PROBLEMS.glob("*.py")):
        for cell in path.read_text().split("# %%")[1:]:
            parts = re.match(r'\s*"""(.*?)"""(.*)', cell, re.S)
            meta = yaml.safe_load(parts.group(1)) if parts else None
            if parts is not None and isinstance(meta, dict) and "question" in meta:
                yield path.stem, str(meta["question"]), parts.group(2)


def set_columns(name: str) -> dict[str, str]:
    """The header names of a set's input CSV files, each -> its file (the first that has it)."""
    columns: dict[str, str] = {}
    for path in sorted((PROBLEMS / "_inputs" / name).rglob("*.csv")):
        with path.open(encoding="utf-8", errors="replace", newline="") as handle:
            header = next(csv.reader(handle), [])
        for column in header:
            columns.setdefault(column, path.name)
    return columns
