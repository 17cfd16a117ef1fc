#!/usr/bin/env python
"""The attempts' time account replayed on DABench records: what the product's
:class:`~kernel_analyst.agent.loop.attempts.Attempts` would have done, question by question,
with the records of a run made without it (every question in doubt tried again).

Each record of ``benchmarks/dabench.py --out`` keeps the first attempt's answer and seconds
beside the answer given after the attempts, so a run without the account holds both
outcomes. The replay feeds the records, in the order they were written, to ``Attempts``
(``observe``, ``wanted``, ``time_for``) and takes the answer given where the account pays
for the attempts and their time fits what it would have got, the first answer otherwise.
Where the account would have stopped the attempts earlier than they ended, the first
answer is taken too (marked ``cut``): what an attempt stopped early would have done is not
in the records, so that figure is an estimate::

    python benchmarks/attempts_account.py run.jsonl.partial [more.jsonl ...] [--share 0.5]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _trees import use_tree

use_tree()

from dabench import DEFAULT_DATA, load_labels, score  # noqa: E402

from kernel_analyst.agent.feedback.decisions import Reason  # noqa: E402
from kernel_analyst.agent.feedback.judge import JudgeSettings  # noqa: E402
from kernel_analyst.agent.loop.attempts import Attempts  # noqa: E402
from kernel_analyst.agent.loop.ending import Outcome  # noqa: E402
from kernel_analyst.agent.results import Answer  # noqa: E402


@dataclass
class Replayed:
    """One question under one policy."""

    level: str
    right: float
    tried: bool
    cut: bool
    first_s: float
    extra_s: float


def replay(records: list[dict[str, Any]], labels: dict[int, Any], share: float | None, *,
           again: bool = True) -> list[Replayed]:
    """One analyst's records in the order it answered them (``again=False``: the first
    attempts alone; ``share=None``: every question in doubt tried again, as the run did)."""
    judging = JudgeSettings(max_steps=10, tool_name="python")
    attempts = Attempts(every=1, on_doubt=3, parallel=2, judging=judging, share=share)
    turn = SimpleNamespace(notes=[], emit=lambda event: None)
    out = []
    for r in records:
        was_tried = r.get("first_response") is not None
        first_s = float(r["first_seconds"]) if was_tried else float(r["duration_s"])
        doubts = (Reason("doubt", "- in doubt"),) if was_tried else ()
        first = Outcome(Answer("", [], Path("audit.ipynb"), "answered", duration_s=first_s),
                        cast(Any, turn), doubts)
        attempts.observe(first)
        given, tried, cut = (r["first_response"] if was_tried else r["response"]), False, False
        if again and was_tried and attempts.wanted(first) > 1:
            tried = True
            extra = float(r["duration_s"]) - first_s
            limit = attempts.time_for(first)
            if share is None or extra <= limit + 5.0:  # the recorded attempts fit in their time
                given = r["response"]
                attempts.extra[-1] += extra
            else:
                cut = True
                attempts.extra[-1] += limit
        right = score(labels, {int(r["id"]): given}).by_question
        out.append(Replayed(str(r.get("level", "")), right, tried, cut, first_s, attempts.extra[-1]))
    return out


def line(name: str, rs: list[Replayed]) -> str:
    first = sum(r.first_s for r in rs)
    ratio = (first + sum(r.extra_s for r in rs)) / first if first else 0.0
    right = sum(r.right for r in rs)
    return (f"{name:<28} {right:>4.0f} of {len(rs):<3} right ({right / max(len(rs), 1):6.1%})  "
            f"tried again {sum(r.tried for r in rs):>3} (cut {sum(r.cut for r in rs)})  "
            f"seconds {ratio:.2f}x the first attempts")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", nargs="+", help="dabench.py --out records (.jsonl.partial: in the order "
                                              "answered), one file per analyst")
    p.add_argument("--share", type=float, default=0.5, help="the account's share (default: %(default)s)")
    p.add_argument("--data", default=str(DEFAULT_DATA))
    args = p.parse_args()
    labels = load_labels(Path(args.data))
    runs = [[json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
            for path in args.records]
    policies = {
        "first attempts only": [r for rs in runs for r in replay(rs, labels, None, again=False)],
        "every doubt tried (as run)": [r for rs in runs for r in replay(rs, labels, None)],
        f"the account (share {args.share:g})": [r for rs in runs for r in replay(rs, labels, args.share)],
    }
    for level in ("easy", "medium", "hard", "all"):
        print(f"== {level}")
        for name, rs in policies.items():
            chosen = [r for r in rs if level in ("all", r.level)]
            if chosen:
                print("  " + line(name, chosen))


if __name__ == "__main__":
    main()
