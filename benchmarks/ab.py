"""Two checkouts' kernel benchmarks side by side: before and after a change, as ratios.

    python benchmarks/ab.py --before ../other-checkout [--rounds 2] [--only run,stress]

For each benchmark that covers the kernels (``run.py``, ``stress.py``, ``checkpoints.py``,
``density.py``, at modest sizes: minutes, not hours), the two checkouts take turns in one
run, interleaved (before, after, before, after ...), so that load on a shared machine
falls on both alike. Each side runs its own copy of the benchmark with its own package
on ``PYTHONPATH`` (checked: ``kernel_analyst.__file__`` must be under that checkout) and
this interpreter, and writes ``--json``. Every number in the JSON is reported as the
median over rounds per side and the ratio after/before (below 1: the change is faster,
or holds less memory). ``--keep DIR`` keeps the JSON files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent

BENCHMARKS: dict[str, list[str]] = {
    "run": ["--quick", "--levels", "process", "--conversations", "10"],
    "stress": ["--kernels", "10", "--rounds", "2", "--levels", "none,sandbox"],
    "checkpoints": ["--gib", "0.25", "--repeats", "2", "--isolation", "process"],
    "density": ["--conversations", "10", "--cold-conversations", "3", "--isolation", "sandbox"],
}
SKIP_KEYS = {"rows", "n", "tries", "kernels", "rounds", "burners", "conversations", "fraction"}


def check_imports(tree: Path) -> None:
    """Refuse a side whose interpreter would import another checkout's package."""
    found = subprocess.run([sys.executable, "-c", "import kernel_analyst; print(kernel_analyst.__file__)"],
                           env=_env(tree), cwd=tree / "benchmarks", capture_output=True, text=True,
                           check=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: kernel_analyst is imported from {found}, not from this checkout")


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def run_one(tree: Path, name: str, out: Path) -> dict[str, Any] | list[Any]:
    """One benchmark run in ``tree``; its JSON figures."""
    command = [sys.executable, str(tree / "benchmarks" / f"{name}.py"), *BENCHMARKS[name], "--json", str(out)]
    print(f"$ PYTHONPATH={tree} {' '.join(command[1:])}", flush=True)
    subprocess.run(command, env=_env(tree), cwd=tree, check=True, stdout=subprocess.DEVNULL)
    loaded: dict[str, Any] | list[Any] = json.loads(out.read_text())
    return loaded


def numbers(data: Any, prefix: str = "") -> dict[str, float]:
    """Every number in ``data``, named by its path (lists of named rows by their names)."""
    found: dict[str, float] = {}
    if isinstance(data, list):
        for i, item in enumerate(data):
            label = str(item.get("name", i)) if isinstance(item, dict) else str(i)
            found.update(numbers(item, f"{prefix}{label} / "))
    elif isinstance(data, dict):
        for key, value in data.items():
            if key in SKIP_KEYS or key == "name":
                continue
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                found[f"{prefix}{key}"] = float(value)
            elif isinstance(value, (dict, list)):
                found.update(numbers(value, f"{prefix}{key} / "))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the other checkout (the baseline)")
    parser.add_argument("--after", type=Path, default=HERE, help="the changed checkout (default: this one)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per side and benchmark")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="benchmarks to run")
    parser.add_argument("--keep", type=Path, help="keep the JSON files here")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    for tree in sides.values():
        check_imports(tree)
    keep = args.keep or Path(tempfile.mkdtemp(prefix="ka-ab-"))
    keep.mkdir(parents=True, exist_ok=True)
    for name in args.only.split(","):
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for round_ in range(args.rounds):
            for side, tree in sides.items():
                runs[side].append(numbers(run_one(tree, name, keep / f"{name}-{side}-{round_}.json")))
        print(f"\n{name}.py {' '.join(BENCHMARKS[name])}  ({args.rounds} runs per side, interleaved)")
        print(f"{'figure':<72} {'before':>10} {'after':>10} {'after/before':>12}")
        for key in runs["before"][0]:
            before = statistics.median(r[key] for r in runs["before"] if key in r)
            after_values = [r[key] for r in runs["after"] if key in r]
            if not after_values:
                continue
            after = statistics.median(after_values)
            ratio = f"{after / before:12.3f}" if before else f"{'-':>12}"
            print(f"{key[:72]:<72} {before:10.3f} {after:10.3f} {ratio}")
        print(flush=True)
    print(f"JSON of every run: {keep}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
