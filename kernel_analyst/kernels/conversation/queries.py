"""What a conversation is asked about its kernel without adding a cell: the variables, a
variable's value, a column's values, and a client's own requests that are not cells.

Each takes the conversation's turn (``turn.py``) and a ready kernel (``restoring.py``:
lost variables come back first), like a cell, so an answer never reflects half a cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..exceptions import VariableFetchError
from ..execution import ColumnValues, VariableInfo
from ..launch import Channel, MessageTap, deadline_after
from . import relay
from ._support import column_values_expression
from .lifecycle import Lifecycle
from .restoring import Restoring
from .runs import Runs
from .turn import Turn


class Queries:
    """The kernel's answers to questions about its state, in the session's turn."""

    def __init__(self, turn: Turn, kernel: Lifecycle, restoring: Restoring, runs: Runs) -> None:
        self._turn, self._kernel, self._restoring, self._runs = turn, kernel, restoring, runs

    async def _evaluate(self, expression: str, timeout: float) -> Any:
        async with self._turn.taken():
            await self._restoring.ready(None)
            return await self._kernel.evaluate(expression, timeout)

    async def variables(self) -> list[VariableInfo]:
        self._turn.check_open()
        self._runs.check_idle("list the variables")
        data = await self._evaluate("_kernel_analyst.variables()", 10.0)
        return [VariableInfo.from_dict(d) for d in data] if isinstance(data, list) else []

    async def fetch(self, name: str, format: Literal["records", "csv"], max_bytes: int) -> Any:
        self._turn.check_open()
        if not name.isidentifier():
            raise VariableFetchError(f"{name!r} is not a variable name")
        self._runs.check_idle(f"fetch {name!r}")
        data = await self._evaluate(f"_kernel_analyst.fetch({name!r}, {format!r}, {int(max_bytes)})", 60.0)
        if not isinstance(data, dict):
            raise VariableFetchError(f"could not fetch {name!r}: the kernel did not answer")
        if "error" in data:
            raise VariableFetchError(str(data["error"]))
        return data["value"]

    async def column_values(self, frame: str, column: str, values: Sequence[Any],
                            limit: int) -> ColumnValues | None:
        self._turn.check_open()
        expression = column_values_expression(frame, column, values, limit)
        if expression is None or self._runs.active is not None:
            return None
        return ColumnValues.from_dict(await self._evaluate(expression, 10.0))

    async def forward(self, msg: dict[str, Any], tap: MessageTap, channel: Channel,
                      timeout: float | None) -> None:
        """Relay a client's request that is not an execute request (``relay.forward``)."""
        async with self._turn.taken():
            await self._restoring.ready(None)
            kernel = self._kernel.kernel
            assert kernel is not None
            await relay.forward(kernel, channel, msg, tap, deadline=deadline_after(timeout))


__all__ = ["Queries"]
