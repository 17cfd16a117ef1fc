"""The judge's test scaffolding: a turn's facts, a question's judge, a reply read, a step and an
audit-trail cell, made up with no kernel and no model (tests/test_judge.py, and the tests of
single policies that go through the judge)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernel_analyst.agent.feedback import Judge, JudgeSettings, QuestionFacts, TurnFacts
from kernel_analyst.agent.feedback.hints import ErrorTeacher
from kernel_analyst.agent.protocols import ProtocolState, Reading
from kernel_analyst.agent.results import Step
from kernel_analyst.kernels import ColumnValues, Execution, ExecutionError, VariableChanges, VariableInfo

TOOL = "python"


def Facts(*, steps: Sequence[Step] = (), cells: Sequence[dict[str, Any]] = (),
          variables: dict[str, VariableInfo] | None = None, protocol: ProtocolState | None = None,
          failed: bool = False, pending: bool = False,
          columns: dict[tuple[str, str], ColumnValues] | None = None,
          told: Sequence[str] = ()) -> TurnFacts:
    """The turn as the judge reads it (the loop takes this snapshot of its turn)."""
    async def lookup(frame: str, column: str, values: tuple[Any, ...]) -> ColumnValues | None:
        return (columns or {}).get((frame, column))

    return TurnFacts(tuple(steps), tuple(cells), variables or {}, protocol or ProtocolState("tools"), failed,
                     lambda: pending, lookup, tuple(told))


def judge(question: str = "How many rows?", *, max_steps: int = 15, has_files: bool = False,
          cells_before: int = 0, first_cell: int = 0, table_rows: tuple[int, ...] = (),
          teacher: ErrorTeacher | None = None, **settings: Any) -> Judge:
    facts = QuestionFacts(question, (), has_files, cells_before, first_cell, table_rows)
    return Judge(JudgeSettings(max_steps=max_steps, tool_name=TOOL, **settings), facts, teacher=teacher)


def read(text: str, *, protocol: str = "code", calls: Sequence[dict[str, Any]] = ()) -> Reading:
    return ProtocolState(protocol).read(text, calls, tool_name=TOOL)  # type: ignore[arg-type]


def step(index: int, code: str, *, error: str | None = None, changed: Sequence[VariableInfo] = (),
         printed: str = "", count: int | None = None) -> Step:
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
    ex = Execution(code=code, status="error" if error else "ok", outputs=outputs,
                   error=ExecutionError(*error.split(": ", 1), []) if error else None,
                   variables=VariableChanges(changed=list(changed)), execution_count=count)
    return Step(index, code, ex, "")


def cell(count: int, source: str, printed: str, *, role: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"status": "ok"} | ({"role": role} if role else {})
    return {"cell_type": "code", "id": f"c{count}", "execution_count": count, "source": source,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": printed + "\n"}],
            "metadata": {"kernel_analyst": meta}}


__all__ = ["TOOL", "Facts", "cell", "judge", "read", "step"]
