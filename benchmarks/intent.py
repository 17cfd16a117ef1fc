#!/usr/bin/env python
"""How well the words of a question tell whether it asks to change the data
(:func:`kernel_analyst.agent.feedback.intent.asks_to_change`), measured against the
authors' own code of DSEval's Kaggle sets.

Each question of a set comes with its authors' reference code, run in one namespace after
the questions before it. A question *changes the data* when that code changes a variable
an earlier question made: rebinds the name (``df = df.dropna()``), assigns into it
(``df['x'] = ...``, ``df.loc[...] = ...``), or calls a method on it with ``inplace=True``.
The words' verdict is compared with that, question by question. What the guard acts on is
narrower: a step that leaves an existing DataFrame with fewer rows or columns. ``--run``
runs the authors' code, set by set (each in a child process, in a copy of its inputs),
and labels the questions whose code shrinks an existing DataFrame; the words must find
those::

    python benchmarks/intent.py                 # the table of agreement
    python benchmarks/intent.py --show wrong    # the questions where they disagree
    python benchmarks/intent.py --run           # against the questions that shrink a table
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trees import use_tree

use_tree()

from kernel_analyst.agent.feedback.intent import asks_to_change  # noqa: E402

DEFAULT_DATA = (Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "dseval-kaggle"
                / "problems")
_CELL = re.compile(r"^# %%\s*$", re.M)


@dataclass(frozen=True)
class Labelled:
    """One question, what its authors' code did, and what the words say."""

    problem_set: str
    question: str
    changes: bool
    words: bool
    shrinks: bool | None = None
    """The code left an existing DataFrame with fewer rows or columns (None: not run)."""


def _changed(code: str, defined: set[str]) -> tuple[bool, set[str]]:
    """Whether ``code`` changes a name in ``defined``; and the names it binds."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False, set()
    bound: set[str] = set()
    changes = False
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
                    bound.add(part.id)
                    changes |= part.id in defined
                elif isinstance(part, (ast.Subscript, ast.Attribute)) and isinstance(part.ctx, ast.Store):
                    base = part.value
                    while isinstance(base, (ast.Subscript, ast.Attribute)):
                        base = base.value
                    changes |= isinstance(base, ast.Name) and base.id in defined
        if isinstance(node, ast.Call) and any(k.arg == "inplace" for k in node.keywords):
            base = node.func.value if isinstance(node.func, ast.Attribute) else None
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            changes |= isinstance(base, ast.Name) and base.id in defined
    return changes, bound


def cells(path: Path) -> list[tuple[str | None, str]]:
    """A set's cells: (the question, or None for setup code; the authors' code)."""
    found = []
    for chunk in _CELL.split(path.read_text(encoding="utf-8")):
        chunk = chunk.strip()
        if not chunk:
            continue
        question, code = None, chunk
        if chunk.startswith('"""'):
            end = chunk.index('"""', 3)
            meta = yaml.safe_load(chunk[3:end]) or {}
            question = meta.get("question") if isinstance(meta, dict) else None
            code = chunk[end + 3:]
        found.append((" ".join(str(question).split()) if question else None, code))
    return found


def labelled(data: Path, *, run: bool = False) -> list[Labelled]:
    """Every question of every set, labelled by its authors' code (and, with ``run``, by
    what running it did to the DataFrames)."""
    found = []
    for path in sorted(data.glob("*.py")):
        defined: set[str] = set()
        shrinks = _run(path, data / "_inputs" / path.stem) if run else {}
        for number, (question, code) in enumerate(cells(path)):
            changes, bound = _changed(code, defined)
            defined |= bound
            if question:
                words = asks_to_change(question)
                found.append(Labelled(path.stem, question, changes, words, shrinks.get(number)))
    return found


_RUNNER = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
import pandas as pd
sys.path.insert(0, {bench!r})
from intent import cells
namespace, out = {{}}, {{}}
def frames():
    return {{k: v.shape for k, v in namespace.items() if isinstance(v, pd.DataFrame)}}
for number, (question, code) in enumerate(cells(__import__("pathlib").Path({path!r}))):
    before = frames()
    try:
        exec(compile(code, "cell", "exec"), namespace)
    except Exception:
        continue
    after = frames()
    if question:
        out[number] = any(k in after and (after[k][0] < shape[0] or after[k][1] < shape[1])
                          for k, shape in before.items())
print(json.dumps(out))
"""


def _run(path: Path, inputs: Path) -> dict[int, bool]:
    """Run a set's code in a copy of its inputs (a child process); which questions shrank a table."""
    import json
    import shutil
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        shutil.copytree(inputs, Path(work) / "inputs")
        script = _RUNNER.format(bench=str(Path(__file__).resolve().parent), path=str(path))
        done = subprocess.run([sys.executable, "-c", script], cwd=work, capture_output=True, text=True,
                              timeout=600)
    if done.returncode != 0 or not done.stdout.strip():
        return {}
    return {int(k): bool(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", default=str(DEFAULT_DATA))
    p.add_argument("--show", choices=("wrong", "missed", "extra"),
                   help="list the questions where they disagree")
    p.add_argument("--run", action="store_true", help="run the authors' code: which questions shrink a table")
    args = p.parse_args()
    rows = labelled(Path(args.data), run=args.run)
    tp = sum(r.changes and r.words for r in rows)
    fp = sum(not r.changes and r.words for r in rows)
    fn = sum(r.changes and not r.words for r in rows)
    tn = sum(not r.changes and not r.words for r in rows)
    print(f"{len(rows)} questions; the authors' code changes existing data in {tp + fn}")
    print(f"  words say 'asks' and the code changes: {tp}    words say 'asks', code does not: {fp}")
    print(f"  words miss a change:                   {fn}    both say no change:            {tn}")
    print(f"  agreement {100 * (tp + tn) / len(rows):.1f}%; of the changes, the words find "
          f"{100 * tp / max(tp + fn, 1):.1f}%; of the questions the guard lets change the data, "
          f"{100 * tp / max(tp + fp, 1):.1f}% do")
    if args.run:
        ran = [r for r in rows if r.shrinks is not None]
        shrink = [r for r in ran if r.shrinks]
        caught = [r for r in shrink if r.words]
        print(f"run: {len(ran)} questions ran; {len(shrink)} shrink an existing DataFrame; the words say "
              f"'asks' for {len(caught)} of them")
        for r in shrink:
            print(f"  [{'asks' if r.words else 'MISSED'}] {r.problem_set}: {r.question[:140]}")
    if args.show:
        for r in rows:
            if (args.show in ("wrong", "missed") and r.changes and not r.words) or \
                    (args.show in ("wrong", "extra") and r.words and not r.changes):
                print(f"  [{'missed' if r.changes else 'extra'}] {r.problem_set}: {r.question[:150]}")


if __name__ == "__main__":
    main()
