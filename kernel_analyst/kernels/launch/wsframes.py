"""Jupyter's kernel websocket frames (``/api/kernels/{id}/channels``), in both protocols.

One owner for the wire format, used by the gateway client (``gateway.py``: this process
talking to a Kernel Gateway) and by the service's own kernel API (the service talking to
JupyterLab, VS Code or any Jupyter client):

- **legacy** (no subprotocol): a message is JSON text with a ``channel`` field; one with
  binary buffers travels as a binary frame: the number of parts and each part's offset
  (big-endian uint32), then the JSON, then each buffer (jupyter_server's
  ``serialize_binary_message``).
- **v1** (subprotocol ``v1.kernel.websocket.jupyter.org``): every frame is binary: the
  number of offsets and the offsets (little-endian uint64), then the channel name, the
  header, parent header, metadata and content (JSON each), then the buffers
  (jupyter_server's ``serialize_msg_to_ws_v1``).

Decoders raise :class:`ValueError` for a frame that is not a message (bad offsets, bad
JSON, a part that is not an object), so a caller can refuse it with a reason.
"""

from __future__ import annotations

import itertools
import json
import struct
from typing import Any

from jupyter_client.jsonutil import json_default

V1_PROTOCOL = "v1.kernel.websocket.jupyter.org"
"""The subprotocol of the binary framing."""
_PARTS = ("header", "parent_header", "metadata", "content")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, default=json_default, ensure_ascii=False).encode("utf-8")


def encode_legacy(channel: str, msg: dict[str, Any]) -> str | bytes:
    """``msg`` as a legacy frame: JSON text, or binary when it carries buffers."""
    buffers = [bytes(b) for b in msg.get("buffers") or []]
    body = {**{k: v for k, v in msg.items() if k != "buffers"}, "channel": channel, "buffers": []}
    if not buffers:
        return json.dumps(body, default=json_default, ensure_ascii=False)
    parts = [_dumps(body), *buffers]
    offsets = [4 * (len(parts) + 1)]
    for part in parts[:-1]:
        offsets.append(offsets[-1] + len(part))
    return struct.pack(f"!{len(parts) + 1}I", len(parts), *offsets) + b"".join(parts)


def decode_legacy(frame: str | bytes) -> tuple[str, dict[str, Any]]:
    """(channel, message) from a legacy frame."""
    if isinstance(frame, str):
        msg = _object(frame)
        msg["buffers"] = []
    else:
        if len(frame) < 4 or 4 * (int.from_bytes(frame[:4], "big") + 1) > len(frame):
            raise ValueError("a binary frame too short for its offsets")
        (count,) = struct.unpack_from("!I", frame)
        offsets = [*struct.unpack_from(f"!{count}I", frame, 4), len(frame)]
        if count < 1:
            raise ValueError("a binary frame with no message in it")
        _check_offsets(offsets, len(frame))
        msg = _object(frame[offsets[0]:offsets[1]])
        msg["buffers"] = [frame[offsets[i]:offsets[i + 1]] for i in range(1, count)]
    channel = msg.pop("channel", "")
    return (channel if isinstance(channel, str) else ""), msg


def encode_v1(channel: str, msg: dict[str, Any]) -> bytes:
    """``msg`` as a v1 frame."""
    parts = [channel.encode("utf-8"), *(_dumps(msg.get(k) or {}) for k in _PARTS),
             *(bytes(b) for b in msg.get("buffers") or [])]
    offsets = [8 * (len(parts) + 2)]
    for part in parts:
        offsets.append(offsets[-1] + len(part))
    head = b"".join(n.to_bytes(8, "little") for n in (len(offsets), *offsets))
    return head + b"".join(parts)


def decode_v1(frame: str | bytes) -> tuple[str, dict[str, Any]]:
    """(channel, message) from a v1 frame."""
    if isinstance(frame, str):
        raise ValueError("the v1 protocol sends binary frames only")
    if len(frame) < 8:
        raise ValueError("a frame too short for its offsets")
    count = int.from_bytes(frame[:8], "little")
    if count < 2 + len(_PARTS) or 8 * (count + 1) > len(frame):
        raise ValueError(f"a frame with {count} offsets cannot hold a message")
    offsets = [int.from_bytes(frame[8 * (i + 1):8 * (i + 2)], "little") for i in range(count)]
    _check_offsets(offsets, len(frame))
    parts = [frame[offsets[i]:offsets[i + 1]] for i in range(count - 1)]
    try:
        channel = parts[0].decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the channel name is not UTF-8") from None
    msg: dict[str, Any] = {k: _object(part) for k, part in zip(_PARTS, parts[1:5], strict=True)}
    msg["buffers"] = parts[5:]
    return channel, msg


def _object(data: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__} where an object belongs")
    return value


def _check_offsets(offsets: list[int], size: int) -> None:
    if any(b < a for a, b in itertools.pairwise(offsets)) or offsets[0] < 0 or offsets[-1] > size:
        raise ValueError("the frame's offsets do not fit it")


__all__ = ["V1_PROTOCOL", "decode_legacy", "decode_v1", "encode_legacy", "encode_v1"]
