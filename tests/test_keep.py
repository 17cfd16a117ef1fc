"""Keeping a branch (kernels/conversation/keeping.py): a fork's variables, files and cells
become its parent's, the parent's own line stays in the trail marked abandoned, and
``verify`` re-runs the kept path; discarding closes and removes a fork. Real kernels:
forked under ``process``, copied under ``sandbox`` (docs/forking.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel_analyst.kernels import SessionManager
from kernel_analyst.kernels.conversation import KernelSession
from kernel_analyst.kernels.exceptions import CheckpointError
from kernel_analyst.kernels.verify import verify_notebook

from .conftest import test_limits


async def value(session: KernelSession, expression: str) -> str:
    ex = await session.execute(f"print({expression})")
    assert ex.status == "ok", (ex.text, ex.error)
    return ex.text.strip()


def ka(cell: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = cell.get("metadata", {}).get("kernel_analyst", {})
    return found


async def test_keep_the_winning_fork_among_several(tmp_path: Path) -> None:
    async with SessionManager(tmp_path / "s", limits=test_limits(), recovery="replay") as manager:
        main = await manager.session("question")
        await main.upload(b"a,b\n1,2\n3,4\n", name="data.csv")
        await main.execute("import pandas as pd\ndf = pd.read_csv('data.csv')\nx = 1")
        forks = [await main.fork(f"try-{i}") for i in (1, 2, 3)]
        assert all(f.branch_info is not None and f.branch_info.method == "forked" for f in forks)
        # Each attempt in its own fork, in parallel with the conversation's own line.
        await forks[0].execute("x = 10\ndf.to_csv('data.csv', index=False, header=False)\n"
                               "open('out.txt', 'w').write('first')")
        await forks[1].execute("x = 20")
        await forks[2].execute("x = 30\ny = int(df.b.sum())")
        await main.execute("x = -1")
        await main.upload(b"late\n", name="late.csv")  # came while the forks ran
        cells_before = len(main.audit.cells)

        report = await manager.keep("try-1")
        assert report.method == "forked" and report.branch == "try-1" and report.conversation == "question"
        assert await value(main, "x") == "10" and await value(main, "df.shape") == "(2, 2)"
        assert (main.workdir / "out.txt").read_text() == "first"
        assert (main.workdir / "late.csv").exists() and report.files.kept == ["late.csv"]
        assert report.files.replaced == ["data.csv"]  # the fork rewrote it: the upload is kept aside
        assert (main.directory / "abandoned" / "try-1" / "data.csv").read_bytes() == b"a,b\n1,2\n3,4\n"
        assert "try-1" not in manager and not (tmp_path / "s" / "try-1").exists()
        # The conversation's own line is still in the trail, abandoned; the fork's cells follow.
        cells = main.audit.cells
        old = [cells[i] for i in report.abandoned_cells]
        assert [c["source"] for c in old if c["cell_type"] == "code"] == ["x = -1"]
        assert all(ka(c)["undone"] and ka(c)["abandoned"]["branch"] == "try-1" for c in old)
        assert ka(old[0])["abandoned"]["record"]["status"] == "ok" and "state" not in ka(old[0])
        marker = cells[report.kept_cells[0] - 1]
        assert ka(marker)["marker"] == "kept" and ka(marker)["branch"] == "try-1"
        assert {ka(cells[i]).get("kept_from") for i in report.kept_cells} == {"try-1"}
        assert len(cells) > cells_before

        # The other forks are untouched: one discarded (its cells recorded), one kept after.
        assert await value(forks[2], "x, y") == "30 6"
        discarded = await manager.discard("try-2", record_cells=True)
        assert discarded.recorded and discarded.cells >= 1 and not (tmp_path / "s" / "try-2").exists()
        assert any(ka(c).get("marker") == "discarded" for c in main.audit.cells)
        second = await main.keep("try-3")
        assert await value(main, "x, y") == "30 6"
        assert (main.workdir / "data.csv").read_bytes() == b"a,b\n1,2\n3,4\n"  # try-3's own
        assert second.files.replaced == ["data.csv"] and "out.txt" in second.files.kept
        # try-1's line is abandoned now in its turn; numbering goes on past every cell.
        assert all(ka(main.audit.cells[i]).get("undone") for i in report.kept_cells
                   if main.audit.cells[i]["cell_type"] == "code")
        ex = await main.execute("z = x + 1")
        counts = [c["execution_count"] for c in main.audit.cells if c["cell_type"] == "code"]
        assert ex.execution_count == max(counts) and counts.count(ex.execution_count) == 1
        with pytest.raises(CheckpointError, match="not a branch"):
            await manager.keep("question")

        # verify re-runs the kept path (the uploads found in the working directory).
        exported = await main.export(tmp_path / "kept.ipynb")
        checked = await verify_notebook(exported, manager, data_dirs=[main.workdir])
        assert checked.reproduced, [c.describe() for c in checked.failures] + [i.name for i in checked.inputs]
        rerun = [c.source for c in checked.cells]
        assert "x = 30\ny = int(df.b.sum())" in rerun and rerun[-1] == "z = x + 1"
        assert not [s for s in rerun if s.startswith(("x = -1", "x = 10", "x = 20"))], rerun


async def test_keep_copies_the_namespace_under_sandbox(tmp_path: Path) -> None:
    async with SessionManager(tmp_path / "s", limits=test_limits(isolation="sandbox")) as manager:
        main = await manager.session("sandboxed")
        await main.execute("a = 1")
        branch = await main.fork("sandboxed-try")
        await branch.execute("b = a + 41\nopen('made.txt', 'w').write('yes')")
        report = await manager.keep("sandboxed-try")
        assert report.method == "copied" and report.reason and "sandbox" in report.reason
        ex = await main.execute("print(a, b, open('made.txt').read())")
        assert ex.text.strip() == "1 42 yes", ex.text
        assert ex.recovery is not None and ex.recovery.complete


def test_kept_cells_point_at_the_parents_cells() -> None:
    """Pure: what a keep writes, for a branch whose answer cites a copied cell and its own,
    and whose resume restored copied cells."""
    from kernel_analyst.kernels.conversation import keeping

    def code(cid: str, count: int, **meta: Any) -> dict[str, Any]:
        return {"cell_type": "code", "id": cid, "execution_count": count, "source": cid, "outputs": [],
                "metadata": {"kernel_analyst": {"status": "ok", **meta}}}

    died = {"cell_type": "markdown", "id": "m", "source": "x",
            "metadata": {"kernel_analyst": {"marker": "died"}}}
    parent = [code("p1", 1), code("p2", 2, undone=True), code("old", 3), died]
    branch = [{"cell_type": "markdown", "id": "b0", "source": "branched", "metadata": {"kernel_analyst": {
                  "marker": "branched", "parent": "p", "after_cell": 2, "cells": 2}}},
              code("c1", 1, branched_from="p"), code("c2", 2, branched_from="p"),
              {"cell_type": "markdown", "id": "r", "source": "resumed", "metadata": {"kernel_analyst": {
                  "marker": "resumed", "restored_cells": ["c1", "c2"]}}},
              code("own", 3),
              {"cell_type": "markdown", "id": "a", "source": "### Answer", "metadata": {"kernel_analyst": {
                  "role": "answer", "claims": {"claims": [
                      {"source": {"cell_id": "c1", "cell_index": 1}},
                      {"source": {"cell_id": "own", "cell_index": 4}}]}}}}]
    line = keeping.branch_line(branch, "p")
    todo = keeping.plan(parent, branch, line, branch="b")
    assert line.own_start == 3 and todo.abandon == [2, 3] and todo.first == 5
    assert todo.undo == {1: False}  # the parent's old line undid p2; the branch kept its effect
    resumed, own, answer = todo.cells
    assert resumed["metadata"]["kernel_analyst"]["restored_cells"] == ["p1", "p2"]
    sources = [c["source"] for c in answer["metadata"]["kernel_analyst"]["claims"]["claims"]]
    assert sources == [{"cell_id": "p1", "cell_index": 0}, {"cell_id": "own", "cell_index": 6}]
    assert own["metadata"]["kernel_analyst"]["kept_from"] == "b" and todo.next_count == 4
    keeping.abandon(parent[3], branch="b", at="now")
    meta = parent[3]["metadata"]["kernel_analyst"]
    assert meta["undone"] and "marker" not in meta and meta["abandoned"]["record"]["marker"] == "died"


def test_a_branchs_copies_point_at_each_other(tmp_path: Path) -> None:
    """Pure: a fork's notebook copies the parent's cells with new ids; an answer's claims
    and a resume's restored cells name the copies (verify and recovery read them there)."""
    from kernel_analyst.kernels.conversation.branches import BranchInfo, write_trail
    from kernel_analyst.kernels.trail import AuditTrail

    source = AuditTrail.create(tmp_path / "source.ipynb", {"kernel_analyst": {"files": []}})
    source.append({"cell_type": "code", "id": "one", "execution_count": 1, "source": "x = 1", "outputs": [],
                   "metadata": {"kernel_analyst": {"status": "ok"}}})
    source.append_markdown("resumed", marker="resumed", restored_cells=["one"])
    source.append_markdown("### Answer", role="answer",
                           claims={"claims": [{"source": {"cell_id": "one", "cell_index": 0}}]})
    trail = AuditTrail.create(tmp_path / "fork.ipynb", {"kernel_analyst": {}})
    write_trail(trail, source, "src", BranchInfo("src", 1, "forked", 0.0), None)
    marker, code, resumed, answer = trail.cells
    assert marker["metadata"]["kernel_analyst"]["cells"] == 3 and code["id"] != "one"
    assert resumed["metadata"]["kernel_analyst"]["restored_cells"] == [code["id"]]
    cited = answer["metadata"]["kernel_analyst"]["claims"]["claims"][0]["source"]
    assert cited == {"cell_id": code["id"], "cell_index": 1}
