"""A column replaced by a transform of itself a second time (agent/feedback/reapplied.py):
the line after the step that did it again."""

from __future__ import annotations

import pytest

from kernel_analyst.agent.feedback import Judge, JudgeSettings, QuestionFacts, StepFacts
from kernel_analyst.agent.feedback.reapplied import reapplied, self_transforms
from kernel_analyst.kernels import Execution
from tests.dseval_problems import reference_cells
from tests.judge_cases import Facts, cell

LOG = "df['importance.score'] = np.log(df['importance.score'])"


@pytest.mark.parametrize(("code", "column"), [
    (LOG, "importance.score"),  # DABench hard 39 with the 1.5B model, sent twice
    ("df['Gender'] = df['Gender'].map({'Male': 0, 'Female': 1})", "Gender"),  # NaN the second time
    ("df.loc[:, 'fare'] = df['fare'] * 1.1", "fare"),
    ("df['x'] += 1", "x"),
    ("df['x'] = np.sqrt(df['x'] + 1)", "x"),
])
def test_a_transform_that_changes_again_is_found(code: str, column: str) -> None:
    assert [t.column for t in self_transforms(code)] == [column]


@pytest.mark.parametrize("code", [
    "df['x'] = df['x'].astype(int)",
    "df['x'] = df['x'].fillna(0)",
    "df['x'] = df['x'].str.strip()",
    "df['x'] = (df['x'] - df['x'].min()) / (df['x'].max() - df['x'].min())",  # min-max: the same twice
    "df['x'] = (df['x'] - df['x'].mean()) / df['x'].std()",
    "df['y'] = np.log(df['x'])",  # a new column: running it again changes nothing
    "x = np.log(df['x'])",
    "df['x'] = (",  # not Python
])
def test_a_transform_that_is_the_same_twice_is_not(code: str) -> None:
    assert self_transforms(code) == []


def test_the_earlier_cell_that_did_it_is_named() -> None:
    before = [(3, "import numpy as np"), (4, LOG + "\nprint(df['importance.score'].mean())"), (5, "print(1)")]
    found = reapplied(LOG + "\nprint(df['importance.score'].mean())", before)
    assert [(t.column, count) for t, count in found] == [("importance.score", 4)]
    assert reapplied(LOG, [(3, "df['other'] = np.log(df['other'])")]) == []


async def test_the_step_that_does_it_again_is_told_beside_its_output() -> None:
    """Through the judge: the standing cells are read from the notebook, an undone one is not."""
    asked = QuestionFacts("Log-transform the importance score; what is its mean?", has_files=True)
    judge = Judge(JudgeSettings(), asked)
    ran = Execution(code=LOG, status="ok", execution_count=5)
    first = cell(4, LOG, "")
    said = await judge.after_step(StepFacts(LOG, ran), Facts(cells=[first, cell(5, LOG, "")]))
    assert [r.key for r in said.reasons] == ["transformed_again"], said
    text = "\n".join(said.notes)
    assert "replaced `df['importance.score']` with a transform of itself, and cell [4] had done" in text, text
    first["metadata"]["kernel_analyst"]["undone"] = True
    said = await judge.after_step(StepFacts(LOG, ran), Facts(cells=[first, cell(5, LOG, "")]))
    assert "transform of itself" not in "\n".join(said.notes)


def test_no_column_of_dseval_is_transformed_again_by_its_authors() -> None:
    """Each DSEval set's reference cells in order, as one conversation: none replaces a column
    by a transform of itself that an earlier cell already did (396 questions)."""
    before: dict[str, list[tuple[int | None, str]]] = {}
    found = []
    for name, question, code in reference_cells():
        cells = before.setdefault(name, [])
        found += [(name, question[:60], t.text) for t, _ in reapplied(code, cells)]
        cells.append((len(cells), code))
    assert sum(len(cells) for cells in before.values()) >= 350
    assert found == []
