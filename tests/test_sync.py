"""The synchronous facade drives the same async core from plain code."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kernel_analyst.kernels.sync import SyncSessionManager

from .conftest import test_limits


def _use_sync_api(root: Path) -> None:
    with SyncSessionManager(root, limits=test_limits()) as manager:
        session = manager.session("sync")
        session.upload(b"v\n1\n2\n", name="v.csv")
        ex = session.execute("import pandas as pd\nt = pd.read_csv('v.csv')\nint(t.v.sum())")
        assert ex.status == "ok" and ex.text == "3\n"
        assert [v.name for v in session.variables()] == ["t"]
        assert session.fetch("t") == [{"v": 1}, {"v": 2}]
        assert manager.list() == ["sync"]
        assert session.notebook_path.exists()


def test_sync_facade_in_plain_code(tmp_path: Path) -> None:
    _use_sync_api(tmp_path)


async def test_sync_facade_inside_a_running_loop(tmp_path: Path) -> None:
    # As in a Jupyter notebook: a loop is running in this thread, and the facade still works.
    asyncio.get_running_loop()
    _use_sync_api(tmp_path)
