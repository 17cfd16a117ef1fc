"""Checkpoints, undo and branches (kernels/checkpoints.py, kernels/branches.py) on real
kernels forked from a template."""

from __future__ import annotations

from pathlib import Path

from kernel_analyst.kernels import SessionManager

from .conftest import test_limits


async def test_checkpoint_undo_and_fork(tmp_path: Path) -> None:
    async with SessionManager(tmp_path / "sessions", limits=test_limits(checkpoints=3)) as m:
        s = await m.session("ck-a")
        assert (await s.execute("x = 1\nopen('keep.txt', 'w').write('a')")).status == "ok"
        assert (await s.execute("x = 2\nopen('new.txt', 'w').write('b')")).status == "ok"
        assert s.describe()["kernel"]["start"], s.describe()
        report = await s.undo()
        assert report.restored_to == 2, report.to_dict()
        assert 2 in report.undone_cells
        assert (await s.execute("x")).text == "1\n"
        assert (s.workdir / "keep.txt").exists()

        b = await s.fork("ck-b")
        assert (await b.execute("x")).text == "1\n"
        assert (await b.execute("x = 10")).status == "ok"
        assert (await b.execute("x")).text == "10\n"
        assert (await s.execute("x")).text == "1\n"
        assert (b.workdir / "keep.txt").read_text() == "a"
