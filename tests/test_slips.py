"""Code that computes a near neighbour of what the question asks (agent/feedback/slips.py):
the lines the model reads after the step, from the question's words and the step's code."""

from __future__ import annotations

import pytest

from kernel_analyst.agent.feedback.slips import slips_in

POPULATION = ("Calculate the mean and standard deviation of the fare. Calculate the arithmetic mean and "
              "population standard deviation (σ).")  # DABench easy 129
RMSE = "Evaluate the model with the Root Mean Square Error (RMSE) evaluation metric only."  # hard 30
SAMPLE = "Report the sample standard deviation of the ages."


@pytest.mark.parametrize(("question", "code", "says"), [
    (POPULATION, "print(round(df['Fare'].std(), 2))", "`.std(ddof=0)`"),
    (POPULATION, "df.groupby('Pclass')['Fare'].agg(['mean', 'median', 'std'])", "`.std(ddof=0)`"),
    (POPULATION, "import statistics\nprint(statistics.stdev(df.Fare))", "`.std(ddof=0)`"),
    (RMSE, "mse = mean_squared_error(y_test, pred)\nprint(round(mse, 2))", "np.sqrt(mean_squared_error"),
    (SAMPLE, "print(np.std(df.age))", "ddof=1"),
])
def test_a_slip_is_named_with_what_to_use(question: str, code: str, says: str) -> None:
    found = slips_in(question, code)
    assert len(found) == 1 and found[0].key == "slip" and says in found[0].text, found


@pytest.mark.parametrize(("question", "code"), [
    (POPULATION, "print(df['Fare'].std(ddof=0))"),
    (POPULATION, "print(np.std(df['Fare']))"),  # numpy divides by n already
    (POPULATION, "import statistics\nprint(statistics.pstdev(df.Fare))"),
    (RMSE, "print(np.sqrt(mean_squared_error(y_test, pred)))"),
    (RMSE, "print(mean_squared_error(y_test, pred) ** 0.5)"),
    (RMSE, "print(root_mean_squared_error(y_test, pred))"),
    (SAMPLE, "print(df.age.std())"),
    # DABench 722: "the population standard deviation formula, not the sample standard deviation"
    ("Use the population standard deviation formula, not the sample standard deviation formula.",
     "print(np.std(df.hp))"),
    ("What is the standard deviation of the fare?", "print(df.Fare.std())"),  # not asked: no slip
    ("What is the mean squared error?", "print(mean_squared_error(y, p))"),
])
def test_code_that_does_what_is_asked_is_no_slip(question: str, code: str) -> None:
    assert slips_in(question, code) == []
