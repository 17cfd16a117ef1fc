"""KernelSession behaviour against real kernels: state, outputs, files, variables, order."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from pathlib import Path

import pytest

from kernel_analyst.kernels import (
    KernelSession,
    SessionManager,
    UnsafeFileNameError,
    VariableFetchError,
)

from .conftest import SEABORN
from .helpers import cpu_burners


async def test_state_persists_and_variables_diff(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("state")
    first = await s.execute("x = 41\ny = 'a'")
    assert first.status == "ok" and first.state == "kept"
    assert {v.name for v in first.variables.created} == {"x", "y"}
    ex = await s.execute("x += 1\ndel y\nx")
    assert ex.text == "42\n"
    assert [v.name for v in ex.variables.changed] == ["x"]
    assert ex.variables.deleted == ["y"]
    assert ex.execution_count == first.execution_count + 1  # type: ignore[operator]


async def test_variables_diff_past_ipython_names_and_keys_that_are_no_names(
        backend_manager: SessionManager) -> None:
    """The diff passes over IPython's own names (``_i3``, ``_3`` ...: one or two a cell)
    and keeps the namespace's order; a key that is no name (``globals()[5]``) is none of
    the user's variables and breaks no later diff (it broke every one before)."""
    s = await backend_manager.session("names")
    for _ in range(5):
        await s.execute("1 + 1")
    ex = await s.execute("b = 1\na = 2\n_private = 3\nglobals()[5] = 'five'")
    assert [v.name for v in ex.variables.created] == ["b", "a"]
    ex = await s.execute("del b\nc = 3")
    assert ex.variables.deleted == ["b"] and [v.name for v in ex.variables.created] == ["c"]
    assert [v.name for v in await s.variables()] == ["a", "c"]


async def test_own_expressions_are_answered_as_ipython_would(backend_manager: SessionManager) -> None:
    """The session's bookkeeping expressions skip IPython's eval and display formatters
    (a direct call of the helper), and the answer is the same."""
    s = await backend_manager.session("expressions")
    ex = await s.execute("_sh = get_ipython()\n"
                         "_mine = _sh.user_expressions({'v': '_kernel_analyst.versions()', 'n': '1 + 1'})\n"
                         "_theirs = _sh._format_user_obj(eval('_kernel_analyst.versions()'))\n"
                         "print(_mine['v'] == _theirs, list(_mine), _mine['n']['data'])")
    assert ex.text == "True ['v', 'n'] {'text/plain': '2'}\n", ex.text


async def test_dataframe_and_plot_outputs(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("rich")
    await s.upload(SEABORN / "titanic.csv")
    ex = await s.execute("import pandas as pd\ndf = pd.read_csv('titanic.csv')\ndf.head()")
    assert ex.status == "ok", ex.text
    data = ex.outputs[-1]["data"]
    assert "<table" in data["text/html"] and "survived" in data["text/plain"]
    created = {v.name: v for v in ex.variables.created}
    assert created["df"].type == "pandas.DataFrame"
    assert created["df"].shape == [891, 15]
    assert created["df"].columns is not None and "survived" in created["df"].columns
    assert created["df"].dtypes is not None and created["df"].dtypes["age"] == "float64"
    plot = await s.execute("import matplotlib.pyplot as plt\ndf['age'].hist()\nplt.title('ages')")
    assert plot.status == "ok"
    assert len(plot.images) == 1 and plot.images[0].startswith(b"\x89PNG\r\n\x1a\n")


async def test_sessions_are_isolated(backend_manager: SessionManager) -> None:
    a, b = await asyncio.gather(backend_manager.session("iso-a"), backend_manager.session("iso-b"))
    assert a.workdir != b.workdir
    await a.upload(b"only in a", name="a.txt")
    await a.execute("secret = 1")
    ex = await b.execute("secret")
    assert ex.status == "error" and ex.error is not None and ex.error.ename == "NameError"
    assert [f.name for f in await b.files()] == []
    if b.kernel is not None and b.kernel.files is None:  # a remote kernel has its own cwd
        cwd = await b.execute("import os; print(os.getcwd())")
        assert Path(cwd.text.strip()).resolve() == b.workdir.resolve()


async def test_input_fails_at_once(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("stdin")
    ex = await s.execute("name = input('name: ')", timeout=30)
    assert ex.status == "error"
    assert ex.error is not None and ex.error.ename == "StdinNotImplementedError"


async def test_error_has_clean_traceback(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("errors")
    ex = await s.execute("def f():\n    return {}['missing']\nf()")
    assert ex.status == "error" and ex.state == "kept"
    assert ex.error is not None and ex.error.ename == "KeyError" and ex.error.evalue == "'missing'"
    assert not any("\x1b[" in line for line in ex.error.traceback)
    assert any("f()" in line for line in ex.error.traceback)
    assert [v.name for v in ex.variables.created] == ["f"], "diff is kept for failing cells"


async def test_variables_does_not_add_a_cell(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("vars")
    await s.execute("import numpy as np\narr = np.zeros((3, 4))\nn = 7")
    before = len(s.audit.cells)
    found = {v.name: v for v in await s.variables()}
    assert found["arr"].shape == [3, 4] and found["arr"].dtypes == {"": "float64"}
    assert found["n"].summary == "7"
    assert "np" not in found, "modules are not variables"
    assert len(s.audit.cells) == before
    ex = await s.execute("m = 1")
    assert [v.name for v in ex.variables.created] == ["m"], "inspection does not disturb the diff"


async def test_fetch_returns_plain_data(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("fetch")
    await s.execute(
        "import pandas as pd, numpy as np\n"
        "d = {'a': [1, 2], 'b': 'x'}\n"
        "df = pd.DataFrame({'k': ['p', 'q'], 'v': [1.5, None]})\n"
        "arr = np.arange(3)\nbig = list(range(100000))"
    )
    assert await s.fetch("d") == {"a": [1, 2], "b": "x"}
    assert await s.fetch("df") == [{"k": "p", "v": 1.5}, {"k": "q", "v": None}]
    assert await s.fetch("df", format="csv") == "k,v\np,1.5\nq,\n"
    assert await s.fetch("arr") == [0, 1, 2]
    with pytest.raises(VariableFetchError, match="limit"):
        await s.fetch("big", max_bytes=1000)
    with pytest.raises(VariableFetchError, match="no variable"):
        await s.fetch("nope")
    with pytest.raises(VariableFetchError):
        await s.fetch("__import__('os')")


async def test_files_upload_download_and_metadata(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("files")
    info = await s.upload(SEABORN / "iris.csv")
    assert info.name == "iris.csv" and info.size == (SEABORN / "iris.csv").stat().st_size
    await s.upload(b"a,b\n1,2\n", name="sub/dir/x.csv")
    assert [f.name for f in await s.files()] == ["iris.csv", "sub/dir/x.csv"]
    assert await s.download("sub/dir/x.csv") == b"a,b\n1,2\n"
    recorded = s.audit.metadata["kernel_analyst"]["files"]
    assert {f["name"]: f["sha256"] for f in recorded}["iris.csv"] == info.sha256
    on_disk = json.loads(s.notebook_path.read_text())["metadata"]["kernel_analyst"]["files"]
    assert len(on_disk) == 2


async def test_an_upload_never_brings_a_removed_directory_back(manager: SessionManager) -> None:
    s = await manager.session("removed-under-it")
    await s.upload(b"a,b\n1,2\n", name="sub/first.csv")
    shutil.rmtree(s.workdir)  # as a deletion through another replica removes it
    with pytest.raises(FileNotFoundError, match=r"session directory .* is gone"):
        await s.upload(b"a,b\n", name="late.csv")
    with pytest.raises(FileNotFoundError):
        await s.upload(b"a,b\n", name="sub/late.csv")
    assert not s.workdir.exists(), "neither the directory nor the file came back"
    await manager.close("removed-under-it", reason=None, now=True)


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a\x00b", "a/../../b", "", "dir/", "..\\x"])
async def test_unsafe_names_are_refused(backend_manager: SessionManager, name: str) -> None:
    s = await backend_manager.session("names")
    with pytest.raises(UnsafeFileNameError):
        await s.upload(b"x", name=name)
    with pytest.raises(UnsafeFileNameError):
        await s.download(name)


async def test_symlink_planted_by_kernel_cannot_escape(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("symlinks")
    ex = await s.execute("import os; os.symlink('/etc', 'etc_link'); os.symlink('/etc/hostname', 'h')")
    assert ex.status == "ok", ex.text
    with pytest.raises(UnsafeFileNameError):
        await s.download("etc_link/passwd")
    with pytest.raises(UnsafeFileNameError):
        await s.download("h")
    with pytest.raises(UnsafeFileNameError):
        await s.upload(b"x", name="etc_link/evil")
    assert [f.name for f in await s.files()] == []


async def test_concurrent_executes_run_in_arrival_order(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("order")
    await s.execute("seen = []")
    tasks = [asyncio.ensure_future(s.execute(f"seen.append({i})\nprint('cell {i} ' * 50)"))
             for i in range(12)]
    results = await asyncio.gather(*tasks)
    for i, ex in enumerate(results):
        assert ex.text == f"cell {i} " * 50 + "\n", "outputs never interleave"
    assert await s.fetch("seen") == list(range(12))


async def test_sessions_run_in_parallel(backend_manager: SessionManager) -> None:
    a, b = await asyncio.gather(backend_manager.session("par-a"), backend_manager.session("par-b"))
    flag = a.workdir.resolve() / "flag"
    # A waits for a file that only B creates: if sessions were serialised, A would time out.
    wait = a.execute(f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.01)\n'seen'",
                     timeout=30)
    make = b.execute(f"open({str(flag)!r}, 'w').close()")
    ra, rb = await asyncio.gather(wait, make)
    assert rb.status == "ok" and ra.status == "ok" and ra.text == "'seen'\n"


async def test_output_callback_sees_outputs_as_they_arrive(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("stream-cb")
    seen: list[str] = []

    async def on_output(out: dict[str, object]) -> None:
        seen.append(str(out.get("text", out.get("output_type"))))

    ex = await s.execute("import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')",
                         on_output=on_output)
    assert ex.text == "a\nb\n"
    assert "".join(seen) == "a\nb\n"


async def test_huge_single_print_is_capped(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("huge")
    ex = await s.execute("print('x' * 50_000_000)")
    limit = s.limits.max_output_bytes
    assert ex.status == "ok"
    assert ex.truncated_bytes == 50_000_001 - limit
    assert len(ex.text) < limit + 500
    assert "output truncated" in ex.text
    size = s.notebook_path.stat().st_size
    assert size < 3 * limit, "the audit notebook stays bounded"


@pytest.mark.busy_machine
async def test_many_flushed_lines_are_all_kept(backend_manager: SessionManager) -> None:
    """5,000 flushed lines while two CPU burners starve this process: the kernel's IOPub
    waits for us (XPUB_NODROP) instead of dropping past its high-water mark."""
    s = await backend_manager.session("lines")
    with cpu_burners(2):
        ex = await s.execute("for i in range(5000):\n    print(i, flush=True)")
    assert ex.status == "ok"
    assert ex.text.splitlines() == [str(i) for i in range(5000)]


async def test_markdown_cells_and_export(backend_manager: SessionManager, tmp_path: Path) -> None:
    import nbformat

    s: KernelSession = await backend_manager.session("export")
    await s.add_markdown("## Question\nHow many?")
    await s.execute("print(2 + 2)")
    out = await s.export(tmp_path / "copy.ipynb")
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "code"]
    assert nb.cells[1].outputs[0]["text"] == "4\n"
    meta = nb.metadata["kernel_analyst"]
    assert meta["session_id"] == "export" and meta["isolation"] == s.isolation
    assert meta["versions"]["pandas"] and meta["versions"]["python"]
    assert nb.metadata["kernelspec"]["name"] == "python3"


async def test_image_output_bytes_match_png(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("img")
    png = (Path(__file__).resolve().parents[2] / "shared/notebooks-real/nbclient/python.png")
    await s.upload(png)
    ex = await s.execute("from IPython.display import Image\nImage('python.png')")
    assert ex.images == [png.read_bytes()]
    assert base64.b64decode(ex.outputs[0]["data"]["image/png"]) == png.read_bytes()
