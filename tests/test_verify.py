"""verify: the comparison rules (unit) and a real re-run of a recorded session."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from kernel_analyst.kernels import SessionManager
from kernel_analyst.kernels.verify import (
    NotebookFormatError,
    check_inputs,
    compare_cell,
    compare_images,
    compare_outputs,
    normalise,
    read_notebook,
    verify_notebook,
)

from .conftest import SEABORN


def _png(color: tuple[int, int, int], *, size: tuple[int, int] = (40, 30), dots: int = 0) -> bytes:
    image = Image.new("RGB", size, color)
    for i in range(dots):
        image.putpixel((i % size[0], i // size[0]), (255 - color[0], 255 - color[1], 255 - color[2]))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _stream(name: str, text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


def _result(data: dict[str, Any]) -> dict[str, Any]:
    return {"output_type": "execute_result", "data": data, "metadata": {}, "execution_count": 1}


# -- rules ---------------------------------------------------------------------------------


def test_volatile_parts_are_normalised() -> None:
    a = "<object object at 0x7f3a2b1c4d50>\nCPU times: user 3 ms\nWall time: 1.2 ms\ntook 0.53 s\n"
    b = "<object object at 0x7f99aa00bb10>\nCPU times: user 9 ms\nWall time: 4 ms\ntook 2 s\n"
    assert normalise(a) == normalise(b)
    warning = "/tmp/ipykernel_{}/456.py:1: Warning"
    assert normalise(warning.format(123)) == normalise(warning.format(9))
    assert normalise("mean 3.5\n") != normalise("mean 3.6\n")


def test_session_directories_are_normalised() -> None:
    import re

    recorded = [re.compile(r"[^\s'\"]*/old-session/wd")]
    assert normalise("saved /x/y/old-session/wd/a.csv", workdirs=recorded) == "saved <workdir>/a.csv"
    assert normalise("saved /z/new/wd/a.csv", workdirs=["/z/new/wd"]) == "saved <workdir>/a.csv"


def test_streams_compare_per_stream_not_by_interleaving() -> None:
    recorded = [_stream("stdout", "a\n"), _stream("stderr", "warn\n"), _stream("stdout", "b\n")]
    rerun = [_stream("stderr", "warn\n"), _stream("stdout", "a\nb\n")]
    assert compare_outputs(recorded, rerun) == []
    diffs = compare_outputs(recorded, [_stream("stdout", "a\nc\n"), _stream("stderr", "warn\n")])
    assert len(diffs) == 1 and diffs[0].startswith("stdout differs") and "+c" in diffs[0]


def test_text_plain_decides_and_other_formats_only_without_it() -> None:
    same_plain = [_result({"text/plain": "   a\n0  1", "text/html": "<table id='T_1'>"})]
    other_html = [_result({"text/plain": "   a\n0  1", "text/html": "<table id='T_2'>"})]
    assert compare_outputs(same_plain, other_html) == []
    html_only = [_result({"text/html": "<b>1</b>"})]
    assert compare_outputs(html_only, [_result({"text/html": "<b>2</b>"})])
    assert compare_outputs(same_plain, []) == ["0 rich outputs (displays, results), expected 1"]


def test_image_rule() -> None:
    base = _png((10, 120, 200))
    assert compare_images(base, base) is None
    assert compare_images(base, _png((10, 120, 200), dots=1)) is None  # 1 of 1200 pixels: within 0.1%
    few = compare_images(base, _png((10, 120, 200), dots=30))
    assert few is not None and "30 of 1,200 pixels" in few
    assert compare_images(base, _png((12, 118, 200))) is None  # every pixel 2 levels off: within tolerance
    assert "size" in str(compare_images(base, _png((10, 120, 200), size=(41, 30))))
    png = base64.b64encode(base).decode()
    other = base64.b64encode(_png((200, 10, 10))).decode()
    figure = [_result({"text/plain": "<Figure>", "image/png": png})]
    assert compare_outputs(figure, [_result({"text/plain": "<Figure>", "image/png": other})])


def _cell(status: str, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cell_type": "code", "source": "x", "outputs": outputs,
            "metadata": {"kernel_analyst": {"status": status}}}


def _error(ename: str, evalue: str) -> dict[str, Any]:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": ["tb"]}


def test_failed_cells_must_fail_the_same_way() -> None:
    recorded = _cell("error", [_error("KeyError", "'a'")])
    assert compare_cell(recorded, "error", [_error("KeyError", "'a'")]) == []
    assert compare_cell(recorded, "ok", []) == ["status ok, expected error"]
    differs = compare_cell(recorded, "error", [_error("ValueError", "'a'")])
    assert differs == ["error ValueError: 'a'; expected KeyError: 'a'"]
    foreign = {"cell_type": "code", "source": "1/0", "outputs": [_error("ZeroDivisionError", "x")]}
    assert compare_cell(foreign, "error", [_error("ZeroDivisionError", "x")]) == []


def test_inputs_missing_changed_and_found(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("x\n1\n")
    (data / "b.csv").write_text("x\n2\n")
    digest_a = hashlib.sha256(b"x\n1\n").hexdigest()
    nb = {"cells": [], "metadata": {"kernel_analyst": {"files": [
        {"name": "a.csv", "sha256": digest_a}, {"name": "b.csv", "sha256": "0" * 64},
        {"name": "c.csv", "sha256": "1" * 64}]}}}
    checks = {c.name: c for c in check_inputs(nb, tmp_path / "nb.ipynb", [data])}
    assert checks["a.csv"].status == "ok"
    assert checks["b.csv"].status == "changed" and "changed input" in checks["b.csv"].describe()
    assert checks["c.csv"].status == "missing" and str(data) in checks["c.csv"].describe()


def test_not_a_notebook(tmp_path: Path) -> None:
    (tmp_path / "x.ipynb").write_text("{not json")
    with pytest.raises(NotebookFormatError):
        read_notebook(tmp_path / "x.ipynb")


# -- a real session, recorded and re-run ------------------------------------------------------

CELLS = [
    "import pandas as pd\ndf = pd.read_csv('iris.csv')\ndf.describe()",
    "print(object())\nprint(repr(df.groupby('species').size()))",
    "%time total = sum(range(1000))",
    "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]); plt.show()",
    "{'a': 1}['b']",
    "x = 41",
]


async def _record(manager: SessionManager, target: Path) -> None:
    session = await manager.session(f"verify-src-{uuid.uuid4().hex[:8]}")
    await session.upload(SEABORN / "iris.csv")
    for code in CELLS:
        await session.execute(code)
    await session.restart()
    await session.execute("print(x)")  # a NameError after the restart, recorded as such
    await session.execute("import time\ntime.sleep(30)", timeout=1.0)
    await session.export(target)
    await manager.close(session.id)


def _tamper(path: Path) -> None:
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[1]["outputs"][0]["text"] = "<object object at 0x1>\nsomething else\n"
    code[4]["outputs"][0]["ename"] = "ValueError"
    path.write_text(json.dumps(nb))


async def test_rerun_reproduces_except_where_tampered(manager: SessionManager, tmp_path: Path) -> None:
    notebook = tmp_path / "audit.ipynb"
    await _record(manager, notebook)
    _tamper(notebook)
    seen: list[int] = []
    rerun = tmp_path / "rerun.ipynb"
    report = await verify_notebook(notebook, manager, data_dirs=[SEABORN], rerun_path=rerun,
                                   on_cell=lambda c: seen.append(c.index))
    assert report.inputs_ok and len(report.cells) == len(CELLS) + 2 == len(seen)
    failed = {c.source: c for c in report.failures}
    assert set(failed) == {CELLS[1], CELLS[4]}, [c.describe() for c in report.failures]
    assert "stdout differs" in failed[CELLS[1]].describe() and "something else" in failed[CELLS[1]].describe()
    assert "expected ValueError" in failed[CELLS[4]].differences[0]
    statuses = [c.actual_status for c in report.cells]
    assert statuses[-2:] == ["error", "timeout"]
    assert not report.reproduced and report.rerun_path is not None and report.rerun_path.is_file()


async def test_an_answers_numbers_are_rechecked_on_a_changed_file(
        manager: SessionManager, tmp_path: Path) -> None:
    from kernel_analyst import Analyst
    from kernel_analyst.agent.testing import ScriptedChatModel

    data = tmp_path / "data" / "sales.csv"
    data.parent.mkdir()
    data.write_text("region,amount\nnorth,120.5\nsouth,80.25\nnorth,99.0\n")
    code = "import pandas as pd\nsales = pd.read_csv('sales.csv')\nprint(sales['amount'].sum())"
    model = ScriptedChatModel(script=[f"```python\n{code}\n```", "Sales came to 299.75 in all, 3 orders."])
    cid = f"verify-claims-{uuid.uuid4().hex[:8]}"
    answer = await Analyst(model, manager, protocol="code").ask(cid, "What were the sales?", files=[data])
    assert answer.claims is not None and answer.claims.summary() == "1 number: 1 from cell 2"  # 1 loads it
    notebook = await (await manager.session(cid)).export(tmp_path / "audit.ipynb")
    await manager.close(cid)

    same = await verify_notebook(notebook, manager, data_dirs=[data.parent])
    assert same.reproduced and [a.claims for a in same.answers] == [1]

    data.write_text("region,amount\nnorth,120.5\nsouth,80.25\nnorth,150.0\n")  # the data changed
    refused = await verify_notebook(notebook, manager, data_dirs=[data.parent])
    assert not refused.inputs_ok and not refused.cells and not refused.answers  # nothing ran
    moved = await verify_notebook(notebook, manager, data_dirs=[data.parent], rerun_changed_inputs=True)
    assert moved.changed_inputs_rerun and not moved.reproduced
    (check,) = moved.moved_answers
    assert [(m.text, m.old, m.new) for m in check.moved] == [("299.75", "299.75", "350.75")]
    assert "299.75 (cell [2] stdout): was 299.75, now 350.75" in check.describe()
