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


async def test_cell_numbers_go_on_across_kernels_and_undo_marks_only_later_cells(tmp_path: Path) -> None:
    """A restarted, died or resumed kernel numbers its cells after the notebook's last: a
    fresh kernel counting from [1] again made undo mark the earlier kernel's cells too."""
    async with SessionManager(tmp_path / "sessions", limits=test_limits(checkpoints=3)) as m:
        s = await m.session("numbers")
        for code in ("a = 1", "b = 2", "c = 3"):
            assert (await s.execute(code)).status == "ok"
        await s.restart()
        after_restart = await s.execute("d = 4")
        assert after_restart.execution_count == 4, "numbering goes on after a restart"
        died = await s.execute("import os\nos._exit(1)")
        assert died.status == "died" and died.execution_count in (None, 5)
        wrong = await s.execute("e = 5\nd = None")
        assert wrong.execution_count is not None and wrong.execution_count > 4
        report = await s.undo()
        assert report.undone_cells == [wrong.execution_count], report.to_dict()
        assert (await s.execute("'e' in dir()")).text == "False\n"
        counts = [c["execution_count"] for c in s.audit.cells if c["cell_type"] == "code"]
        assert len([n for n in counts if n is not None]) == len({n for n in counts if n is not None}), counts
        undone = [c["execution_count"] for c in s.audit.cells
                  if c["cell_type"] == "code" and c["metadata"].get("kernel_analyst", {}).get("undone")]
        assert undone == [wrong.execution_count], "only the cell after the checkpoint is undone"
    async with SessionManager(tmp_path / "sessions", limits=test_limits(checkpoints=3)) as m:
        resumed = await m.session("numbers")
        ex = await resumed.execute("print('resumed')")
        assert ex.text == "resumed\n" and ex.execution_count == max(n for n in counts if n is not None) + 1
