#!/usr/bin/env python
"""How many tokens the agent's messages cost a small local model: does the default fit 8k?

Counts with the real model's own tokenizer and chat template: those of the GGUF served by
llama.cpp's server (``../shared/tools/local-model.sh start``: Qwen2.5-Coder-1.5B-Instruct),
through its ``/apply-template`` and ``/tokenize`` endpoints. Measured for a 30-column table
with the default settings:

- the first request: system prompt + the question with the note on files, variables and the
  uploaded table: the loader's call, rows and columns with dtypes (``preload`` off), or the
  DataFrame it is loaded into with its compact profile (``preload`` on, the default);
- one step: the model's code (a typical 8-line cell) plus the observation of a
  ``describe()`` of the 30 columns, which fills the observation budget;
- what is left of an 8,192-token context after the first request and N steps.

    python benchmarks/context_tokens.py [--base-url http://127.0.0.1:8766] [--budget 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _llama import Tokenizer

from kernel_analyst.agent.briefing import describe_files
from kernel_analyst.agent.briefing.uploads import read_uploads, tables_note
from kernel_analyst.agent.prompting import kernel_context, message, system_prompt
from kernel_analyst.agent.tools.observation import DEFAULT_BUDGET, observe
from kernel_analyst.eda._profile_impl import profile_frame
from kernel_analyst.kernels import Execution, FileInfo

CONTEXT = 8192
QUESTION = ("What is the average order value per region, and which region has the highest share of "
            "returned orders?")
CODE = """import pandas as pd
df = pd.read_csv('orders.csv')
summary = df.groupby('region').agg(avg_value=('order_value', 'mean'),
                                   returned=('returned', 'mean'))
print(summary.sort_values('returned', ascending=False))
print(df.shape)
"""


def table(rows: int = 2000, seed: int = 0) -> pd.DataFrame:
    """A realistic 30-column table: ids, numbers, categories, dates, flags, text."""
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {"order_id": np.arange(rows), "customer_id": rng.integers(1, 500, rows)}
    for name in ("order_value", "discount", "shipping_cost", "tax", "weight_kg", "quantity",
                 "unit_price", "margin", "days_to_ship", "rating", "age", "income"):
        cols[name] = rng.gamma(2.0, 50.0, rows).round(2)
    categories = {"region": ["north", "south", "east", "west"], "channel": ["web", "store", "phone"],
                  "segment": ["consumer", "corporate", "home office"], "category": list("ABCDEFG"),
                  "payment": ["card", "cash", "transfer"], "priority": ["low", "medium", "high"],
                  "country": ["DE", "FR", "ES", "IT", "PL"], "status": ["open", "closed"]}
    for name, values in categories.items():
        cols[name] = rng.choice(values, rows)
    for name in ("returned", "gift", "first_order", "newsletter"):
        cols[name] = rng.integers(0, 2, rows)
    cols["order_date"] = pd.date_range("2023-01-01", periods=rows, freq="h")
    cols["ship_date"] = cols["order_date"] + pd.to_timedelta(rng.integers(1, 9, rows), unit="D")
    cols["comment"] = rng.choice(["", "late", "damaged box", "great service"], rows)
    cols["zip"] = rng.integers(10000, 99999, rows).astype(str)
    frame = pd.DataFrame(cols)
    assert frame.shape[1] == 30, frame.shape
    return frame


def tokens(base: str, messages: list[dict[str, str]], *, template: bool = True) -> int:
    """Tokens of ``messages`` as the server's chat template renders them."""
    tokenizer = Tokenizer(base)
    if template:
        return tokenizer.templated(messages)
    return tokenizer.tokens("".join(m["content"] for m in messages))


def _table_note(frame: pd.DataFrame, *, preload: bool) -> str:
    """What the question's note says of ``frame`` uploaded as orders.csv."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "orders.csv"
        frame.to_csv(path, index=False)
        table = asyncio.run(read_uploads([path], ["orders.csv"]))[0]
    if preload:  # as uploads.preload leaves it, without a kernel
        table = dataclasses.replace(table, variable="df", profile=profile_frame(frame, "df", 1800))
    return tables_note([table])


def measure(base: str, *, budget: int, profile: bool, protocol: str) -> dict[str, Any]:
    frame = table()
    system = system_prompt(tool_name="python", max_steps=15, budget=budget, send_images=False,
                           protocol=protocol)
    files = [FileInfo(name="orders.csv", size=len(frame.to_csv(index=False).encode()))]
    note = kernel_context(files=describe_files(files, new=["orders.csv"]), variables=message("no_variables"))
    note += "\n" + _table_note(frame, preload=profile)
    first = [{"role": "system", "content": system}, {"role": "user", "content": f"{QUESTION}\n{note}"}]
    ex = Execution(code=CODE, outputs=[{"output_type": "stream", "name": "stdout",
                                         "text": frame.describe(include="all").T.to_string() + "\n"}])
    observation = observe(ex, budget=budget).text
    step = [{"role": "assistant", "content": f"```python\n{CODE}```"},
            {"role": "user", "content": f"{message('code_output', step=1)}\n{observation}\n\n"
                                        f"{message('code_continue')}"}]
    first_tokens = tokens(base, first)
    step_tokens = tokens(base, first + step) - first_tokens
    return {"protocol": protocol, "budget": budget, "profile": profile, "first_request": first_tokens,
            "system": tokens(base, first[:1]), "per_step": step_tokens,
            "observation_chars": len(observation),
            "steps_in_8k": (CONTEXT - first_tokens - 512) // step_tokens}  # 512 left for the answer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--base-url", default="http://127.0.0.1:8766", help="llama.cpp server (without /v1)")
    p.add_argument("--budget", type=int, action="append", help="observation budgets to compare (characters)")
    args = p.parse_args(argv)
    base = args.base_url.removesuffix("/v1")
    rows = [measure(base, budget=b, profile=prof, protocol=proto)
            for b in (args.budget or [DEFAULT_BUDGET]) for proto in ("tools", "code", "auto")
            for prof in (False, True)]
    print(f"{'protocol':<8} {'budget':>6} {'preload':>7} {'system':>6} {'first':>6} {'step':>5} "
          f"{'steps in 8k':>11}")
    for r in rows:
        print(f"{r['protocol']:<8} {r['budget']:>6} {r['profile']!s:>7} {r['system']:>6} "
              f"{r['first_request']:>6} {r['per_step']:>5} {r['steps_in_8k']:>11}")
    print(json.dumps(rows, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
