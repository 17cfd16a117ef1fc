"""What the loop reads from words alone: whether a question asks to change the person's data
(:mod:`kernel_analyst.agent.feedback.intent`), and whether a reply streaming in runs away
(:mod:`kernel_analyst.agent.feedback.runaway`)."""

from __future__ import annotations

import pytest

from kernel_analyst.agent.feedback.intent import asks_to_change
from kernel_analyst.agent.feedback.runaway import MAX_BLOCK_LINES, runaway


@pytest.mark.parametrize("question", [
    "Drop the rows with a missing age.",
    "From now on, leave out the planets with no distance. How many are left?",
    "Fill the missing fares with the median fare.",
    "Keep only the passengers of first class.",
    "Convert the date column to datetime.",
    "Add a new column with the price per carat.",
    "Create a feature that is the ratio of tip to total bill.",
    "Rename 'sex' to 'gender'.",
    "Remove duplicate rows in place.",
])
def test_a_question_that_asks_to_change_the_data(question: str) -> None:
    assert asks_to_change(question)


@pytest.mark.parametrize("question", [
    "How many passengers survived?",
    "What is the mean fare of first-class passengers?",
    "Of the remaining planets, how many were found by transit?",
    "Which island has the heaviest penguins on average?",
    "Plot the distribution of the total bill.",
    "Is there a correlation between price and carat?",
])
def test_a_question_that_only_asks_about_the_data(question: str) -> None:
    assert not asks_to_change(question)


def test_a_reply_is_no_runaway_while_it_reads_like_one() -> None:
    reply = ("The table has a column per measurement.\n```python\n"
             + "\n".join(f"print(df['c{i}'].mean())" for i in range(30)) + "\n```\nThe means are above.")
    assert runaway(reply) is None
    assert runaway("") is None
    assert runaway("```python\nprint(1)\n") is None


def test_the_same_line_again_and_again_runs_away() -> None:
    assert runaway("Let me check.\n" + "print(df.head())\n" * 5) == "the same line again and again"
    assert runaway("Let me check.\n" + "print(df.head())\n" * 3) is None


def test_the_same_text_again_and_again_runs_away() -> None:
    assert runaway("The answer is " + "0.25, 0.25, " * 4) == "the same text again and again"
    assert runaway("The answer is " + "0.25, 0.25, " * 2) is None


def test_a_code_block_that_keeps_growing_runs_away_and_a_closed_one_does_not() -> None:
    lines = "\n".join(f"x{i} = {i}" for i in range(MAX_BLOCK_LINES + 2))
    assert runaway("```python\n" + lines) == "a code block that kept growing"
    assert runaway("```python\n" + lines + "\n```\nDone.") is None
