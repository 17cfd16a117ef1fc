"""Prompt text is package data, rendered in one place; a snapshot shows every change.

After an intended change to a prompt, refresh the snapshot with
``KA_UPDATE_SNAPSHOTS=1 pytest tests/test_prompts.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
import string
from pathlib import Path

import pytest

from kernel_analyst.agent import prompting

SNAPSHOT = Path(__file__).parent / "snapshots" / "prompts.txt"

# Sample values for every placeholder a message takes.
SAMPLES = {"count": "1,234", "bounds": "0 and 1", "file": "outputs/turn1-step2-abc123.txt", "index": 1,
           "size": "640x480", "lines": "line 2", "shown": "DataFrame",
           "mime": "text/html", "error": "KeyError: 'x'", "omitted": 3, "changes": "created df: DataFrame",
           "seconds": "30.0", "names": "df, x", "step": 2, "tool_name": "python", "detail": "",
           "name": "sql", "max_steps": 15, "via": "python_fence",
           "frames": "df: survived, pclass, sex", "columns": "survived, pclass", "need": "120", "left": "45",
           "reasons": "\n- You answered without running any code.",
           "how": "earlier steps re-run; the kernel died during a cell",
           "report": "Replayed 3 cell(s), 3 ran ok. Variables now: df, x.",
           "why": "the kernel was killed at its memory limit of 4,096 MB (an out-of-memory kill)",
           "cpu": "3.2 s", "memory": "1,234 MB of a 4,096 MB limit", "run": "run-0a1b2c3d4e",
           "limit": "4.0 GB", "numbers": "41.2%, 577", "cells": "[3]",
           "wanted": 2, "given": 1, "after": "553 rows", "steps": "2 to 3", "p": "0.9896", "r": "0.99",
           "bound": "below 0.11 even on 3 rows", "verb": "are",
           "what": "the same line again and again",
           "variables": "df: pandas.DataFrame (891, 15)", "hint": "\nThe DataFrames' columns are: df: a, b",
           "example": "subset = df[df.x > 1]", "meaning": "the number itself", "number": 2,
           "statistic": "mean", "answer": "The mean fare is 32.2.",
           "question": "What is the mean fare? Answer as @mean_fare[value].",
           "state": "finished", "action": "wait", "var": "df", "rows": "891 rows; ",
           "problem": "the file is empty", "encoding": "cp1252", "sep": "`;`", "column": "'survived'",
           "key": "'Survived'", "value": "'630308[495000-801000]'", "comparison": "df['smoker'] == True",
           "frame": "df", "total": "856", "item": "@relationship_type[nonlinear]", "outcome": "nonlinear",
           "conditions": "p < 0.05 and |r| < 0.5", "stated": "p = 0.4058, r = -0.04",
           "expected": "no significant correlation",
           "slip": "The question asks for the population standard deviation.",
           "cell": 3, "code": "df['score'] = np.log(df['score'])",
           "dtype": "str", "values": "'No', 'Yes'", "labels": "630, 851",
           "items": "@is_normal[True]", "reason": "No output of this conversation shows these numbers: 0.85.",
           "line": "'nan'", "form": "@mean_fare[value]",
           "problems": "missing: @mean_fare[...]", "reply": 3, "output": "891", "text": "The mean is 32.2.",
           "files": "`titanic.csv`", "before": "1,035", "renamed": "`df` renamed `df_work`", "old": "`df`",
           "new": "`df_work`", "pairs": "'Density' is 'Density\\n(P/Km2)'",
           "none": " No column is close to 'Arable Land (%)': pick one from the list.",
           "keys": "'Arable Land (%)'", "attribute": "idxmax",
           "module": "scipy.stats", "recipe": " Cramér's V of two columns: ...",
           "kind": "dates", "table": "df", "convert": "df[col] = pd.to_datetime(df[col])",
           "share": "len(a) / len(b)", "subset": "subset = df[df.a > 1]",
           "counted": "`day == 'Sat'` and `smoker == 'Yes'`",
           "among": "`smoker == 'Yes'`", "base": "`day == 'Sat'`", "phrase": "Of the Saturday",
           "first": "rate_2016", "second": "rate_2015", "expression": "df.rate.mean()",
           "summary": "df.Fare.mean()", "kept": "`Sex == 'male'`", "table_rows": "891"}


def render_all() -> str:
    parts = []
    for protocol, images in (("tools", False), ("tools", True), ("code", False), ("auto", False)):
        parts.append(f"=== system prompt (protocol={protocol}, send_images={images})\n"
                     + prompting.system_prompt(tool_name="python", max_steps=15, budget=4000,
                                               send_images=images, protocol=protocol))
    for protocol in ("tools", "code", "auto"):
        parts.append(f"=== system prompt (protocol={protocol}, undo=True)\n"
                     + prompting.system_prompt(tool_name="python", max_steps=15, budget=4000,
                                               send_images=False, protocol=protocol, undo=True))
    parts.append("=== tool description\n" + prompting.tool_description())
    parts.append("=== kernel context\n" + prompting.kernel_context(
        files="titanic.csv (57.0 kB, new)", variables="df: pandas.DataFrame (891, 15)"))
    for name in prompting.message_names():
        parts.append(f"=== message {name}\n" + prompting.message(name, **SAMPLES))
    return "\n\n".join(parts) + "\n"


def test_prompts_match_the_snapshot() -> None:
    rendered = render_all()
    if os.environ.get("KA_UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(rendered, encoding="utf-8")
    assert rendered == SNAPSHOT.read_text(encoding="utf-8"), "prompt changed: see this module's docstring"


def test_nothing_is_left_unrendered() -> None:
    # A `$name` left in rendered text would reach the model verbatim.
    assert not re.search(r"\$\{?[A-Za-z_]", render_all())


def test_rendering_is_strict() -> None:
    with pytest.raises(KeyError):
        prompting.message("error")
    with pytest.raises(KeyError):
        prompting.render("system.md", tool_name="python")


def test_every_placeholder_in_the_package_data_has_a_sample() -> None:
    texts = [prompting.template(n) for n in ("system.md", "tool.txt", "context.md", "messages.txt",
                                              "protocol_code.md")]
    used = {m.group("named") or m.group("braced") for t in texts
            for m in string.Template.pattern.finditer(t) if m.group("named") or m.group("braced")}
    by_system_prompt = {"budget", "figures_note", "files", "variables", "how_to_run", "how_to_answer",
                        "no_replay_rule", "undo_rule"}
    assert used - by_system_prompt <= set(SAMPLES)
