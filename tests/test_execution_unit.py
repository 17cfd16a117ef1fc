"""Output handling fed with scripted IOPub messages (no kernel)."""

from __future__ import annotations

import base64
from typing import Any

from kernel_analyst.kernels.execution import (
    Execution,
    ExecutionError,
    OutputCollector,
    VariableChanges,
    VariableInfo,
    strip_ansi,
)


def stream(text: str, name: str = "stdout") -> tuple[str, dict[str, Any]]:
    return "stream", {"name": name, "text": text}


Msg = tuple[str, dict[str, Any]]


def display(data: str, display_id: str | None = None, kind: str = "display_data") -> Msg:
    content: dict[str, Any] = {"data": {"text/plain": data}, "metadata": {}}
    if display_id:
        content["transient"] = {"display_id": display_id}
    if kind == "execute_result":
        content["execution_count"] = 3
    return kind, content


def feed(collector: OutputCollector, *msgs: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    for msg_type, content in msgs:
        collector.handle(msg_type, content)
    return collector.outputs


def test_consecutive_streams_merge_but_not_across_names() -> None:
    outs = feed(OutputCollector(), stream("a"), stream("b"), stream("e", "stderr"), stream("c"))
    assert [(o["name"], o["text"]) for o in outs] == [("stdout", "ab"), ("stderr", "e"), ("stdout", "c")]


def test_clear_output_immediate_and_wait() -> None:
    c = OutputCollector()
    feed(c, stream("1"), ("clear_output", {"wait": False}), stream("2"))
    assert [o["text"] for o in c.outputs] == ["2"]
    feed(c, ("clear_output", {"wait": True}))
    assert [o["text"] for o in c.outputs] == ["2"], "wait=True keeps output until the next one"
    feed(c, stream("3"))
    assert [o["text"] for o in c.outputs] == ["3"]


def test_clear_wait_without_later_output_keeps_output() -> None:
    c = feed(OutputCollector(), stream("Hello world"), ("clear_output", {"wait": True}))
    assert c == [{"output_type": "stream", "name": "stdout", "text": "Hello world"}]


def test_update_display_data_replaces_in_place_and_reports_foreign() -> None:
    foreign: list[tuple[str, dict[str, Any]]] = []
    c = OutputCollector(on_foreign_update=lambda did, out: foreign.append((did, out)))
    feed(c, display("1", "here"), display("x"), display("2", "here"))
    assert [o["data"]["text/plain"] for o in c.outputs] == ["2", "x", "2"]
    feed(c, ("update_display_data", {"data": {"text/plain": "9"}, "metadata": {},
                                     "transient": {"display_id": "here"}}))
    assert [o["data"]["text/plain"] for o in c.outputs] == ["9", "x", "9"]
    assert len(c.outputs) == 3, "an update never adds an output"
    assert [did for did, _ in foreign] == ["here", "here", "here"]


def test_cleared_display_is_no_longer_updated() -> None:
    c = OutputCollector()
    feed(c, display("a", "id4"), ("clear_output", {"wait": True}), stream("world"))
    feed(c, ("update_display_data", {"data": {"text/plain": "new"}, "metadata": {},
                                     "transient": {"display_id": "id4"}}))
    assert c.outputs == [{"output_type": "stream", "name": "stdout", "text": "world"}]


def test_error_is_recorded_without_ansi() -> None:
    c = OutputCollector()
    feed(c, ("error", {"ename": "ValueError", "evalue": "bad",
                       "traceback": ["\x1b[0;31mValueError\x1b[0m: bad"]}))
    assert c.error == ExecutionError("ValueError", "bad", ["ValueError: bad"])
    assert c.outputs[0]["traceback"] == ["\x1b[0;31mValueError\x1b[0m: bad"], "notebook keeps colours"


def test_text_cap_counts_exactly() -> None:
    c = OutputCollector(max_text_bytes=10)
    feed(c, stream("0123456"), stream("789abc"), stream("def"))
    assert c.outputs[0]["text"] == "0123456789"
    assert c.dropped_bytes == 6


def test_rich_cap_drops_whole_outputs() -> None:
    c = OutputCollector(max_rich_bytes=5)
    feed(c, display("abc"), display("defgh"))
    assert len(c.outputs) == 1
    assert c.dropped_bytes == 5


def test_execution_views_and_round_trip() -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    ex = Execution(
        code="x", status="error", execution_count=4,
        outputs=[
            {"output_type": "stream", "name": "stdout", "text": "hi\n"},
            {"output_type": "display_data", "data": {"image/png": png, "text/plain": "<Figure>"},
             "metadata": {}},
            {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["\x1b[31mE: v\x1b[0m"]},
        ],
        error=ExecutionError("E", "v", ["E: v"]),
        variables=VariableChanges(created=[VariableInfo("df", "pandas.DataFrame", [3, 2])],
                                  deleted=["old"]),
    )
    assert ex.text == "hi\n<Figure>\nE: v\n"
    assert ex.images == [b"\x89PNG fake"]
    again = Execution.from_dict(ex.to_dict())
    assert again.to_dict() == ex.to_dict()
    assert ex.variables.describe() == "created df: pandas.DataFrame (3, 2); deleted old"


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[1;32mok\x1b[0m \x1b]0;title\x07done") == "ok done"
