"""``KernelSession.column_values``: what a column holds, read without adding a cell (the
agent's check of a comparison against a value the column never holds)."""

from __future__ import annotations

from kernel_analyst import SessionManager
from tests.conftest import SEABORN


async def test_a_columns_values_and_whether_a_literal_matches(manager: SessionManager) -> None:
    session = await manager.session("column-values")
    await session.upload(SEABORN / "tips.csv")
    await session.execute("import pandas as pd\ndf = pd.read_csv('tips.csv')")
    cells = len(session.audit.cells)

    smoker = await session.column_values("df", "smoker", [True])
    assert smoker is not None and smoker.values == ("No", "Yes") and smoker.distinct == 2
    assert smoker.dtype == "str" and smoker.matched is False
    assert (await session.column_values("df", "smoker", ["Yes"])).matched is True  # type: ignore[union-attr]
    size = await session.column_values("df", "size", [2, 7], limit=3)
    assert size is not None and size.values == (2, 3, 4) and size.distinct == 6 and size.matched is True
    # no such frame, column or name: None, and never a cell in the audit trail
    assert await session.column_values("df", "nope") is None
    assert await session.column_values("missing", "smoker") is None
    assert await session.column_values("df.x", "smoker") is None
    assert len(session.audit.cells) == cells
    await manager.close("column-values")
