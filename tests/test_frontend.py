"""The front-end layer without kernels: the one error mapping, settings and the Limits
builder, outcomes said honestly, errors as people read them, typed event dispatch, the
console's reading of multi-line cells, and host paths kept out of tracebacks."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import kernel_analyst.frontend as frontend
from kernel_analyst.agent.events import FinalAnswer, ModelText, StepCode
from kernel_analyst.agent.results import Answer
from kernel_analyst.agent.tools.observation import trim_traceback
from kernel_analyst.eda import EdaReport, StepResult
from kernel_analyst.frontend.console import code_is_complete
from kernel_analyst.frontend.errors import RunFailedError, UsageError, classify
from kernel_analyst.frontend.flags import add_kernel_flags, add_model_flags, kernel_settings, model_settings
from kernel_analyst.frontend.outcomes import answer_outcome, eda_outcome, stopped_eda
from kernel_analyst.frontend.settings import KernelSettings, ModelSettings
from kernel_analyst.frontend.tracebacks import ErrorView
from kernel_analyst.kernels import (
    DiskQuotaError,
    ExecutionError,
    FileTooLargeError,
    KernelStartError,
    Limits,
    SessionClosedError,
    UnsafeFileNameError,
)
from kernel_analyst.server.exceptions import NoModelError, TooManySessionsError

from .test_observation import CHAINED_TRACEBACK


def test_public_names() -> None:
    missing = [n for n in frontend.__all__ if not hasattr(frontend, n)]
    assert not missing and sorted(frontend.__all__) == sorted(set(frontend.__all__))


@pytest.mark.parametrize(("exc", "exit_code", "status", "message"), [
    (UsageError("ask needs a question"), 2, 400, "ask needs a question"),
    (RunFailedError("the model could not be reached"), 1, 422, "the model could not be reached"),
    (UnsafeFileNameError("'../x' is unsafe"), 1, 400, "'../x' is unsafe"),
    (FileTooLargeError("too big"), 1, 413, "too big"),
    (SessionClosedError("closed"), 1, 410, "closed"),
    (DiskQuotaError("full"), 1, 507, "full"),
    (KernelStartError("did not start"), 1, 503, "did not start"),
    (NoModelError("no model"), 1, 409, "no model"),
    (TooManySessionsError("too many", 30), 1, 429, "too many"),
    (FileNotFoundError(2, "No such file or directory", "a.csv"), 1, 404, "no such file: a.csv"),
    (IsADirectoryError(21, "Is a directory", "data"), 1, 400, "data is a directory; give a file"),
    (PermissionError(13, "Permission denied", "a.csv"), 1, 403, "cannot read a.csv: permission denied"),
    (ValueError("bad\nvalue"), 1, 422, "bad value"),
    (KeyboardInterrupt(), 130, 499, "interrupted"),
])
def test_one_mapping_from_exceptions(exc: BaseException, exit_code: int, status: int, message: str) -> None:
    failure = classify(exc)
    assert (failure.exit_code, failure.http_status, failure.message, failure.expected) == (
        exit_code, status, message, True)


def test_a_bug_is_not_expected() -> None:
    failure = classify(TypeError("unsupported operand"))
    assert not failure.expected and failure.exit_code == 1 and failure.http_status == 500
    assert failure.message == "internal error: TypeError: unsupported operand"


def test_settings_build_limits_and_round_trip(tmp_path: Path) -> None:
    base = Limits(memory_mb=1024, max_upload_mb=7)
    settings = KernelSettings(isolation="process", timeout_s=30, session_dir=tmp_path)
    limits = settings.limits(base, max_upload_mb=9)
    assert (limits.isolation, limits.timeout_s) == ("process", 30)
    assert (limits.memory_mb, limits.max_upload_mb) == (1024, 9)
    assert KernelSettings().limits() == Limits()
    assert KernelSettings.from_dict(settings.to_dict()) == settings
    model = ModelSettings(spec="openai:gpt-4o-mini", images="off", max_steps=3)
    assert ModelSettings.from_dict(model.to_dict()) == model
    with pytest.raises(ValueError, match="images must be one of"):
        ModelSettings(images="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="isolation must be one of"):
        KernelSettings(isolation="vm")


def test_flags_are_defined_once() -> None:
    parser = argparse.ArgumentParser()
    add_kernel_flags(parser)
    add_model_flags(parser, required=False)
    args = parser.parse_args(["--timeout", "5", "--memory", "512", "--model", "a:b", "--images", "on"])
    assert kernel_settings(args) == KernelSettings(timeout_s=5, memory_mb=512)
    assert model_settings(args) == ModelSettings(spec="a:b", images="on")
    assert model_settings(args).attempts_time_share == 0.5  # the library's default
    for given, share in (("0.25", 0.25), ("0", 0.0), ("none", None)):
        args = parser.parse_args(["--model", "a:b", "--attempts-time-share", given])
        assert model_settings(args).attempts_time_share == share
    with pytest.raises(SystemExit):
        parser.parse_args(["--attempts-time-share", "-1"])


def test_the_question_timeout_reaches_the_analyst(tmp_path: Path) -> None:
    from kernel_analyst.agent.loop.settings import QUESTION_TIMEOUT_S
    from kernel_analyst.agent.testing import ScriptedChatModel
    from kernel_analyst.frontend.models import build_analyst
    from kernel_analyst.frontend.settings import DEFAULT_QUESTION_TIMEOUT_S
    from kernel_analyst.kernels import SessionManager
    from kernel_analyst.server.config import ServerConfig

    assert DEFAULT_QUESTION_TIMEOUT_S == QUESTION_TIMEOUT_S
    for seconds in (90.0, None):
        settings = ServerConfig(question_timeout_s=seconds).model_settings
        analyst = build_analyst(ScriptedChatModel(script=[]), SessionManager(tmp_path), settings)
        assert analyst.settings.question_timeout_s == seconds
    parser = argparse.ArgumentParser()
    add_model_flags(parser, required=False)
    assert model_settings(parser.parse_args([])).question_timeout_s == QUESTION_TIMEOUT_S
    assert model_settings(parser.parse_args(["--question-timeout", "none"])).question_timeout_s is None
    assert model_settings(parser.parse_args(["--question-timeout", "600"])).question_timeout_s == 600.0
    for bad in ("0", "-5", "soon"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--question-timeout", bad])
    with pytest.raises(ValueError, match="question timeout"):
        ModelSettings(question_timeout_s=0)


def test_the_attempts_time_share_reaches_the_analyst(tmp_path: Path) -> None:
    from kernel_analyst.agent.loop.attempts import TIME_SHARE
    from kernel_analyst.agent.testing import ScriptedChatModel
    from kernel_analyst.frontend.models import build_analyst
    from kernel_analyst.frontend.settings import DEFAULT_ATTEMPTS_TIME_SHARE
    from kernel_analyst.kernels import SessionManager
    from kernel_analyst.server.config import ServerConfig

    assert DEFAULT_ATTEMPTS_TIME_SHARE == TIME_SHARE
    for share in (0.25, None):
        settings = ServerConfig(attempts_time_share=share).model_settings
        analyst = build_analyst(ScriptedChatModel(script=[]), SessionManager(tmp_path), settings)
        assert analyst.settings.attempts_time_share == share
    with pytest.raises(ValueError, match="time share"):
        ModelSettings(attempts_time_share=-0.5)


def _report(**changes: object) -> EdaReport:
    report = EdaReport(file="t.csv", notebook_path=Path("audit.ipynb"), plan=object())  # type: ignore[arg-type]
    for key, value in changes.items():
        setattr(report, key, value)
    return report


def test_outcomes_are_honest() -> None:
    unread = eda_outcome(_report(plan=None, error="book.xlsx: this is a ZIP archive"))
    assert unread.status == "failed"
    assert unread.summary == "EDA of t.csv failed: book.xlsx: this is a ZIP archive"
    steps = [StepResult("load", "Loading", "ok", 0.1), StepResult("dates", "Date ranges", "error", 0.1,
                                                                   "ValueError: bad date")]
    failed = eda_outcome(_report(steps=steps))
    assert failed.status == "failed"
    assert failed.summary == "EDA of t.csv: 1 of 2 cells failed. Date ranges: ValueError: bad date"
    assert eda_outcome(_report(steps=steps[:1])).summary == "EDA of t.csv: 1 cells, all ran without error."
    assert stopped_eda("t.csv", 3, 12, "Missing values").summary == (
        "EDA of t.csv stopped at step 3 of 12 (Missing values).")
    answer = Answer(text="", steps=[], notebook_path=Path("a"), stop_reason="error",
                    error="the model call failed: boom")
    assert answer_outcome(answer).status == "failed" and "boom" in answer_outcome(answer).summary


def test_an_error_view_leads_with_the_summary() -> None:
    view = ErrorView.build("KeyError", "'zz'", CHAINED_TRACEBACK)
    assert view.summary == "KeyError: 'zz'" and not view.interrupted
    assert view.trimmed_text.startswith("Cell In[2], line 1") and "KeyError: 'zz'" not in view.trimmed_text
    assert "site-packages" not in view.trimmed_text and "site-packages" in view.full
    assert view.folded_note() == "1 library frame folded"
    stopped = ErrorView.from_error(ExecutionError("KeyboardInterrupt", "", []))
    assert stopped.interrupted and stopped.summary == "interrupted (KeyboardInterrupt)"


def test_no_host_path_outside_the_session() -> None:
    traceback = [
        "Cell In[3], line 2\n----> 2 helper.load('x')\n",
        "File /example/sessions/abc/work/helper.py:7, in load(name)\n----> 7 return json.loads(name)\n",
        "File /usr/lib/python3.11/json/__init__.py:346, in loads(s)\n--> 346 return decoder.decode(s)\n",
        "File /opt/tools/vendor/custom/decoder.py:9, in decode(s)\n----> 9 raise ValueError(s)\n",
        "ValueError: x",
    ]
    frames, omitted = trim_traceback(traceback, workdir="/example/sessions/abc/work")
    text = "\n".join(frames)
    assert "File helper.py:7" in text and "/example" not in text and "/usr/lib" not in text
    assert "File …/custom/decoder.py:9" in text and "/opt" not in text and omitted == 1
    whole, _ = trim_traceback([*traceback[:2], traceback[2]], workdir=None)
    assert "File json/__init__.py:346" in "\n".join(whole)


class _Seen(frontend.AgentEventHandler):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def step_code(self, event: StepCode) -> None:
        self.seen.append(f"code:{event.code}")

    def model_text(self, event: ModelText) -> None:
        self.seen.append(f"text:{event.text}")


def test_events_are_dispatched_by_type() -> None:
    handler = _Seen()
    answer = Answer(text="", steps=[], notebook_path=Path("a"), stop_reason="answered")
    for event in (StepCode(1, "1 + 1"), ModelText("thinking"), FinalAnswer(answer)):
        handler.dispatch(event)
    assert handler.seen == ["code:1 + 1", "text:thinking"]
    with pytest.raises(TypeError, match="not an agent event"):
        handler.dispatch("step_code")  # type: ignore[arg-type]


def test_the_console_reads_cells_as_python_does() -> None:
    assert code_is_complete("x = 1\n")
    assert not code_is_complete("for i in range(3):\n")
    assert not code_is_complete("for i in range(3):\n    print(i)\n")  # the blank line after it ends it
    assert not code_is_complete("x = (1,\n") and not code_is_complete("@decorator\n")
    assert code_is_complete("%timeit x\n") and code_is_complete("!ls\n")  # for the kernel to read
    assert code_is_complete("def f(:\n")  # a syntax error goes to the kernel, which reports it


def test_the_interrupt_grace_flag_reaches_the_limits() -> None:
    from kernel_analyst.frontend.flags import add_kernel_flags, kernel_settings
    from kernel_analyst.frontend.settings import KernelSettings
    from kernel_analyst.kernels.limits import Limits

    parser = argparse.ArgumentParser()
    add_kernel_flags(parser)
    given = kernel_settings(parser.parse_args(["--interrupt-grace", "7.5"]))
    assert given.limits().interrupt_grace_s == 7.5
    assert KernelSettings.from_dict(given.to_dict()) == given
    assert kernel_settings(parser.parse_args([])).limits().interrupt_grace_s == Limits().interrupt_grace_s
    with pytest.raises(ValueError, match="interrupt grace must be positive"):
        KernelSettings(interrupt_grace_s=0)
