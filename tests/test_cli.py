"""The command line, in-process through ``main([...])``, with real kernels."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from kernel_analyst import cli
from kernel_analyst.agent.testing import ScriptedChatModel, tool_call

from .conftest import ROOT, SEABORN, TEST_ISOLATION

KERNEL = ["--isolation", TEST_ISOLATION]
NOTEBOOKS = ROOT / "notebooks"
EXAMPLE_DATA = ROOT / "examples" / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("kernel-analyst: error: ")
    return lines[0]


def test_help_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "eda" in out and "verify" in out and "chat" in out
    code, _, err = run(capsys)
    assert code == 2 and "required" in err
    code, _, err = run(capsys, "eda", "x.csv", "--isolation", "bogus")
    assert code == 2 and "invalid choice" in err


def test_server_commands_are_registered_when_available() -> None:
    pytest.importorskip("kernel_analyst.server")
    text = cli.build_parser().format_help()
    assert "serve" in text and "mcp" in text


def test_eda_writes_notebook_and_html(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_nb, out_html = tmp_path / "out" / "tips.ipynb", tmp_path / "out" / "tips.html"
    code, out, err = run(capsys, "eda", str(SEABORN / "tips.csv"), "-o", str(out_nb), "--html", str(out_html),
                         "--steps", "duplicates,outliers", *KERNEL)
    assert code == 0, err
    assert "[ 4/5] Duplicate rows" in err and "ok" in err  # progress on stderr
    assert "Summary of findings: tips.csv" in out and "Duplicate rows: 1." in out and "**" not in out
    assert f"notebook: {out_nb}" in out and f"html: {out_html}" in out
    cells = json.loads(out_nb.read_text())["cells"]
    assert sum(c["cell_type"] == "code" for c in cells) == 5
    assert "Summary of findings" in out_html.read_text()


def test_unknown_steps_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "eda", str(SEABORN / "iris.csv"), "--steps", "alerts,nope")
    assert code == 1 and "unknown playbook steps ['nope']" in one_error_line(err)


@pytest.mark.parametrize("argv", [
    ["eda", "no/such/file.csv"],
    ["verify", "no/such/audit.ipynb"],
    ["ask", "no/such/file.csv", "why?", "--model", "openai:gpt-4o-mini"],
])
def test_missing_files_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 1 and "no such file" in one_error_line(err)


def test_unreadable_csv_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "book.csv").write_bytes(b"PK\x03\x04" + bytes(100))
    code, _, err = run(capsys, "eda", str(tmp_path / "book.csv"), "-o", str(tmp_path / "b.ipynb"), *KERNEL)
    assert code == 1 and "ZIP archive that cannot be opened" in one_error_line(err)
    assert not (tmp_path / "b.ipynb").exists()


def test_model_errors_are_one_line(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    data = str(SEABORN / "iris.csv")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run(capsys, "ask", data, "why?", "--model", "openai:gpt-4o-mini")
    assert code == 1 and "OPENAI_API_KEY" in one_error_line(err)
    code, _, err = run(capsys, "ask", data, "why?", "--model", "no-such-provider:model")
    assert code == 1
    one_error_line(err)


def test_gateway_that_is_not_there_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "eda", str(SEABORN / "iris.csv"), "--gateway", "http://127.0.0.1:9",
                       "--timeout", "5")
    assert code == 1
    one_error_line(err)


@pytest.mark.parametrize("name", ["penguins-eda.ipynb", "tips-eda.ipynb"])
def test_bundled_notebooks_reproduce(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    rerun = tmp_path / "rerun.ipynb"
    code, out, err = run(capsys, "verify", str(NOTEBOOKS / name), "--data-dir", str(EXAMPLE_DATA),
                         "-o", str(rerun), *KERNEL)
    assert code == 0, out + err
    assert "reproduced: all 14 code cells match." in out and rerun.is_file()


def test_verify_reports_a_changed_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copy(NOTEBOOKS / "penguins-eda.ipynb", tmp_path / "audit.ipynb")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "penguins.csv").write_text("species\nAdelie\n")
    code, out, _ = run(capsys, "verify", str(tmp_path / "audit.ipynb"), "--data-dir", str(tmp_path / "data"),
                       *KERNEL)
    assert code == 1 and "changed input:" in out and "penguins.csv" in out
    (tmp_path / "data" / "penguins.csv").unlink()
    code, out, _ = run(capsys, "verify", str(tmp_path / "audit.ipynb"), *KERNEL)
    assert code == 1 and "missing input: penguins.csv" in out and "NOT verified" in out


def _scripted(*replies: object) -> ScriptedChatModel:
    return ScriptedChatModel(script=list(replies))


def test_ask_streams_steps_and_writes_notebook(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    model = _scripted(tool_call("import pandas as pd\ndf = pd.read_csv('iris.csv')\nprint(df.shape)"),
                      "The table has 150 rows.")
    monkeypatch.setattr(cli, "_load_model", lambda args: model)
    out_nb = tmp_path / "ask.ipynb"
    code, out, err = run(capsys, "ask", str(SEABORN / "iris.csv"), "How many rows?", "--model", "x:y",
                         "-o", str(out_nb), *KERNEL)
    assert code == 0, err
    assert ">>> df = pd.read_csv('iris.csv')" in out and "(150, 5)" in out
    assert "The table has 150 rows." in out and f"notebook: {out_nb}" in out
    assert any("iris.csv" in c["source"] for c in json.loads(out_nb.read_text())["cells"])


def test_chat_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    model = _scripted(tool_call("import pandas as pd\ntips = pd.read_csv('tips.csv')"), "Loaded.")
    monkeypatch.setattr(cli, "_load_model", lambda args: model)
    saved = tmp_path / "chat.ipynb"
    lines = ["/files", "load the tips", "/vars", f"/save {saved}", "/reset", "/vars", "/nonsense", "/quit"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, err = run(capsys, "chat", str(SEABORN / "tips.csv"), "--model", "x:y", *KERNEL)
    assert code == 0, err
    assert "tips.csv (9,729 bytes)" in out
    assert "tips: pandas.DataFrame (244, 7)" in out and "Loaded." in out
    assert f"notebook: {saved}" in out and saved.is_file()
    assert "kernel restarted" in out and "(no variables)" in out
    assert "commands: /files" in out
