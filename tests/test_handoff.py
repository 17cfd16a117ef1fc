"""Pure parts of the Jupyter handoff: the agent's one line on what a person ran by hand,
and the kernel websocket frames (both protocols) round-tripping and refusing garbage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel_analyst.agent.briefing.handoff import describe, hand_cells, handoff_note, variable_changes
from kernel_analyst.kernels.launch.wsframes import decode_legacy, decode_v1, encode_legacy, encode_v1


def _md(role: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "source": role, "metadata": {"kernel_analyst": {"role": role}}}


def _code(source: str, *, by: str | None = None, created: tuple[str, ...] = (), changed: tuple[str, ...] = (),
          deleted: tuple[str, ...] = (), status: str = "ok") -> dict[str, Any]:
    meta: dict[str, Any] = {"status": status, "variables": {
        "created": [{"name": n, "type": "int"} for n in created],
        "changed": [{"name": n, "type": "int"} for n in changed], "deleted": list(deleted)}}
    if by:
        meta["by"] = by
    return {"cell_type": "code", "source": source, "metadata": {"kernel_analyst": meta}}


def test_the_line_names_the_persons_cells_since_the_last_answer() -> None:
    cells = [_md("question"), _code("df = load()", created=("df",)), _md("answer"),
             _code("df.shape", by="person"), _code("model = fit(df)", by="person", created=("model",)),
             _code("df['x'] = 1", by="person", changed=("df",)), _md("question"),
             _code("t = read('new.csv')", created=("t",))]  # the agent's table, after the question
    assert [c["source"] for c in hand_cells(cells)] == ["df.shape", "model = fit(df)", "df['x'] = 1"]
    assert handoff_note(cells) == "\n3 cells run by hand since your last answer: created model; changed df"
    # Nothing by hand: no line; an earlier turn's cells are not counted again.
    assert handoff_note([*cells, _md("answer"), _md("question")]) == ""


def test_variables_made_and_dropped_by_hand_and_failures() -> None:
    cells = [_code("tmp = 1", by="person", created=("tmp",)), _code("del tmp", by="person", deleted=("tmp",)),
             _code("del old", by="person", deleted=("old",)), _code("1/0", by="person", status="error")]
    assert variable_changes(cells) == {"created": [], "changed": [], "deleted": ["old"]}
    assert describe(cells) == "4 cells run by hand since your last answer: deleted old; 1 failed"
    assert describe([_code("df.head()", by="person")]) == \
        "1 cell run by hand since your last answer: no variable changed"


MESSAGE = {"header": {"msg_id": "a1", "msg_type": "comm_msg", "session": "s", "date": "2026-11-26T00:00:00Z"},
           "parent_header": {}, "metadata": {"k": 1}, "content": {"data": {"v": "é"}}}


@pytest.mark.parametrize("buffers", [[], [b"\x00\x01binary", b""]])
def test_frames_round_trip_in_both_protocols(buffers: list[bytes]) -> None:
    msg = {**MESSAGE, "buffers": buffers}
    legacy = encode_legacy("shell", msg)
    assert isinstance(legacy, str if not buffers else bytes)
    for channel, back in (decode_legacy(legacy), decode_v1(encode_v1("shell", msg))):
        assert channel == "shell"
        assert {k: back[k] for k in MESSAGE} == MESSAGE and [bytes(b) for b in back["buffers"]] == buffers


@pytest.mark.parametrize("frame", ["{", json.dumps([1]), b"\x00", b"\x00\x00\x00\x05abc",
                                   b"\x00\x00\x00\x00"])
def test_legacy_garbage_is_refused(frame: str | bytes) -> None:
    with pytest.raises(ValueError):
        decode_legacy(frame)


@pytest.mark.parametrize("frame", ["text", b"\x01", (2).to_bytes(8, "little") + b"\x00" * 16,
                                   (6).to_bytes(8, "little") + b"\xff" * 48])
def test_v1_garbage_is_refused(frame: str | bytes) -> None:
    with pytest.raises(ValueError):
        decode_v1(frame)
