"""The library on a CSV file: one persistent kernel, a few cells, the audit notebook.

Needs: this package installed (`make demo` sets up .venv), no API key, no network.
Run:   .venv/bin/python examples/library_csv.py [DATA.csv]
Writes out/library-example.ipynb (every cell below, with its outputs).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from kernel_analyst import KernelSession, SessionManager
from kernel_analyst.eda import PlaybookOptions, run_playbook

DATA = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "data" / "penguins.csv")


async def explore(session: KernelSession) -> None:
    """Cells share one namespace: `df` from the first is there in the next."""
    await session.upload(DATA)
    ex = await session.execute(f"import pandas as pd\ndf = pd.read_csv({DATA.name!r})\ndf.shape")
    print("shape:", ex.text.strip(), "| created:", ex.variables.describe())
    ex = await session.execute("df.describe().T.round(1)")
    print(ex.text)
    ex = await session.execute("df['no_such_column']")  # errors are data, not exceptions
    print("status:", ex.status, "|", ex.error)


async def main() -> None:
    with tempfile.TemporaryDirectory() as runs:
        async with SessionManager(runs) as manager:
            session = await manager.session("example")
            await explore(session)
            # The built-in EDA playbook (a few of its steps) in the same kernel.
            report = await run_playbook(session, DATA, options=PlaybookOptions(steps=("missing", "outliers")))
            print(report.summary_markdown)
            path = await session.export(Path("out") / "library-example.ipynb")
            print("audit notebook:", path)


if __name__ == "__main__":
    asyncio.run(main())
