"""Helpers of the conversation that need no session: versions, message decoding, output callbacks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

OutputCallback = Callable[[dict[str, Any]], Any]
"""Called with each output (or stream chunk) as it arrives; may be sync or async."""


def package_versions() -> dict[str, str | None]:
    """Python and the analysis packages' versions in this interpreter (the kernel's own
    ``_kernel_analyst.versions()`` answers the same for other environments)."""
    import platform
    from importlib import metadata

    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("pandas", "numpy", "matplotlib", "ipykernel"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def expression_json(result: Any) -> Any:
    """Decode a user_expressions entry whose text/plain is JSON."""
    if not isinstance(result, dict) or result.get("status") != "ok":
        return None
    text = result.get("data", {}).get("text/plain")
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        try:  # a str result comes back as its repr
            import ast

            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None
    return value


def callback_adapter(callback: OutputCallback | None) -> Callable[[dict[str, Any]], None] | None:
    """Let output callbacks be sync or async; async ones run as tasks."""
    if callback is None:
        return None
    pending: set[asyncio.Task[Any]] = set()

    def call(out: dict[str, Any]) -> None:
        result = callback(dict(out))
        if asyncio.iscoroutine(result):
            task = asyncio.ensure_future(result)
            pending.add(task)
            task.add_done_callback(pending.discard)

    return call


def column_values_expression(frame: str, column: str, values: Sequence[Any], limit: int) -> str | None:
    """The kernel expression behind ``KernelSession.column_values`` (None for a frame name
    that is not an identifier); only plain finite literals are passed on."""
    if not frame.isidentifier():
        return None
    literals = [v for v in values if isinstance(v, (str, bool))
                or (isinstance(v, (int, float)) and v == v and abs(v) != float("inf"))]
    return f"_kernel_analyst.column_values({frame!r}, {column!r}, {literals!r}, {int(limit)})"
