"""The command line with real kernels: in-process through ``main([...])``, and as a real
subprocess where what reaches the terminal matters (a model that cannot be reached, the
code console driven through stdin)."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_analyst import cli
from kernel_analyst.agent.testing import ScriptedChatModel, tool_call
from kernel_analyst.frontend.settings import DEFAULT_MAX_STEPS, package_version

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


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"kernel-analyst {package_version()}\n" and package_version()[0].isdigit()


def test_the_front_ends_share_one_set_of_defaults() -> None:
    from kernel_analyst.agent import AnalystSettings
    from kernel_analyst.kernels import Limits
    from kernel_analyst.server import ServerConfig
    from kernel_analyst.server.cli import config_from_args

    parser = cli.build_parser()
    ask = parser.parse_args(["ask", "x.csv", "q", "--model", "a:b"])
    serve = config_from_args(parser.parse_args(["serve"]))
    assert ask.max_steps == serve.max_steps == ServerConfig().max_steps == DEFAULT_MAX_STEPS
    assert AnalystSettings().max_steps == DEFAULT_MAX_STEPS
    assert serve.default_timeout_s == serve.limits.timeout_s == Limits().timeout_s == 120
    assert ask.images == serve.images == "auto"
    assert parser.parse_args(["chat", "--images", "off"]).images == "off"
    assert parser.parse_args(["serve", "--images", "on"]).images == "on"


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


def test_a_directory_is_named_as_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv in (["eda", str(tmp_path)], ["chat", str(tmp_path)],
                 ["ask", str(tmp_path), "q", "--model", "a:b"]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and one_error_line(err).endswith(f"{tmp_path} is a directory; give a file")


def test_an_unreadable_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    secret.chmod(0)
    if os.geteuid() == 0:  # root reads any file: let os.access answer as it does for anyone else
        real_access = os.access
        monkeypatch.setattr(os, "access",
                            lambda p, mode: False if Path(p) == secret else real_access(p, mode))
    code, _, err = run(capsys, "eda", str(secret))
    assert code == 1 and one_error_line(err).endswith(f"cannot read {secret}: permission denied")


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "--debug", "eda", str(tmp_path))
    assert code == 1 and "Traceback (most recent call last)" in err and "IsADirectoryError" in err
    assert err.rstrip().splitlines()[-1] == f"kernel-analyst: error: {tmp_path} is a directory; give a file"
    code, _, err = run(capsys, "eda", str(tmp_path), "--debug")  # after the command's name too
    assert code == 1 and "Traceback" in err


def test_a_missing_model_package_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langchain")
    if _installed("langchain_ollama"):
        pytest.fail("this check needs a provider package that is not installed (langchain-ollama is)")
    for command in ("ask", "chat"):
        argv = [command, str(SEABORN / "iris.csv"), *(["why?"] if command == "ask" else []),
                "--model", "ollama:qwen2.5-coder"]
        code, _, err = run(capsys, *argv)
        line = one_error_line(err)
        assert code == 1 and 'pip install "kernel-analyst[ollama]"' in line and "ollama:qwen2.5-coder" in line


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens here once the socket is closed


def _cli(*argv: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_ANALYST_"))}
    return subprocess.run([sys.executable, "-m", "kernel_analyst.cli", *argv], input=stdin, text=True,
                          capture_output=True, timeout=timeout, env=env, cwd=ROOT)


def test_an_unreachable_model_is_one_line() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    done = _cli("ask", str(SEABORN / "iris.csv"), "How many rows?", "--model", "openai:gpt-4o-mini",
                "--base-url", url, *KERNEL)
    assert done.returncode == 1, done.stderr
    assert one_error_line(done.stderr) == (
        f"kernel-analyst: error: the model openai:gpt-4o-mini at {url} could not be reached: "
        "OpenAIConnectionError: Connection error.")


def test_chat_without_a_model_is_a_code_console(tmp_path: Path) -> None:
    saved = tmp_path / "console.ipynb"
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(SEABORN / "tips.csv", data / "tips.csv")
    lines = [
        "import pandas as pd",
        "tips = pd.read_csv('tips.csv')",
        "for day in ['Sun']:",
        "    print(day, len(tips[tips.day == day]))",
        "",
        "tips['nope']",
        "/traceback",
        "/vars",
        "/files",
        f"/eda {data / 'tips.csv'}",
        f"/eda {data}",
        "1 / 0",
        f"/save {saved}",
        "/quit",
    ]
    done = _cli("chat", str(data / "tips.csv"), *KERNEL, stdin="\n".join(lines) + "\n")
    out = done.stdout
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert out.startswith("uploaded: tips.csv\nkernel ready: each input runs as a cell.")
    assert "[1] ok (" in out and "[2] ok (" in out
    assert "Sun 76\n[3] ok (" in out  # the loop ran as one cell, its output before its status
    failed = out.split("[4] failed: KeyError: 'nope' (", 1)[1]
    assert "Traceback (1 library frame folded; /traceback shows it whole):" in failed
    assert "Cell In[4], line 1" in failed and "site-packages" not in failed.split("---------")[0]
    assert "The above exception was the direct cause" in out  # /traceback printed it whole
    assert "tips: pandas.DataFrame (244, 7)" in out and "tips.csv (9,729 bytes)" in out
    assert "[14/14] Column profiles" in out and "EDA of tips.csv: 14 cells ran without error." in out
    assert f"error: {data} is a directory; give a file" in out
    assert "failed: ZeroDivisionError: division by zero" in out
    assert f"notebook: {saved}" in out
    cells = json.loads(saved.read_text())["cells"]
    assert any("tips['nope']" in "".join(c["source"]) for c in cells)


def test_chat_undo(tmp_path: Path) -> None:
    """/undo in the code console: a wrong inplace dropna is undone, the cell marked."""
    saved = tmp_path / "undo.ipynb"
    lines = ["import pandas as pd", "df = pd.DataFrame({'a': [1.0, None, 3.0]})", "df.dropna(inplace=True)",
             "/undo", "len(df)", "/undo 9", "/undo x", f"/save {saved}", "/quit"]
    done = _cli("chat", "--session-dir", str(tmp_path / "s"), *KERNEL, stdin="\n".join(lines) + "\n")
    out = done.stdout
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "/undo [N]  variables back to before the last cell" in out
    assert "  Undid [3]: the variables are as they were before cell [3]." in out
    assert "3\n[4] ok (" in out
    assert "error: no checkpoint was taken before cell [9]" in out
    assert "usage: /undo [N]" in out
    cells = [c for c in json.loads(saved.read_text())["cells"] if c["cell_type"] == "code"]
    assert [bool(c["metadata"]["kernel_analyst"].get("undone")) for c in cells] == [False, False, True, False]


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


def test_chat_resume_continues_a_conversation(tmp_path: Path) -> None:
    """A console session left with /quit (its namespace snapshotted), continued with
    --resume: the same notebook, and the variables are back."""
    sessions = tmp_path / "sessions"
    first = _cli("chat", "--session-dir", str(sessions), *KERNEL,
                 stdin="answer = 6 * 7\nwords = ['durable']\n/quit\n")
    assert first.returncode == 0, first.stderr
    resumed = _cli("chat", "--resume", str(sessions / "chat"), *KERNEL,
                   stdin="print(answer, words)\n/quit\n")
    assert resumed.returncode == 0, resumed.stderr
    out = resumed.stdout
    assert out.startswith("resumed conversation 'chat'") and "loaded from a snapshot" in out
    assert "42 ['durable']" in out
    notebook = json.loads((sessions / "chat" / "audit.ipynb").read_text())
    sources = ["".join(c["source"]).strip() for c in notebook["cells"] if c["cell_type"] == "code"]
    assert sources == ["answer = 6 * 7", "words = ['durable']", "print(answer, words)"]


def test_chat_resume_needs_a_conversation(tmp_path: Path) -> None:
    done = _cli("chat", "--resume", str(tmp_path), *KERNEL)
    assert done.returncode == 2
    assert one_error_line(done.stderr) == (
        f"kernel-analyst: error: --resume {tmp_path}: no conversation there (no kernel-analyst audit.ipynb)")


def test_ask_continues_a_conversation(tmp_path: Path) -> None:
    """Two ``ask`` runs (two processes) on one --session-dir and --conversation: the second
    uses a variable the first made (its namespace was snapshotted at the end of the first)."""
    from tests.openai_server import OpenAIServer, ScriptedReply

    data = tmp_path / "points.csv"
    data.write_text("x\n1\n3\n2\n")
    sessions = tmp_path / "sessions"
    common = ["--session-dir", str(sessions), "--conversation", "study", *KERNEL]
    load = "import pandas as pd\ntotal = int(pd.read_csv('points.csv').x.sum())\ntotal"
    replies = [ScriptedReply(code=load), ScriptedReply(text="The total is 6."),
               ScriptedReply(code="total * 7"), ScriptedReply(text="Seven times it is 42.")]
    with OpenAIServer(replies) as server:
        model = ["--model", "openai:scripted-model", "--base-url", server.url]
        first = _cli("ask", str(data), "What is the total?", *model, *common)
        assert first.returncode == 0, first.stderr
        second = _cli("ask", str(data), "And seven times that?", *model, *common)
        assert second.returncode == 0, second.stderr
        messages = server.requests[-1]["messages"]
    last_tool = next(m["content"] for m in reversed(messages) if m["role"] == "tool")
    assert "Seven times it is 42." in second.stdout and last_tool.startswith("42")
    assert [c.id for c in _conversations(sessions)] == ["study"]


def _conversations(root: Path) -> list[Any]:
    from kernel_analyst.kernels import ConversationInfo

    return [info for nb in root.glob("*/audit.ipynb") if (info := ConversationInfo.read(nb)) is not None]
