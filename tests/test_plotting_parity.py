"""Real plotting notebooks on a busy machine: every figure nbclient gets, we get.

The notebooks run twice in the same test, through nbclient (what a user would pick
instead) and cell by cell through a session, both while two CPU burners keep the
machine busy; per cell, the kinds of output and their MIME types must match. A figure
whose ``display_data`` lags the execute reply on IOPub must not be lost.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from kernel_analyst.kernels import SessionManager

from .conftest import NOTEBOOKS_REAL, ROOT
from .helpers import cpu_burners

EXAMPLES = ROOT / "examples" / "data"
PLOTTING = {
    "notebook2": (NOTEBOOKS_REAL / "nbconvert" / "notebook2.ipynb", []),
    "pngmetadata": (NOTEBOOKS_REAL / "nbconvert" / "pngmetadata.ipynb", []),
    "penguins-eda": (ROOT / "notebooks" / "penguins-eda.ipynb", [EXAMPLES / "penguins.csv"]),
}


pytestmark = pytest.mark.busy_machine


@pytest.fixture(scope="module", autouse=True)
def busy_machine() -> Iterator[None]:
    with cpu_burners(2):
        yield


def shape(outputs: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """What must match: each output's kind and MIME types (values vary run to run)."""
    merged: list[tuple[str, tuple[str, ...]]] = []
    for out in outputs:
        kind = out["output_type"]
        key = (kind, (out["name"],) if kind == "stream" else tuple(sorted(out.get("data", {}))))
        if kind == "stream" and merged and merged[-1] == key:
            continue  # stream chunks split differently
        merged.append(key)
    return merged


@pytest.mark.parametrize("name", sorted(PLOTTING))
async def test_plotting_notebook_matches_nbclient(name: str, manager: SessionManager, tmp_path: Path) -> None:
    path, inputs = PLOTTING[name]
    source = nbformat.read(path, as_version=4)
    for cell in source.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    for data in inputs:
        shutil.copy(data, tmp_path / data.name)
    theirs = nbformat.from_dict(source)
    await NotebookClient(theirs, timeout=120, kernel_name="python3", allow_errors=True,
                         resources={"metadata": {"path": str(tmp_path)}}).async_execute()
    session = await manager.session(f"plotting-{name}")
    # Forked from the template (the default path): the same outputs as nbclient's cold kernel.
    assert session.describe()["kernel"]["start"]["path"] == "template", session.describe()
    for data in inputs:
        await session.upload(data)
    cells = [c for c in theirs.cells if c.cell_type == "code"]
    images = 0
    for index, cell in enumerate(cells):
        ex = await session.execute(cell.source, timeout=120)
        assert shape(ex.outputs) == shape(cell.outputs), f"{name} cell {index}: {cell.source[:80]!r}"
        images += len(ex.images)
    assert images >= 1, f"{name}: no figure at all"
