"""The audit trail: valid on disk at every moment, appends in place, re-runnable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from kernel_analyst.kernels import Execution, SessionManager
from kernel_analyst.kernels.trail import AuditTrail, repair_notebook


def read_valid(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.reads(path.read_text(), as_version=4)
    nbformat.validate(nb)
    return nb


def test_every_append_leaves_a_valid_notebook_in_place(tmp_path: Path) -> None:
    path = tmp_path / "a.ipynb"
    trail = AuditTrail.create(path, {"kernel_analyst": {"session_id": "t"}})
    assert read_valid(path).cells == []
    inode = path.stat().st_ino
    for i in range(30):
        ex = Execution(code=f"print({i})", execution_count=i + 1,
                       outputs=[{"output_type": "stream", "name": "stdout", "text": f"{i}\n"}])
        trail.append_execution(ex)
        if i % 7 == 0:
            trail.append_markdown(f"note {i}")
        nb = read_valid(path)
        assert nb.cells[-1 if i % 7 else -2].source == f"print({i})"
    assert path.stat().st_ino == inode, "appends write in place; no whole-file rewrite"
    trail.update_metadata(files=[{"name": "x.csv", "size": 1, "sha256": "00"}])
    assert path.stat().st_ino != inode, "metadata changes replace the file atomically"
    nb = read_valid(path)
    assert len([c for c in nb.cells if c.cell_type == "code"]) == 30
    assert nb.metadata["kernel_analyst"]["files"][0]["name"] == "x.csv"


def test_notebook_survives_the_writer_being_killed(tmp_path: Path) -> None:
    path = tmp_path / "killed.ipynb"
    script = textwrap.dedent(f"""
        import sys
        from kernel_analyst.kernels.trail import AuditTrail, repair_notebook
        from kernel_analyst.kernels.execution import Execution
        trail = AuditTrail.create(__import__('pathlib').Path({str(path)!r}), {{}})
        i = 0
        while True:
            i += 1
            trail.append_execution(Execution(code=str(i), outputs=[
                {{"output_type": "stream", "name": "stdout", "text": "x" * (i % 5000)}}]))
            if i == 200:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    kept = repair_notebook(path)  # a no-op unless the kill cut a multi-page write short
    nb = read_valid(path)
    assert len(nb.cells) == kept >= 200
    assert [c.source for c in nb.cells] == [str(i) for i in range(1, kept + 1)]


def test_a_cut_short_append_is_repaired_to_the_last_whole_cell(tmp_path: Path) -> None:
    path = tmp_path / "cut.ipynb"
    trail = AuditTrail.create(path, {"kernel_analyst": {"session_id": "cut"}})
    for i in range(5):
        trail.append_execution(Execution(code=str(i), outputs=[
            {"output_type": "stream", "name": "stdout", "text": "z" * 3000}]))
    whole = path.read_bytes()
    before_last = whole.rfind(b',\n{"cell_type"')
    for cut in range(before_last, len(whole), 997):
        path.write_bytes(whole[:cut])
        kept = repair_notebook(path)
        nb = read_valid(path)
        assert kept in (4, 5) and [c.source for c in nb.cells] == [str(i) for i in range(kept)]
        assert nb.metadata["kernel_analyst"]["session_id"] == "cut"


async def test_export_reexecutes_under_nbclient(manager: SessionManager, tmp_path: Path) -> None:
    s = await manager.session("nbclient-rerun")
    await s.upload(b"a,b\n1,2\n3,4\n", name="t.csv")
    cells = [
        "import pandas as pd\ndf = pd.read_csv('t.csv')\ndf",
        "print(df['a'].sum())",
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(df['a'], df['b']);",
        "df['c'] = df['a'] * 10\ndf.describe()",
    ]
    for code in cells:
        assert (await s.execute(code)).status == "ok"
    exported = await s.export(tmp_path / "export.ipynb")
    nb = nbformat.read(exported, as_version=4)
    client = NotebookClient(nb, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(s.workdir)}})
    await client.async_execute()
    original = read_valid(exported)
    for mine, rerun in zip(original.cells, nb.cells, strict=True):
        assert [o["output_type"] for o in mine.outputs] == [o["output_type"] for o in rerun.outputs]
        for a, b in zip(mine.outputs, rerun.outputs, strict=True):
            if a["output_type"] == "stream":
                assert a["text"] == b["text"]
            else:
                assert a["data"].get("text/html") == b["data"].get("text/html")
                assert set(a["data"]) == set(b["data"])
