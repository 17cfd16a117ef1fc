"""The judge, one policy at a time: a made-up reply or step and state, no kernel, no model.

Each test gives the judge what the loop would (a reply read by the protocol, the turn's
facts) and checks the value it returns: :class:`Tell`, :class:`Accept`, :class:`SendBack`,
:class:`RunActions`; :class:`Run`, :class:`Undo`, :class:`Skip`; the lines after a step;
:class:`Stop`. The loop's own tests (tests/test_agent*.py) run it end to end.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest

from kernel_analyst.agent.feedback import (
    Accept,
    Judge,
    JudgeSettings,
    QuestionFacts,
    Rollback,
    Run,
    RunActions,
    SendBack,
    Skip,
    StepFacts,
    Stop,
    Tell,
    Undo,
)
from kernel_analyst.agent.feedback.answers import code_since, printed_since
from kernel_analyst.agent.feedback.keeping import renamed
from kernel_analyst.agent.feedback.rules import stated_rules
from kernel_analyst.agent.protocols import Action, InvalidCall, ProtocolState, Via
from kernel_analyst.kernels import ColumnValues, Execution, ExecutionError, VariableChanges, VariableInfo
from tests.conftest import SEABORN
from tests.judge_cases import TOOL, Facts, cell, judge, read, step


def code(text: str) -> Action:
    return Action(text, Via.PYTHON_FENCE)


# -- replies that are no step ----------------------------------------------------------------------


def test_an_empty_reply_is_told_so() -> None:
    decision = judge().on_reply(read(""), "", Facts())
    assert isinstance(decision, Tell) and decision.reason.key == "empty_reply"
    assert not decision.resample


def test_a_reply_cut_while_it_repeated_itself_is_told_what_it_kept_doing_and_never_runs() -> None:
    text = "```python\nprint(1)\nprint(1)\n"
    decision = judge().on_reply(read(text), text, Facts(), cut="the same line again and again")
    assert isinstance(decision, Tell) and decision.reason.key == "runaway"
    assert "the same line again and again" in decision.reason.text
    assert decision.resample, "a greedy model asked again repeats itself: the next call samples"


def test_a_runaway_before_any_step_about_data_is_told_to_compute_first() -> None:
    """DABench 8: the 1.5B model recited the answer's nine-item form until it was cut, three
    replies in a row, after being told "write it once, short"."""
    form = "@mean_fare_class1[mean_fare], @median_fare_class1[median_fare], " * 20
    cut = "the same text again and again"
    code = Facts(protocol=ProtocolState("code"))
    decision = judge(has_files=True).on_reply(read(form), form, code, cut=cut)
    assert isinstance(decision, Tell) and decision.reason.key == "runaway" and decision.resample
    assert "Do not write the answer yet" in decision.reason.text and "```python block" in decision.reason.text
    tools = judge(has_files=True).on_reply(read(form, protocol="tools"), form,
                                           Facts(protocol=ProtocolState("tools")), cut=cut)
    assert isinstance(tools, Tell) and f"call the `{TOOL}` tool" in tools.reason.text
    after_work = Facts(protocol=ProtocolState("code"), steps=[step(1, "df.Fare.mean()", printed="32.2")])
    later = judge(has_files=True).on_reply(read(form), form, after_work, cut=cut)
    assert isinstance(later, Tell) and "Write it once, short" in later.reason.text


def test_a_reply_cut_at_the_token_limit_is_no_runaway() -> None:
    decision = judge().on_reply(read("It has 3 rows."), "It has 3 rows.", Facts(), cut="limit")
    assert not (isinstance(decision, Tell) and decision.reason.key == "runaway")


ROLLBACK = ("Step 4 failed (TypeError: Invalid comparison between dtype=str and int) and you sent the "
            "same code again, so it was taken back: the kernel's variables are as they were before it.\n"
            "Variables now: df: pandas.DataFrame (856, 11). Take another way: a different method, or "
            "smaller steps that print what they find.")


def test_a_reply_that_echoes_the_agents_message_is_no_answer() -> None:
    # seen on DABench 57: the 1.5B model copied the rollback's notice, and it was the answer
    decision = judge().on_reply(read(ROLLBACK), ROLLBACK, Facts(told=[ROLLBACK]))
    assert isinstance(decision, Tell) and decision.reason.key == "echoed"
    assert "repeated my message" in decision.reason.text
    assert decision.resample


def test_an_answer_that_quotes_a_little_of_the_message_or_an_output_is_an_answer() -> None:
    answer = ("The two columns hold text such as '630308[495000-801000]', so I took the first number "
              "of each value. The correlation is 0.89.")
    told = [ROLLBACK, "Output of your code (step 5):\nThe correlation is 0.89."]
    decision = judge().on_reply(read(answer), answer, Facts(told=told))
    assert isinstance(decision, Accept) or (isinstance(decision, SendBack) and decision.answer == answer)
    quoted = "Take another way: a different method, or smaller steps that print what they find. It is 0.89."
    decision = judge().on_reply(read(quoted), quoted, Facts(told=[ROLLBACK]))
    assert not isinstance(decision, Tell)


    # DABench easy 129: the whole message after a step copied, its output's items and all
    copy = ("The question asks for the population standard deviation.\n\nOutput of your code (step 2):\n"
            "@mean_fare[32.20] @std_dev_fare[49.69]\n\nThe question was: Calculate the mean fare.")
    decision = judge().on_reply(read(copy), copy, Facts(told=[ROLLBACK]))
    assert isinstance(decision, Tell) and decision.reason.key == "echoed"


def test_a_reply_that_copies_a_send_back_with_a_word_changed_is_no_answer() -> None:
    # the conversation benchmark's brussels-hotels with the 1.5B model: the send-back, its first
    # words and its error swapped, was given as the answer
    sent = ("Your answer was not accepted yet:\n- Your last code failed (AttributeError: 'DataFrame' object "
            "has no attribute 'Occupancy_rate'), so no output shows what it was meant to compute. Fix it and "
            "run it, or say plainly which part you could not compute.")
    copy = ("The question was not accepted yet:\n- Your last code failed (KeyError: 'Occupancy_rate'), so no "
            "output shows what it was meant to compute. Fix it and run it, or say plainly which part you "
            "could not compute.")
    decision = judge().on_reply(read(copy), copy, Facts(told=[sent]))
    assert isinstance(decision, Tell) and decision.reason.key == "echoed"
    # the same copy with a number of its own adds a result; an answer in its own words is one
    for answer in (copy.replace("KeyError: 'Occupancy_rate'", "the rate is 81.2%"),
                   "I could not compute it: the table has no column Occupancy_rate, so no output shows it."):
        assert not isinstance(judge().on_reply(read(answer), answer, Facts(told=[sent])), Tell), answer
    question = "Did non-smokers tip a higher percent of the bill than smokers, on average?"
    for answer in ("Yes, non-smokers tip a higher percent of the bill than smokers, on average.",
                   "Non-smokers did not tip a higher percent of the bill than smokers, on average."):
        assert not isinstance(judge().on_reply(read(answer), answer, Facts(told=[question])), Tell), answer


QUESTION = ("Is there a linear relationship between the GDP per capita and the life expectancy score? "
            "Conduct linear regression and use the R-squared to evaluate the fit.\n"
            "Finish with the results in exactly this format: @coefficient_determination[R_square], "
            "@model_fit[model_fit]")


def test_a_reply_that_copies_the_question_is_no_answer() -> None:
    # DABench hard 118 with the 1.5B model: after its step the reply was the question as the
    # output restated it ("The question was: ..."), placeholders and all, and it was the answer
    copy = "The question was: " + QUESTION
    decision = judge().on_reply(read(copy), copy, Facts(told=[QUESTION]))
    assert isinstance(decision, Tell) and decision.reason.key == "echoed"


def test_a_restated_question_with_its_result_is_an_answer() -> None:
    answer = ("Is there a linear relationship between the GDP per capita and the life expectancy score? "
              "Conduct linear regression and use the R-squared to evaluate the fit. It is 0.67.")
    decision = judge().on_reply(read(answer), answer, Facts(told=[QUESTION]))
    assert not isinstance(decision, Tell)


def test_code_alone_under_tools_is_no_answer() -> None:
    reading = read("```python\ndf.shape\n```", protocol="tools")
    decision = judge().on_reply(reading, "```python\ndf.shape\n```", Facts())
    assert isinstance(decision, Tell) and decision.reason.key == "code_in_answer"
    assert "`python` tool" in decision.reason.text


def test_prose_is_the_answer_and_code_is_a_step() -> None:
    assert isinstance(judge().on_reply(read("It has 3 rows."), "It has 3 rows.", Facts()), Accept)
    text = "Let me look.\n```python\nprint(len(df))\n```"
    assert isinstance(judge().on_reply(read(text), text, Facts()), RunActions)


def test_work_shown_again_beside_prose_is_the_whole_reply_as_the_answer() -> None:
    text = "There are 3 rows:\n```python\nprint(len(df))\n```"
    facts = Facts(steps=[step(1, "print(len(df))", printed="3\n")])
    decision = judge().on_reply(read(text), text, facts)
    assert isinstance(decision, Accept) and decision.answer == text


def test_prose_beside_a_wait_with_no_run_is_the_answer() -> None:
    text = "The mean is 4.\n```python\n# kernel-analyst: wait 60\n```"
    decision = judge().on_reply(read(text), text, Facts())
    assert isinstance(decision, Accept) and decision.answer == "The mean is 4."
    assert isinstance(judge().on_reply(read(text), text, Facts(pending=True)), RunActions)


# -- actions -----------------------------------------------------------------------------------


def test_nothing_runs_after_the_kernel_failed() -> None:
    decision = judge().on_action(code("print(1)"), Facts(failed=True))
    assert isinstance(decision, Skip) and decision.reason.key == "after_failure"


def test_a_wait_with_no_background_run_is_no_step_and_uses_no_code_run() -> None:
    j = judge()
    decision = j.on_action(code("# kernel-analyst: check"), Facts())
    assert isinstance(decision, Skip) and decision.reason.key == "no_background_run"
    assert "check" in decision.reason.text and j.budget.steps == 0
    assert isinstance(j.on_action(code("# kernel-analyst: check"), Facts(pending=True)), Run)


def test_an_undo_after_a_step_that_only_read_is_no_step_and_after_a_change_is_done() -> None:
    read_only = Facts(steps=[step(1, "df.head()")])
    decision = judge().on_action(code("# kernel-analyst: undo"), read_only)
    assert isinstance(decision, Skip) and decision.reason.key == "nothing_to_undo"
    dropped = VariableInfo("df", "pandas.DataFrame", [3, 2])
    changed = Facts(steps=[step(1, "df = df.dropna()", changed=[dropped])])
    j = judge()
    decision = j.on_action(code("# kernel-analyst: undo"), changed)
    assert isinstance(decision, Undo) and decision.to is None and j.budget.undos == 1
    assert isinstance(judge(undo=False).on_action(code("# kernel-analyst: undo"), changed), Run)


def test_the_step_limit_skips_the_action_and_never_counts_past_it() -> None:
    j = judge(max_steps=1)
    assert isinstance(j.on_action(code("a = 1"), Facts()), Run)
    decision = j.on_action(code("b = 2"), Facts())
    assert isinstance(decision, Skip) and decision.reason.key == "step_limit" and j.budget.steps == 1


def test_failing_code_sent_again_is_rolled_back() -> None:
    facts = Facts(steps=[step(1, "df['x'].astype(int)", error="ValueError: invalid literal for int()")])
    j = judge()
    decision = j.on_action(code("df['x'].astype(int)"), facts)
    assert isinstance(decision, Rollback) and decision.first_step == 1
    assert decision.reason.text.startswith("Step 1 failed (ValueError: invalid literal for int()) and you "
                                           "sent the same code again, so it was taken back")
    assert "Some values are not plain numbers" in decision.reason.text, "with the hint"
    assert j.budget.rollbacks == 1 and j.budget.undone_at == 1


async def test_the_same_error_twice_in_a_row_rolls_both_steps_back() -> None:
    failed = step(1, "df['x'].astype(int)", error="ValueError: invalid literal for int() with base 10: '12a'")
    again = Execution(code="", status="error",
                      error=ExecutionError("ValueError", "invalid literal for int() with base 10: '12a'", []))
    j = judge()
    said = await j.after_step(StepFacts("df['x'].astype('int64')", again), Facts(steps=[failed]))
    assert said.rollback is not None and said.rollback.first_step == 1
    text = said.rollback.reason.text
    assert text.startswith("Steps 1 to 2 failed the same way (ValueError: invalid literal")
    other = Execution(code="", status="error", error=ExecutionError("KeyError", "'x'", []))
    assert (await judge().after_step(StepFacts("df['x']", other), Facts(steps=[failed]))).rollback is None
    first = Execution(code="", status="error", error=ExecutionError("KeyError", "'x'", []))
    assert (await judge().after_step(StepFacts("df['x']", first), Facts())).rollback is None


def test_with_no_rollback_left_failing_code_sent_again_is_told_to_change_then_to_start_over() -> None:
    facts = Facts(steps=[step(1, "df['x'].astype(int)", error="ValueError: invalid literal for int()")])
    j = judge(max_rollbacks=0)
    first = j.on_action(code("df['x'].astype(int)"), facts)
    assert isinstance(first, Skip) and first.reason.key == "repeated_failure"
    assert "fix the cause" in first.reason.text and j.budget.steps == 1
    j.budget.idle = 1  # the reply before ran nothing
    again = j.on_action(code("df['x'].astype(int)"), facts)
    assert isinstance(again, Skip) and "new, shorter cell" in again.reason.text


def test_code_that_just_ran_is_not_run_again() -> None:
    facts = Facts(steps=[step(1, "print(len(df))", printed="3\n")])
    decision = judge().on_action(code("print(len(df))"), facts)
    assert isinstance(decision, Skip) and decision.reason.key == "repeated_success"
    assert isinstance(judge().on_action(code("print(len(df) + 1)"), facts), Run)
    assert "its output is above" in decision.reason.text
    # DABench medium 6: a cell of assignments sent again, four times: it printed nothing
    silent = "df['mean_child'] = df[df.AgeGroup == 'Child'].Fare.mean().round(2)"
    decision = judge().on_action(code(silent), Facts(steps=[step(1, silent)]))
    assert isinstance(decision, Skip) and decision.reason.key == "repeated_success"
    assert "printed nothing" in decision.reason.text and "`print(...)`" in decision.reason.text
    # the conversation benchmark's taxis: a slip named after the step, the step sent again
    ratio = ("df['tip_per_passenger'] = df['tip'] / df['passengers']\n"
             "print(df.groupby('pickup_borough')['tip_per_passenger'].mean().idxmax())")
    decision = judge("Which pickup borough has the highest average tip?").on_action(
        code(ratio), Facts(steps=[step(1, ratio, printed="Manhattan\n")]))
    assert isinstance(decision, Skip) and decision.reason.key == "repeated_success"
    assert decision.reason.text.startswith("Not run: this code just ran in step 1, and the line after its "
                                           "output said: \"`df['tip'] / df['passengers']` divides"), decision
    assert "Answer now" not in decision.reason.text


def test_native_calls_of_unknown_tools_or_without_code_count_as_tries() -> None:
    j = judge()
    unknown = j.on_call("search", {"q": "x"}, "c1", Facts())
    assert isinstance(unknown, Skip) and unknown.reason.key == "unknown_tool"
    assert "`undo`" in unknown.reason.text
    empty = j.on_call(TOOL, {"code": " "}, "c2", Facts())
    assert isinstance(empty, Skip) and empty.reason.key == "bad_arguments" and j.budget.steps == 2
    assert isinstance(j.on_call("undo", {"to": 2}, "c3", Facts()), Undo)
    assert isinstance(j.on_call(TOOL, {"code": "x = 1"}, "c4", Facts()), Run)


def test_unreadable_arguments_count_and_a_call_without_id_is_left_alone() -> None:
    j = judge(max_steps=1)
    j.budget.steps = 1
    skip = j.on_invalid_call(InvalidCall("c1", "bad JSON"))
    assert skip is not None and "(bad JSON)" in skip.reason.text and j.budget.steps == 2
    assert j.on_invalid_call(InvalidCall("", "bad")) is None


def test_code_cut_at_the_length_limit_or_unreadable_runs_nothing() -> None:
    cut = read("```python\nfor i in range(3):\n")
    told = judge().on_nothing_to_run(cut)
    assert cut.cut and told.reason.key == "cut_code"
    assert told.resample and told.forget  # greedy, it would write the same block to the same limit
    unreadable = read('```json\n{"name": "python", "code": oops}\n```')
    told = judge().on_nothing_to_run(unreadable)
    assert unreadable.unreadable and told.reason.key == "unreadable_call"
    assert not told.resample and not told.forget


# -- answers -----------------------------------------------------------------------------------


def test_an_answer_right_after_a_failed_step_goes_back_once() -> None:
    facts = Facts(steps=[step(1, "df.loc[2, 'name']", error="KeyError: 2")])
    j = judge()
    decision = j.on_answer("It is english.", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["failed"]
    assert "KeyError: 2" in decision.text
    assert isinstance(j.on_answer("I could not compute it.", facts), Accept)


def test_no_work_with_data_sends_back_and_switches_an_undecided_model_to_code() -> None:
    facts = Facts(protocol=ProtocolState("auto"))
    decision = judge(has_files=True).on_answer("It has 891 rows.", facts)
    assert isinstance(decision, SendBack) and decision.switch_to_code
    assert [r.key for r in decision.reasons] == ["no_work"] and "```python" in decision.text
    assert isinstance(judge(has_files=True, require_work=False).on_answer("891", Facts()), Accept)


def test_an_answer_with_no_work_goes_back_twice_the_second_time_sampled() -> None:
    """DABench 5, 28, 62 (this sitting): the model answered from the profile at once, was
    sent back, answered again without code, and that answer was given (0 steps, wrong)."""
    j = judge(has_files=True)
    facts = Facts(protocol=ProtocolState("code"))
    first = j.on_answer("It has 891 rows.", facts)
    assert isinstance(first, SendBack) and not first.resample
    again = j.on_answer("It has 891 rows.", facts)
    assert isinstance(again, SendBack) and again.resample and [r.key for r in again.reasons] == ["no_work"]
    assert "Do not answer yet" in again.text and "```python block" in again.text
    third = j.on_answer("It has 891 rows.", facts)
    assert isinstance(third, Accept) and [r.key for r in third.doubts] == ["no_work"]  # in doubt: attempts


def test_an_answer_in_prose_goes_back_twice_for_the_form() -> None:
    """DABench medium 140 and hard 125: sent back once for the form, the model answered in
    prose again, and that was given."""
    question = "Is r linear? @correlation_coefficient[r_value] @relationship_type[type]"
    printed = "r = 0.828\n"
    facts = Facts(steps=[step(1, "print(r)", printed=printed)], cells=[cell(1, "print(r)", printed)],
                  protocol=ProtocolState("code"))
    j = judge(question)
    prose = "The correlation is 0.828."
    first = j.on_answer(prose, facts)
    assert isinstance(first, SendBack) and [r.key for r in first.reasons] == ["form"] and not first.resample
    again = j.on_answer(prose, facts)
    assert isinstance(again, SendBack) and again.resample and [r.key for r in again.reasons] == ["form"]
    assert "still not in the form the question asks for, @correlation_coefficient[value]" in again.text
    assert "```python block" in again.text
    third = j.on_answer(prose, facts)
    assert isinstance(third, Accept) and [r.key for r in third.doubts] == ["form"]


def test_made_up_numbers_and_verdicts_by_eye_go_back_twice() -> None:
    """DABench hard 137: ``@model_score[0.85]``, which no cell printed, was given after one
    send-back (the attempts' account could not pay for another attempt)."""
    printed = "accuracy computed\n"
    facts = Facts(steps=[step(1, "print(x)", printed=printed)], cells=[cell(1, "print(x)", printed)],
                  protocol=ProtocolState("code"))
    j = judge("What is the model's accuracy? @model_score[value]")
    assert isinstance(j.on_answer("@model_score[0.85]", facts), SendBack)
    again = j.on_answer("@model_score[0.85]", facts)
    assert isinstance(again, SendBack) and again.resample
    assert [r.key for r in again.reasons] == ["unsupported"]
    assert "again it gives numbers no output shows" in again.text and "0.85" in again.text
    assert "```python block" in again.text
    third = j.on_answer("@model_score[0.85]", facts)
    assert isinstance(third, Accept) and [r.key for r in third.doubts] == ["unsupported"]
    rule = "Is it normal? If the p value is below 0.05 it is not. @is_normal[True or False]"
    shown = Facts(steps=[step(1, "print(p)", printed="p 0.0\n")], cells=[cell(1, "print(p)", "p 0.0\n")],
                  protocol=ProtocolState("code"))
    k = judge(rule, has_files=True)
    assert isinstance(k.on_answer("@is_normal[True]", shown), SendBack)
    by_eye = k.on_answer("@is_normal[True]", shown)
    assert isinstance(by_eye, SendBack) and "again its verdict was not computed" in by_eye.text
    assert isinstance(k.on_answer("@is_normal[True]", shown), Accept)


def test_a_number_read_off_the_profile_is_no_result() -> None:
    """Asked for the recommendation score of the student with the lowest English score, the
    model answered 0.34 at once: the minimum of another column, printed by the profile."""
    profile = cell(1, "df = load('admissions.csv')", "LOR: min 0.34, median 3.5, max 5.0")
    profile["metadata"]["kernel_analyst"]["role"] = "profile"
    question = "What is the LOR of the student with the lowest TOEFL score?"
    decision = judge(question, has_files=True, first_cell=0).on_answer("0.34", Facts(cells=[profile]))
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["no_work"]
    assert "profile" in decision.text and "0.34" in decision.text
    ran = Facts(steps=[step(1, "df.TOEFL.idxmin()", printed="12\n")],
                cells=[profile, cell(2, "df.TOEFL.idxmin()", "12")])
    later = judge(question, has_files=True, first_cell=0).on_answer("It is 0.34.", ran)
    assert isinstance(later, SendBack) and [r.key for r in later.reasons] == ["profile"]


def test_a_follow_up_about_the_data_needs_a_cell_of_its_own() -> None:
    cells = [cell(1, "df.groupby('WeightClassKg').TotalKg.mean()", "83 312.5\n93 305.1")]
    decision = judge("Which weight class has the best average?", has_files=True, cells_before=1,
                     first_cell=1).on_answer("Open", Facts(cells=cells))
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["no_work"]
    assert "No code ran for this question" in decision.text


def test_a_task_on_the_data_answered_with_no_cell_goes_back() -> None:
    """DSEval housing-price-prediction with the 1.5B model: "Identify the data types for each
    column." answered from the profile with no cell (``price (float64)``: it is int64), and
    no number or quoted name to check; a task that changes the data is not done either."""
    cells = [cell(1, "housing = pd.read_csv('inputs/Housing.csv')", "")]
    for question, answer in (
            ("Identify the data types for each column.", "The types are: price (float64), area (float64)."),
            ("Rename the column \"area\" to \"area(m2)\".", "The column has been renamed."),
            ("Please list the columns with missing values.", "There are none."),
            ("Could you identify the data types of each column?", "price is float64, area is float64."),
            ("I'd like you to list the columns with missing values.", "There are none.")):
        decision = judge(question, has_files=True, cells_before=1, first_cell=1).on_answer(answer,
                                                                                         Facts(cells=cells))
        assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["no_work"], question
    remark = judge("Summarize what we found so far.", has_files=True, cells_before=1, first_cell=1)
    summary = remark.on_answer("We loaded the housing table and renamed a column.", Facts(cells=cells))
    assert isinstance(summary, Accept), summary


def test_a_name_no_output_shows_goes_back() -> None:
    cells = [cell(1, "df.species.value_counts()", "Adelie 152\nGentoo 124")]
    facts = Facts(steps=[step(1, "df.species.value_counts()", printed="Adelie 152")], cells=cells)
    decision = judge("Which species is most common?").on_answer("Emperor", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["unsupported_values"]
    assert "'Emperor'" in decision.text
    assert isinstance(judge("Which species is most common?").on_answer("Adelie penguins.", facts), Accept)
    assert isinstance(judge("Is it normal?").on_answer("@normal[yes]", facts), Accept)


def test_a_verdict_judged_by_eye_goes_back_to_be_computed() -> None:
    """DABench 130 and 34: the cells printed the p-value, the model judged the verdict by
    eye (``p = 0.0``: "normal"; ``p = 0.4058``: "nonlinear") and the words were the
    question's own, so nothing checked them."""
    question = ("Check if the age follows a normal distribution. If the p value is less than 0.05 the "
                "data are not normal. @norm_test_pvalue[pvalue] @is_normal[isNormal], 'True' or 'False'.")
    related = ("Is there a correlation between r and s? @relationship_type[relationship_type]: linear, "
               "nonlinear or none.")
    printed = "Shapiro-Wilk p-value: 0.0\n"
    facts = Facts(steps=[step(1, "print(p)", printed=printed)], cells=[cell(1, "print(p)", printed)])
    decision = judge(question, has_files=True).on_answer("@norm_test_pvalue[0.0] @is_normal[True]", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["verdict"]
    assert "@is_normal[True]" in decision.text and "@norm_test_pvalue" not in decision.text
    assert "an `if`" in decision.text
    offered = judge(related, has_files=True).on_answer("@relationship_type[nonlinear]", facts)
    assert isinstance(offered, SendBack) and "@relationship_type[nonlinear]" in offered.text
    # Computed and printed with the rule: accepted; a printed "nonlinear" is not "linear".
    ruled = "p = 0.0\n@is_normal[False]\nrelationship: nonlinear\n"
    computed = Facts(steps=[step(1, "print(p)", printed=ruled)], cells=[cell(1, "print(p)", ruled)])
    for asked, answer in ((question, "@norm_test_pvalue[0.0] @is_normal[False]"),
                          (related, "@relationship_type[nonlinear]")):
        assert isinstance(judge(asked, has_files=True).on_answer(answer, computed), Accept), answer
    linear = judge(related, has_files=True).on_answer("@relationship_type[linear]", computed)
    assert isinstance(linear, SendBack) and [r.key for r in linear.reasons] == ["verdict"]
    # A verdict printed by an earlier question's cell is not this question's.
    later = judge(question, has_files=True, cells_before=1, first_cell=1)
    earlier = Facts(steps=[step(2, "print(p)", printed=printed)],
                    cells=[cell(1, "print(p)", ruled), cell(2, "print(p)", printed)])
    assert isinstance(later.on_answer("@norm_test_pvalue[0.0] @is_normal[False]", earlier), SendBack)


@pytest.mark.parametrize(("question", "answer", "rows"), [
    ("What percent of the JFK departures left more than 15 minutes late?", "100.0% of them.", ()),
    ("How many passengers paid more than 100?", "891 passengers.", (891,)),
    # DABench hard 275 on 051e628: the rows counted, not the duplicates (0)
    ("Remove any duplicate entries. How many duplicates were there?", "There were 891 duplicates.", (891,)),
    ("What are the 2 worst scores?", "The worst score is 45.", ()),
    # the mpg conversation: the count before the things, the ranking after them
    ("Which 3 cars have the worst scores? Give their numbers.", "The worst is 45.", ()),
])
def test_doubtful_results_go_back(question: str, answer: str, rows: tuple[int, ...]) -> None:
    printed = "100.0\n891\n45\n"
    facts = Facts(steps=[step(1, "print(x)", printed=printed)], cells=[cell(1, "print(x)", printed)])
    decision = judge(question, table_rows=rows).on_answer(answer, facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["doubtful"]
    assert isinstance(judge("What are the 2 worst scores?").on_answer("45 and 52", Facts(
        steps=[step(1, "print(x)", printed="45 52")], cells=[cell(1, "print(x)", "45 52")])), Accept)


@pytest.mark.parametrize(("question", "answer"), [
    # DABench 555 and 510: "at least N" is a threshold, not N items asked
    ("How many species are there with at least 5 observations? @unique_species_count[n]",
     "@unique_species_count[29]"),
    ("Which brand has the highest average rating among hotels with at least 100 reviews? @brand[name]",
     "@brand[Preferred Hotels]"),
    ("Which rating do hotels with at least 100 reviews that have the highest price get? @rating[r]",
     "@rating[4.5]"),
    # DABench 424: the top three, each an item of its own
    ("What are the top three features? @feature1[f] @feature2[f] @feature3[f]",
     "@feature1[Open] @feature2[High] @feature3[Low]"),
])
def test_a_threshold_or_items_of_their_own_are_no_short_list(question: str, answer: str) -> None:
    printed = answer.replace(" @", "\n@")
    facts = Facts(steps=[step(1, "print(x)", printed=printed)], cells=[cell(1, "print(x)", printed)])
    assert isinstance(judge(question).on_answer(answer, facts), Accept)


def test_one_value_for_every_group_is_doubtful() -> None:
    """DABench medium 180: the same selection of the whole table, once per class."""
    question = ("Count the Z-score outliers of the fare in each passenger class separately. "
                "@class1_outliers[o1], @class2_outliers[o2], @class3_outliers[o3]")
    printed = "@class1_outliers[20]\n@class2_outliers[20]\n@class3_outliers[20]\n"
    facts = Facts(steps=[step(1, "print(x)", printed=printed)], cells=[cell(1, "print(x)", printed)])
    answer = "@class1_outliers[20], @class2_outliers[20], @class3_outliers[20]"
    decision = judge(question).on_answer(answer, facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["doubtful"]
    assert "20 for each of @class1_outliers, @class2_outliers, @class3_outliers" in decision.text
    for fine in ("@class1_outliers[3], @class2_outliers[7], @class3_outliers[14]",
                 "@class1_outliers[0], @class2_outliers[0], @class3_outliers[0]",  # none is no doubt
                 "@class1_outliers[20], @class2_outliers[20], @class3_outliers[14]"):
        shown = fine.replace(", ", "\n")
        seen = Facts(steps=[step(1, "print(x)", printed=shown)], cells=[cell(1, "print(x)", shown)])
        assert isinstance(judge(question).on_answer(fine, seen), Accept), fine


def test_an_average_no_cell_took_is_doubtful() -> None:
    """The conversation benchmark's penguins: "On which island are the penguins the
    lightest on average?" answered with the single lightest penguin's island."""
    question = "On which island are the penguins the lightest on average?"
    took_min = "print(df[df.body_mass_g == df.body_mass_g.min()]['island'].values[0])"
    facts = Facts(steps=[step(1, took_min, printed="Dream\n")], cells=[cell(1, took_min, "Dream\n")])
    decision = judge(question, has_files=True).on_answer("Dream", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["doubtful"]
    assert "none of this question's cells computes one" in decision.text
    for code in ("print(df.groupby('island')['body_mass_g'].mean().idxmin())",
                 "s = df.groupby('island')['body_mass_g']\nprint((s.sum() / s.count()).idxmin())"):
        seen = Facts(steps=[step(1, code, printed="Torgersen\n")], cells=[cell(1, code, "Torgersen\n")])
        assert isinstance(judge(question, has_files=True).on_answer("Torgersen", seen), Accept), code
    # DABench easy 123 with the 1.5B model: the form's name as a variable and a per-million
    # division, the single highest day's country for the highest average
    vaccinations = ("df['per_million'] = df['daily_vaccinations'] / df['total_vaccinations'] * 1e6\n"
                    "# the country with the highest average\n"
                    "country_with_highest_average = df.loc[df['per_million'].idxmax(), 'country']\n"
                    "print(f'@country_with_highest_average[{country_with_highest_average}]')")
    per_day = "Which country has the highest average number of daily vaccinations per million people?"
    seen = Facts(steps=[step(1, vaccinations, printed="@country_with_highest_average[Algeria]\n")],
                 cells=[cell(1, vaccinations, "@country_with_highest_average[Algeria]")])
    decided = judge(per_day, has_files=True).on_answer("@country_with_highest_average[Algeria]", seen)
    assert isinstance(decided, SendBack), decided
    assert "none of this question's cells computes one" in decided.text, decided
    for code in ("print(df.groupby('country')['v'].agg('mean').idxmax())",
                 "print(np.mean(df.v))", "print(sum(df.v) / len(df))"):
        seen = Facts(steps=[step(1, code, printed="Gibraltar\n")], cells=[cell(1, code, "Gibraltar\n")])
        assert isinstance(judge(per_day, has_files=True).on_answer("Gibraltar", seen), Accept), code
    # the conversation benchmark's brussels-hotels: the highest single rate, printed as "average"
    hotels = ("average_occupancy_rate = df['Occupancy rate'].max()\n"
              "print(f\"The neighbourhood with the highest average occupancy rate is "
              "{df['Quartier'][df['Occupancy rate'].idxmax()]} with {average_occupancy_rate:.2f}.\")")
    printed = "The neighbourhood with the highest average occupancy rate is Midi-Lemonnier with 0.90.\n"
    seen = Facts(steps=[step(1, hotels, printed=printed)], cells=[cell(1, hotels, printed)])
    asked = "Which neighbourhood has the highest average occupancy rate?"
    decided = judge(asked, has_files=True).on_answer("Midi-Lemonnier", seen)
    assert isinstance(decided, SendBack), decided
    assert "none of this question's cells computes one" in decided.text, decided
    for code in ("print('The average rate:', df['Occupancy rate'].max())",
                 "print(df.groupby('Quartier')['Occupancy rate'].agg('mean').idxmax())"):
        shown = "Midi-Lemonnier\n"
        seen = Facts(steps=[step(1, code, printed=shown)], cells=[cell(1, code, shown)])
        decided = judge(asked, has_files=True).on_answer("Midi-Lemonnier", seen)
        assert isinstance(decided, SendBack) == ("agg('mean')" not in code), (code, decided)
    rmse = "from sklearn.metrics import root_mean_squared_error as f\nprint(round(f(y, p), 2))"
    seen = Facts(steps=[step(1, rmse, printed="3.1\n")], cells=[cell(1, rmse, "3.1\n")])
    asked = "What is the root mean squared error of the model?"
    assert isinstance(judge(asked, has_files=True).on_answer("3.1", seen), Accept), "no average asked"


def test_a_share_among_a_subset_over_the_whole_table_is_doubtful() -> None:
    """The conversation benchmark's mpg: "Of the remaining European cars, what percent get
    more than 30 mpg?" divided by the whole table's rows (4.34%; among the European cars:
    25%)."""
    import io
    from contextlib import redirect_stdout

    import pandas as pd

    question = "Of the remaining European cars, what percent get more than 30 mpg?"
    cars = VariableInfo("df", "pandas.DataFrame", [392, 9], ["mpg", "origin", "name"])
    facts = QuestionFacts(question, (), True, 1, 0, (392,), {"df": cars})
    whole = ("euro_df = df[df.origin == 'europe']\neuro_df = euro_df[euro_df.mpg > 30]\n"
             "print(len(euro_df) / len(df) * 100)")
    subset = ("euro = df[df.origin == 'europe']\nprint(len(euro[euro.mpg > 30]) / len(euro) * 100)")
    for code, printed, answer, doubted in ((whole, "4.336734693877551\n", "4.34%", True),
                                           (subset, "25.0\n", "25.0%", False)):
        seen = Facts(steps=[step(1, code, printed=printed)], cells=[cell(1, code, printed)])
        judged = Judge(JudgeSettings(tool_name=TOOL), facts).on_answer(answer, seen)
        if doubted:
            assert isinstance(judged, SendBack) and [r.key for r in judged.reasons] == ["doubtful"], judged
            assert "divides by the rows of the whole table (`len(df)`)" in judged.text
            # written from the cell's own filters, no stand-ins to copy (the mpg conversation:
            # `(euro_df[col] > x)` copied as written, two NameErrors)
            assert ("From your own filters: `subset = df[df.origin == 'europe']`, then "
                    "`print((subset.mpg > 30).mean() * 100)`.") in judged.text, judged.text
            cars_table = pd.read_csv(SEABORN / "mpg.csv").dropna(subset=["horsepower"])
            out = io.StringIO()
            with redirect_stdout(out):
                exec("subset = df[df.origin == 'europe']\nprint((subset.mpg > 30).mean() * 100)",
                     {"df": cars_table})
            assert out.getvalue().strip() == "25.0"  # the conversation's answer, established by hand
        else:
            assert isinstance(judged, Accept), judged
    # this sitting's mpg: an attempt rebound df to the European cars in the dividing cell (25.0,
    # right), and a later cell that does not divide gave 100.0 after an earlier one that did
    rebound = ("df = df[df.origin == 'europe']\nfast = df[df['mpg'] > 30]\n"
               "print(len(fast) / len(df) * 100)")
    seen = Facts(steps=[step(1, rebound, printed="25.0\n")], cells=[cell(1, rebound, "25.0\n")])
    assert isinstance(Judge(JudgeSettings(tool_name=TOOL), facts).on_answer("25.0", seen), Accept)
    twice = ("euro = df[df.origin == 'europe']\neuro = euro[euro.mpg > 30]\n"
             "print((euro.mpg > 30).mean() * 100)")
    seen = Facts(steps=[step(1, whole, printed="4.336734693877551\n"), step(2, twice, printed="100.0\n")],
                 cells=[cell(1, whole, "4.336734693877551\n"), cell(2, twice, "100.0\n")])
    judged = Judge(JudgeSettings(tool_name=TOOL), facts).on_answer("100.0", seen)
    assert isinstance(judged, SendBack) and [r.kind for r in judged.reasons] == ["whole_or_nothing"], judged
    assert "The answer 100.0 is the whole or none of a subset" in judged.text
    overall = QuestionFacts("What percent of the cars get more than 30 mpg?", (), True, 1, 0, (392,),
                            {"df": cars})
    code = "print(len(df[df.mpg > 30]) / len(df) * 100)"
    seen = Facts(steps=[step(1, code, printed="18.1\n")], cells=[cell(1, code, "18.1\n")])
    assert isinstance(Judge(JudgeSettings(tool_name=TOOL), overall).on_answer("18.1%", seen), Accept)


def test_a_yes_no_question_answered_with_a_number_alone_is_doubtful() -> None:
    """The conversation benchmark's titanic: "Were most of the passengers who boarded there
    travelling in first class?" answered "56.92%"."""
    question = "Were most of the passengers who boarded there travelling in first class?"
    code = "print(df[df.embark_town == 'Cherbourg'].pclass.value_counts(normalize=True).iloc[0] * 100)"
    printed = "56.92307692307692\n"
    seen = Facts(steps=[step(1, code, printed=printed)], cells=[cell(1, code, printed)])
    decision = judge(question, has_files=True).on_answer("56.92%", seen)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["doubtful"], decision
    assert "asks yes or no, and the answer does not say which" in decision.text
    for answer in ("Yes: 56.92% of them.", "No, only 56.92%.", "It wasn't: 56.92%."):
        assert isinstance(judge(question, has_files=True).on_answer(answer, seen), Accept), answer
    formed = question + " Answer as @most_first_class[share]."  # the form's to judge
    printed = "@most_first_class[56.92]\n"
    seen = Facts(steps=[step(1, code, printed=printed)], cells=[cell(1, code, printed)])
    assert isinstance(judge(formed, has_files=True).on_answer("@most_first_class[56.92]", seen), Accept)


def test_a_verdict_the_code_printed_as_written_is_doubtful() -> None:
    """The conversation benchmark's tips with the 1.5B model: the cell printed its sentence
    "Non-smokers tipped a higher percent ..." beside 99.08% and 101.49% (which say the
    opposite), compared nothing, and the answer was "Yes"."""
    question = "Did non-smokers tip a higher percent of the bill than smokers, on average?"
    written = ("a = df[df.smoker == 'No'].pct.mean()\nb = df[df.smoker == 'Yes'].pct.mean()\n"
               "print(f'Non-smokers tipped a higher percent of the bill than smokers: {a:.2f}% and "
               "{b:.2f}%')")
    printed = "Non-smokers tipped a higher percent of the bill than smokers: 15.52% and 16.32%\n"
    seen = Facts(steps=[step(1, written, printed=printed)], cells=[cell(1, written, printed)])
    decision = judge(question, has_files=True).on_answer("Yes, 15.52% against 16.32%.", seen)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["doubtful"], decision
    assert 'printed as it was written ("Non-smokers tipped a higher percent' in decision.text
    # compared in code, or no verdict written: nothing to doubt
    compared = written.replace("print(f'Non-smokers tipped a higher percent of the bill than smokers: ",
                               "print(a > b, f'")
    means = "a = df[df.smoker == 'No'].pct.mean()\nb = df[df.smoker == 'Yes'].pct.mean()\nprint(a, b)"
    for code, out in ((compared, "False 15.52% and 16.32%\n"), (means, "15.52 16.32\n")):
        seen = Facts(steps=[step(1, code, printed=out)], cells=[cell(1, code, out)])
        assert isinstance(judge(question, has_files=True).on_answer("No: 15.52% against 16.32%.", seen),
                          Accept), code
    # a form offering verdict words: `print("@is_normal[Yes]")` with no rule applied
    formed = ("Is the fare normal? Assume so if the skewness is within 0.5. @is_normal[answer], \"Yes\" or "
              "\"No\".")
    code = "s = df.Fare.skew()\nprint(s)\nprint('@is_normal[Yes]')"
    seen = Facts(steps=[step(1, code, printed="4.79\n@is_normal[Yes]\n")],
                 cells=[cell(1, code, "4.79\n@is_normal[Yes]\n")])
    decision = judge(formed, has_files=True).on_answer("@is_normal[Yes]", seen)
    assert isinstance(decision, SendBack) and "doubtful" in [r.key for r in decision.reasons], decision
    # DABench medium 11: after the p-value went back, the last cell wrote the verdict into its f-string
    rule = ("Calculate the correlation. Consider the relationship linear if p < 0.05 and |r| >= 0.5. "
            "@correlation_coefficient[r_value] @p_value[p_value] @relationship_type[relationship_type]")
    decided = "rel = 'linear' if p < 0.05 and abs(r) >= 0.5 else 'none'\nprint(r, p, rel)"
    written = ("r, p = pearsonr(df.h, df.l)\nprint(f'@correlation_coefficient[{r:.2f}] @p_value[{p:.4f}] "
               "@relationship_type[none]')")
    out = "@correlation_coefficient[0.99] @p_value[0.0000] @relationship_type[none]"
    answer = "@correlation_coefficient[0.99] @p_value[0.0000] @relationship_type[none]"
    seen = Facts(steps=[step(1, decided, printed="0.99 0.9896 none\n"), step(2, written, printed=out + "\n")],
                 cells=[cell(1, decided, "0.99 0.9896 none"), cell(2, written, out)])
    decision = judge(rule, has_files=True).on_answer(answer, seen)
    assert isinstance(decision, SendBack) and "@relationship_type[none]" in decision.text, decision
    computed = written.replace("@relationship_type[none]", "@relationship_type[{rel}]")
    seen = Facts(steps=[step(1, decided, printed="x\n"), step(2, computed, printed=out + "\n")],
                 cells=[cell(1, decided, "x"), cell(2, computed, out)])
    assert isinstance(judge(rule, has_files=True).on_answer(answer, seen), Accept)

def test_each_doubt_goes_back_once_on_its_own_account() -> None:
    """DABench medium 11 asked again: its p-value doubt went back, the next answer's verdict
    was written into the print as it stood, and that second doubt was accepted unsent,
    because every doubt drew on one account. Each doubt has its own now; a doubt sent
    already is not sent again, and the answer keeps it for the attempts."""
    rule = ("Calculate the correlation. Consider the relationship linear if p < 0.05 and |r| >= 0.5. "
            "@correlation_coefficient[r_value] @p_value[p_value] @relationship_type[relationship_type]")
    the_judge = judge(rule, table_rows=(400,))
    own_formula = "@correlation_coefficient[0.99] @p_value[0.9896] @relationship_type[none]"
    code = "print(r, p, 'linear' if p < 0.05 and abs(r) >= 0.5 else 'none')"
    seen = Facts(steps=[step(1, code, printed=own_formula)], cells=[cell(1, code, own_formula)])
    first = the_judge.on_answer(own_formula, seen)
    assert isinstance(first, SendBack), first
    assert [(r.key, r.kind) for r in first.reasons] == [("doubtful", "p_value_disagrees")]
    written = ("r, p = pearsonr(df.h, df.l)\nprint(f'@correlation_coefficient[{r:.2f}] @p_value[{p:.4f}] "
               "@relationship_type[none]')")
    out = "@correlation_coefficient[0.99] @p_value[0.0000] @relationship_type[none]"
    seen = Facts(steps=[step(1, code, printed=own_formula), step(2, written, printed=out + "\n")],
                 cells=[cell(1, code, own_formula), cell(2, written, out)])
    second = the_judge.on_answer(out, seen)
    assert isinstance(second, SendBack), second
    assert [(r.key, r.kind) for r in second.reasons] == [("doubtful", "written_verdict")], second.reasons
    assert "@relationship_type[none]" in second.text and not second.resample
    third = the_judge.on_answer(out, seen)
    assert isinstance(third, Accept), third
    assert [(r.key, r.kind, r.account) for r in third.doubts] == [
        ("doubtful", "written_verdict", "doubtful:written_verdict")]
    assert the_judge.budget.sent == {"doubtful:p_value_disagrees": 1, "doubtful:written_verdict": 1}


def test_a_verdict_the_questions_own_rule_contradicts_is_doubtful() -> None:
    """DABench medium 34 with the 1.5B model: ``@p_value[0.4058]`` and
    ``@relationship_type[nonlinear]``, where the question calls a relationship nonlinear only
    if p < 0.05. The question's rule decides, with the answer's own numbers."""
    rule = ("Is there a correlation between rt and score? Calculate the Pearson correlation coefficient (r). "
            "Consider the relationship to be linear if the p-value is less than 0.05 and the absolute value "
            "of r is greater than or equal to 0.5. Consider the relationship to be nonlinear if the "
            "p-value is less than 0.05 and the absolute value of r is less than 0.5. If the p-value is "
            "greater than or equal to 0.05, report that there is no significant correlation.\n"
            "@correlation_coefficient[r_value] @p_value[p_value] @relationship_type[relationship_type]")

    def decide(answer: str, question: str = rule) -> Accept | SendBack:
        shown = answer.replace(" ", "\n")
        facts = Facts(steps=[step(1, "print(x)", printed=shown)], cells=[cell(1, "print(x)", shown)])
        decision = judge(question, table_rows=(400,)).on_answer(answer, facts)
        assert isinstance(decision, (Accept, SendBack))
        return decision

    wrong = decide("@correlation_coefficient[-0.04] @p_value[0.4058] @relationship_type[nonlinear]")
    assert isinstance(wrong, SendBack)
    assert [(r.key, r.kind) for r in wrong.reasons] == [("doubtful", "rule_broken")]
    assert ('says @relationship_type[nonlinear], but the question calls it "nonlinear" only if p < 0.05 and '
            '|r| < 0.5, and the values are p = 0.4058, r = -0.04: by the question\'s rule '
            'it is "no significant correlation"') in wrong.text, wrong.text
    linear = decide("@correlation_coefficient[0.99] @p_value[0.0000] @relationship_type[none]")
    assert isinstance(linear, SendBack) and 'rule it is "linear"' in linear.text, linear
    for right in ("@correlation_coefficient[-0.04] @p_value[0.4058] @relationship_type[none]",
                  "@correlation_coefficient[0.99] @p_value[0.0000] @relationship_type[linear]",
                  "@correlation_coefficient[0.31] @p_value[0.0000] @relationship_type[Non-linear]",
                  "@correlation_coefficient[0.31] @p_value[0.05] @relationship_type[none]",  # 0.045 to 0.055
                  # |r| from 0.45 to 0.55:
                  "@correlation_coefficient[0.5] @p_value[0.01] @relationship_type[nonlinear]"):
        assert isinstance(decide(right), Accept), right
    alone = decide("@relationship_type[nonlinear]")  # the other items missing: no numbers to hold it against
    assert isinstance(alone, SendBack) and [r.key for r in alone.reasons] == ["form"], alone
    # DABench easy 72 with the 1.5B model: no p-value item; its cell printed the p-value and
    # `'Normal' if p < 0.05 else 'Non-normal'`, the rule turned round
    normality = ("Use the Shapiro-Wilk test to assess the normality of the \"Close\" column. If the p-value "
                 "is less than 0.05, consider the data to be non-normally distributed. Otherwise, consider "
                 "it to be normally distributed. @normality_test_result[normality_test_result]")
    printed = "Shapiro-Wilk test p-value: 1.406882455766507e-10\nNormality test result: Normal\n"
    facts = Facts(steps=[step(1, "print(...)", printed=printed)], cells=[cell(1, "print(...)", printed)])
    turned = judge(normality, table_rows=(251,)).on_answer("@normality_test_result[Normal]", facts)
    assert isinstance(turned, SendBack)
    assert 'by the question\'s rule it is "non-normally distributed"' in turned.text
    assert "p = 1.406882455766507e-10" in turned.text, turned.text
    kept = judge(normality, table_rows=(251,)).on_answer("@normality_test_result[Non-normal]", facts)
    assert "doubtful" not in [r.key for r in getattr(kept, "reasons", ())], kept  # though no cell printed it
    two = printed + "p-value: 0.3\n"  # two p-values printed: which one the verdict is on is not known
    facts = Facts(steps=[step(1, "print(...)", printed=two)], cells=[cell(1, "print(...)", two)])
    open_p = judge(normality, table_rows=(251,)).on_answer("@normality_test_result[Normal]", facts)
    assert isinstance(open_p, Accept), open_p
    # a rule on the coefficient alone, worded the other way round (DABench 552's shape)
    signed = ("If the absolute value of r is greater than or equal to 0.5, consider it to be linear. "
              "@r[r_value] @kind[kind]")
    read = [(r.outcome, [str(c) for c in r.conditions]) for r in stated_rules(signed)]
    assert read == [("linear", ["|r| >= 0.5"])]
    assert stated_rules("Consider it to be linear if the slope is above 0.5 and |r| >= 0.5.") == [], \
        "a condition on anything but p and r makes no rule"
    signed = ("Consider the relationship to be linear if |r| >= 0.5. "
              "Consider it to be non-linear if |r| < 0.5. "
              "@r[r_value] @kind[kind]")
    assert isinstance(decide("@r[0.81] @kind[non-linear]", signed), SendBack)
    assert isinstance(decide("@r[0.81] @kind[linear]", signed), Accept)


def test_an_answer_from_a_step_whose_slip_was_named_is_doubtful() -> None:
    """DABench easy 129 with the 1.5B model: ``df['Fare'].std()`` for "the population standard
    deviation (σ)"; the line after the output named it, and ``@std_dev_fare[49.69]`` was
    answered at once (49.67 is right)."""
    question = ("Calculate the mean and standard deviation of the fare. Calculate the arithmetic mean and "
                "population standard deviation (σ). @mean_fare[mean] @std_dev_fare[std]")
    slipped = ("m = df['Fare'].mean()\ns = df['Fare'].std()\n"
               "print(f'@mean_fare[{m:.2f}] @std_dev_fare[{s:.2f}]')")
    out = "@mean_fare[32.20] @std_dev_fare[49.69]"
    facts = Facts(steps=[step(1, slipped, printed=out)], cells=[cell(1, slipped, out)])
    decision = judge(question, has_files=True).on_answer(out, facts)
    assert isinstance(decision, SendBack), decision
    assert [(r.key, r.kind) for r in decision.reasons] == [("doubtful", "slip_kept")], decision.reasons
    assert "the line after its output said: \"The question asks for the population standard deviation" \
        in decision.text, decision.text
    fixed = slipped.replace(".std()", ".std(ddof=0)")
    right = "@mean_fare[32.20] @std_dev_fare[49.67]"
    facts = Facts(steps=[step(1, slipped, printed=out), step(2, fixed, printed=right)],
                  cells=[cell(1, slipped, out), cell(2, fixed, right)])
    assert isinstance(judge(question, has_files=True).on_answer(right, facts), Accept)


def test_a_share_among_the_wrong_rows_is_named_and_its_answer_doubtful() -> None:
    """The conversation benchmark's tips question 3 with the 1.5B model: the Saturday smokers
    over all smokers, 45.16% answered for 48.28%."""
    question = "Of the Saturday dinners, what percent were at smokers' tables?"
    inverted = ("both = df[(df['day'] == 'Sat') & (df['smoker'] == 'Yes')].shape[0]\n"
                "smokers = df[df['smoker'] == 'Yes'].shape[0]\nprint(both / smokers * 100)")
    facts = Facts(steps=[step(1, inverted, printed="45.16129032258064\n")],
                  cells=[cell(1, inverted, "45.16129032258064\n")])
    decision = judge(question, has_files=True).on_answer("45.16% were at smokers' tables.", facts)
    assert isinstance(decision, SendBack), decision
    assert [(r.key, r.kind) for r in decision.reasons] == [("doubtful", "slip_kept")], decision.reasons
    assert "a share of the rows where `day == 'Sat'`" in decision.text, decision.text
    fixed = "sat = df[df['day'] == 'Sat']\nprint((sat['smoker'] == 'Yes').mean() * 100)"
    wrong, right = "45.16129032258064\n", "48.275862\n"
    facts = Facts(steps=[step(1, inverted, printed=wrong), step(2, fixed, printed=right)],
                  cells=[cell(1, inverted, wrong), cell(2, fixed, right)])
    decision = judge(question, has_files=True).on_answer("48.28% were at smokers' tables.", facts)
    assert isinstance(decision, Accept), decision


def test_a_p_value_or_correlation_out_of_its_range_is_doubtful() -> None:
    """DABench hard 177 with the 1.5B model: ``p_value, _ = mannwhitneyu(...)`` printed the U
    statistic as the p-value, ``@p_value[49572.0000]``. A correlation beyond 1 likewise; a
    regression coefficient, a statistic or a p-value within range are no doubt."""
    code = "p_value, _ = mannwhitneyu(a, b)\nprint(f'@p_value[{p_value:.4f}]')"
    seen = Facts(steps=[step(1, code, printed="@p_value[49572.0000]\n")],
                 cells=[cell(1, code, "@p_value[49572.0000]\n")])
    question = ("Test the difference with the Mann-Whitney U test. Finish with the results in exactly this "
                "format: @p_value[p_value] @significance[Yes/No]")
    decision = judge(question, has_files=True).on_answer("@p_value[49572.0000] @significance[No]", seen)
    assert isinstance(decision, SendBack), decision
    assert ("doubtful", "out_of_range") in [(r.key, r.kind) for r in decision.reasons], decision.reasons
    assert "@p_value[49572.0000] cannot be a p-value, which is always between 0 and 1" in decision.text
    corr = "print(f'@correlation_coefficient[{r:.2f}]')"
    shown = "@correlation_coefficient[1.35]\n"
    facts = Facts(steps=[step(1, corr, printed=shown)], cells=[cell(1, corr, shown)])
    decision = judge("What is the correlation?", has_files=True).on_answer(shown.strip(), facts)
    assert isinstance(decision, SendBack) and "cannot be a correlation coefficient" in decision.text, decision
    for name, value in (("coef_age", "3.7"), ("u_statistic", "49572"), ("p_value", "0.0312"),
                        ("pearson_r", "-0.98"), ("pvalue", "1e-05")):
        shown = f"@{name}[{value}]\n"
        code = f"print('@{name}[{value}]')"
        facts = Facts(steps=[step(1, code, printed=shown)], cells=[cell(1, code, shown)])
        found = judge("Fit and test it.", has_files=True).on_answer(f"@{name}[{value}]", facts)
        assert "out_of_range" not in [r.kind for r in getattr(found, "reasons", ())], (name, found)


def test_one_row_of_a_series_printed_in_the_form_is_doubtful() -> None:
    """DABench medium 250 with the 1.5B model: ``df.a - df.b.mean()`` printed inside
    ``@mean[...]`` as a whole Series, and the answer took its first row. The same value
    printed as one number, or a form item the cell printed on one line, is accepted."""
    import pandas as pd

    df = pd.DataFrame({"a": [0.25, 0.26, 0.24, 0.3, 0.28] * 20, "b": [0.31, 0.33, 0.3, 0.36, 0.35] * 20})
    code = "new = df['a'] - df['b'].mean()\nprint(f\"@mean[{new.round(2)}]\")"
    printed = f"@mean[{(df['a'] - df['b'].mean()).round(2)}]\n"
    assert "Length: 100" in printed
    question = ("Create a feature a minus b and calculate its mean. Finish with the results in exactly "
                "this format: @mean[mean_value]")
    first = printed.split("\n")[0].split()[-1]
    seen = Facts(steps=[step(1, code, printed=printed)], cells=[cell(1, code, printed)])
    decision = judge(question, has_files=True).on_answer(f"@mean[{first}]", seen)
    assert isinstance(decision, SendBack), decision
    assert [(r.key, r.kind) for r in decision.reasons] == [("doubtful", "many_values")], decision.reasons
    assert "printed 100 values inside @mean[...], not one" in decision.text
    assert f"{first} is only one of its rows" in decision.text
    right = "new = df['a'] - df['b']\nprint(f\"@mean[{new.mean():.2f}]\")"
    shown = f"@mean[{(df['a'] - df['b']).mean():.2f}]\n"
    seen = Facts(steps=[step(1, right, printed=shown)], cells=[cell(1, right, shown)])
    answer = f"@mean[{(df['a'] - df['b']).mean():.2f}]"
    assert isinstance(judge(question, has_files=True).on_answer(answer, seen), Accept)


def test_row_labels_of_a_printed_series_answered_as_values_are_doubtful() -> None:
    """The conversation benchmark's titanic with the 1.5B model: ``print(youngest.fare)``
    wrote ``803    8.5167`` and 803 was the answer; the 2 oldest passengers' ages were
    answered with their rows' labels, 630 and 851 (80.0 and 74.0)."""
    import pandas as pd

    titanic = pd.read_csv(SEABORN / "titanic.csv")  # what the installed pandas prints
    fare = "youngest = df[df.age == df.age.min()]\nprint(youngest.fare)"
    printed = str(titanic[titanic.age == titanic.age.min()].fare)
    assert printed == "803    8.5167\nName: fare, dtype: float64"
    seen = Facts(steps=[step(1, fare, printed=printed)], cells=[cell(1, fare, printed)])
    decision = judge("What fare did the youngest passenger pay?", has_files=True).on_answer("803", seen)
    assert isinstance(decision, SendBack), decision
    assert [(r.key, r.kind) for r in decision.reasons] == [("doubtful", "row_labels")], decision.reasons
    assert "803: the row labels of the Series the cell printed (its index, the left column), not its " \
        "values (8.5167, the right column)" in decision.text, decision.text
    oldest = "print(df.sort_values(by='age', ascending=False).head(2).age)"
    two = str(titanic.sort_values(by="age", ascending=False).head(2).age)
    seen = Facts(steps=[step(1, oldest, printed=two)], cells=[cell(1, oldest, two)])
    decision = judge("How old were the 2 oldest passengers?", has_files=True).on_answer("630 and 851", seen)
    assert isinstance(decision, SendBack) and "(80.0, 74.0, the right column)" in decision.text, decision
    for question, answer in (("How old were the 2 oldest passengers?", "80 and 74"),  # the values
                             ("What fare did the youngest passenger pay?", "8.5167"),
                             ("Which row holds the oldest passenger?", "630"),  # labels asked for
                             ("What is the index of the oldest passenger?", "630")):
        shown = two if "oldest" in question else printed
        code = oldest if "oldest" in question else fare
        seen = Facts(steps=[step(1, code, printed=shown)], cells=[cell(1, code, shown)])
        assert isinstance(judge(question, has_files=True).on_answer(answer, seen), Accept), (question, answer)
    both = "print(youngest.fare)\nprint(len(df))"
    shown = printed + "\n803"  # 803 printed as a value too
    seen = Facts(steps=[step(1, both, printed=shown)], cells=[cell(1, both, shown)])
    youngest = judge("What fare did the youngest passenger pay?", has_files=True)
    assert isinstance(youngest.on_answer("803", seen), Accept)
    # a Series whose index has a name (value_counts, groupby) is labelled by the data's values
    counts = "print(df.groupby('year').fare.count())"
    shown = str(pd.DataFrame({"year": [2013] * 3 + [2014] * 2, "fare": 1.0}).groupby("year").fare.count())
    assert shown == "year\n2013    3\n2014    2\nName: fare, dtype: int64"
    seen = Facts(steps=[step(1, counts, printed=shown)], cells=[cell(1, counts, shown)])
    year = "In what year did most passengers travel?"
    assert isinstance(judge(year, has_files=True).on_answer("2013", seen), Accept)
    unnamed = shown.replace("year\n", "")
    seen = Facts(steps=[step(1, counts, printed=unnamed)], cells=[cell(1, counts, unnamed)])
    assert isinstance(judge(year, has_files=True).on_answer("2013", seen), SendBack), \
        "the same rows with no index name are row labels"


def test_a_p_value_that_cannot_go_with_its_correlation_is_doubtful() -> None:
    """DABench medium 11: the 1.5B model's own p-value formula printed 0.9896 beside a
    correlation of 0.99 (on 3 rows that correlation's p is below 0.12; on the table's 400 it
    is about 0); and the other way round, p = 0.0000 for r = 0.01 over 400 rows (p >= 0.76
    even for r = 0.015)."""
    question = ("Calculate the Pearson correlation coefficient between High and Low and its p-value. "
                "@correlation_coefficient[r_value] @p_value[p_value]")

    def decide(answer: str, rows: tuple[int, ...] = (400,)) -> Accept | SendBack:
        shown = answer.replace(" ", "\n")
        facts = Facts(steps=[step(1, "print(x)", printed=shown)], cells=[cell(1, "print(x)", shown)])
        decision = judge(question, table_rows=rows).on_answer(answer, facts)
        assert isinstance(decision, (Accept, SendBack))
        return decision

    high = decide("@correlation_coefficient[0.99] @p_value[0.9896]")
    assert isinstance(high, SendBack) and [r.key for r in high.reasons] == ["doubtful"]
    assert "The p-value 0.9896 cannot go with the correlation 0.99" in high.text
    assert "below 0.11 even on 3 rows" in high.text and "scipy.stats.pearsonr(x, y)" in high.text
    low = decide("@correlation_coefficient[0.01] @p_value[0.0000]")
    assert isinstance(low, SendBack) and "above 0.76 even on all 400 rows" in low.text, low.text
    assert isinstance(decide("@correlation_coefficient[0.01] @p_value[0.0000]", rows=()), Accept), \
        "without the table's rows, only the p-value too large for any rows is doubted"
    for fine in ("@correlation_coefficient[0.99] @p_value[0.0000]",  # Pearson's own
                 "@correlation_coefficient[-0.04] @p_value[0.4058]",  # 400 rows: p = 0.42
                 "@correlation_coefficient[0.10] @p_value[0.0460]",   # 400 rows: p = 0.046
                 "@correlation_coefficient[0.9] @p_value[0.29]"):    # 3 rows: p = 0.29
        assert isinstance(decide(fine), Accept), fine
    kendall = judge("Kendall's tau correlation and its p-value: @tau[t] @p_value[p]", table_rows=(400,))
    answer = "@tau[0.99] @p_value[0.9896]"
    facts = Facts(steps=[step(1, "print(x)", printed=answer)], cells=[cell(1, "print(x)", answer)])
    assert isinstance(kendall.on_answer(answer, facts), Accept), "Kendall's p-value is not Student's t"


def test_numbers_no_cell_produced_are_named() -> None:
    facts = Facts(steps=[step(1, "print(len(df))", printed="3\n")], cells=[cell(1, "print(len(df))", "3")])
    decision = judge().on_answer("There are 3 rows and 17 columns.", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["unsupported"]
    assert "17" in decision.text and "3," not in decision.text
    assert isinstance(decision.grounding.claims, list) and len(decision.grounding.unsupported) == 1
    assert isinstance(judge(check_numbers=False).on_answer("There are 3 rows and 17 columns.", facts), Accept)


def test_an_empty_answer_goes_back() -> None:
    facts = Facts(steps=[step(1, "print(m)", printed="nan\n")], cells=[cell(1, "print(m)", "nan")])
    decision = judge().on_answer("nan", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["empty"]


def test_an_answer_not_in_the_form_asked_goes_back_with_the_form() -> None:
    facts = Facts(steps=[step(1, "print(m)", printed="2.5\n")], cells=[cell(1, "print(m)", "2.5")])
    j = judge("What is the mean? Answer as @mean[value].")
    decision = j.on_answer("The mean is 2.5.", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["form"]
    assert "@mean[value]" in decision.text  # twice, then in doubt: test_an_answer_in_prose_goes_back_twice...


def test_a_follow_up_with_only_an_earlier_questions_numbers_goes_back_naming_their_cell() -> None:
    cells = [cell(1, "df['TOTAL'].sum()", "800074"), {"cell_type": "markdown", "source": "### Question"}]
    decision = judge("Which state has the largest TOTAL?", has_files=True, cells_before=1,
                     first_cell=1).on_answer("800074", Facts(cells=cells))
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["no_work"]
    assert "cell [1]: df['TOTAL'].sum()" in decision.text
    cells.append(cell(2, "df.groupby('STATE').TOTAL.sum().idxmax()", "CA"))
    decision = judge("Which state has the largest TOTAL?", has_files=True, cells_before=1,
                     first_cell=1).on_answer("800074", Facts(cells=cells, steps=[step(1, "x", printed="CA")]))
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["stale"]
    assert "cell [1]: df['TOTAL'].sum()" in decision.text


def test_every_reason_goes_back_in_one_message() -> None:
    facts = Facts(steps=[step(1, "print(m)", error="NameError: m")], cells=[cell(1, "print(m)", "")])
    decision = judge("Mean? Answer as @mean[value].").on_answer("The mean is 7.35.", facts)
    assert isinstance(decision, SendBack)
    assert [r.key for r in decision.reasons] == ["failed", "unsupported", "form"]
    assert decision.text.count("\n- ") == 3


# -- after a step ------------------------------------------------------------------------------


FRAME = VariableInfo("df", "pandas.DataFrame", [3, 2], ["smoker", "tip"], {"smoker": "str", "tip": "float64"})


async def test_a_filter_on_a_value_the_column_never_holds_is_told_with_its_values() -> None:
    facts = Facts(variables={"df": FRAME},
                  columns={("df", "smoker"): ColumnValues(("Yes", "No"), 2, "str", False)})
    said = await judge().after_step(StepFacts("df[df['smoker'] == 'yes']", Execution(code="")), facts)
    assert [r.key for r in said.reasons] == ["check_values"] and "'Yes', 'No'" in said.notes[0]


async def test_an_empty_selection_and_a_nan_result_are_told() -> None:
    empty = VariableInfo("sel", "pandas.DataFrame", [0, 2])
    ex = Execution(code="", outputs=[{"output_type": "stream", "name": "stdout", "text": "nan\n"}],
                   variables=VariableChanges(created=[empty]))
    said = await judge().after_step(StepFacts("sel = df[df.tip > 99]; print(sel.tip.mean())", ex), Facts())
    assert [r.key for r in said.reasons] == ["check_empty", "check_empty"]
    assert not (await judge(check_results=False).after_step(StepFacts("x", ex), Facts())).reasons


async def test_the_sample_deviation_for_the_population_one_is_told_after_the_step() -> None:
    """DABench easy 129, medium 8: ``df['Fare'].std()`` for "the population standard
    deviation" gave 49.69 for 49.67."""
    ex = Execution(code="", outputs=[{"output_type": "stream", "name": "stdout", "text": "49.69\n"}])
    asked = "What is the population standard deviation of the fare? @std_dev_fare[value]"
    said = await judge(asked).after_step(StepFacts("print(round(df['Fare'].std(), 2))", ex), Facts())
    assert [r.key for r in said.reasons] == ["slip"] and "`.std(ddof=0)`" in said.notes[0]
    fixed = await judge(asked).after_step(StepFacts("print(round(df['Fare'].std(ddof=0), 2))", ex), Facts())
    assert not fixed.reasons
    off = await judge(asked, check_results=False).after_step(StepFacts("df.Fare.std()", ex), Facts())
    assert not off.reasons


async def test_text_left_in_a_table_the_question_encodes_whole_is_told_with_the_code_that_ends_it() -> None:
    """DSEval housing-price-prediction with the 1.5B model: "Encode the categorical features
    using label encoder" run on ``furnishingstatus`` alone, six text columns left, and the
    models of the next questions fit on text. The line's code is run here on the real file."""
    import pandas as pd

    from tests.dseval_problems import PROBLEMS

    housing = pd.read_csv(PROBLEMS / "_inputs" / "housing-price-prediction" / "Housing.csv")
    encoded = housing.assign(furnishingstatus=housing["furnishingstatus"].astype("category").cat.codes)
    info = VariableInfo("housing", "pandas.DataFrame", list(encoded.shape), list(encoded.columns),
                        {str(k): str(v) for k, v in encoded.dtypes.items()})
    ex = Execution(code="", variables=VariableChanges(changed=[info]))
    code = "housing['furnishingstatus'] = le.fit_transform(housing['furnishingstatus'])"
    asked = ("Encode the categorical features using label encoder from sklearn. Save the encoded dataset "
             "in-place.")
    said = await judge(asked).after_step(StepFacts(code, ex), Facts())
    assert [r.key for r in said.reasons] == ["check_text_left"], said.reasons
    assert "`housing` still holds text in `mainroad`, `guestroom`, `basement`" in said.notes[0], said.notes[0]
    example = re.search(r"`(for col in [^`]+)`", said.notes[0])
    assert example is not None, said.notes[0]
    from sklearn.preprocessing import LabelEncoder

    namespace = {"housing": encoded.copy(), "LabelEncoder": LabelEncoder}
    exec(example.group(1), namespace)
    assert all(pd.api.types.is_numeric_dtype(t) for t in namespace["housing"].dtypes)
    named = "Encode the categorical features, one-hot for \"mainroad\" and label encoding for \"prefarea\"."
    assert not (await judge(named).after_step(StepFacts(code, ex), Facts())).reasons
    other = judge("How many houses have a basement?")
    assert not (await other.after_step(StepFacts(code, ex), Facts())).reasons


async def test_an_undone_encoding_is_sent_back_with_the_code_that_encodes_the_text_columns() -> None:
    """DSEval employee-dataset on b8f462d: "label encoding" run as ``get_dummies``, undone, and
    "The categorical columns have been encoded" answered at once (and again after it went
    back). The undone step's line about text left is dropped (the table it described is gone),
    and the send-back gives the loop over the table's own text columns."""
    employee = VariableInfo("employee", "pandas.DataFrame", [2764, 4],
                            ["Education", "City", "Age", "LeaveOrNot"],
                            {"Education": "str", "City": "str", "Age": "int64", "LeaveOrNot": "int64"})
    dummies = VariableInfo("employee", "pandas.DataFrame", [2764, 9],
                           ["Age", "LeaveOrNot", "EverBenched", "Education_Bachelors", "City_Pune"],
                           {"Age": "int64", "LeaveOrNot": "int64", "EverBenched": "str",
                            "Education_Bachelors": "bool", "City_Pune": "bool"})
    asked = "Encode the categorical columns using label encoding. Save the result in-place."
    facts = QuestionFacts(asked, (), True, 1, 0, (), {"employee": employee}, asks_change=True)
    j = Judge(JudgeSettings(tool_name=TOOL), facts)
    code = "employee = pd.get_dummies(employee, columns=['Education', 'City'])"
    ex = Execution(code="", variables=VariableChanges(changed=[dummies]), execution_count=9)
    said = await j.after_step(StepFacts(code, ex), Facts())
    assert said.revert is not None and said.revert.key == "data_undone", said
    assert "check_text_left" not in [r.key for r in said.reasons], said.reasons
    assert "For example: `for col in ['Education', 'City']:" in said.revert.text, said.revert.text
    decision = j.on_answer("The categorical columns have been encoded using label encoding.",
                           Facts(steps=[step(1, code)], cells=[cell(1, code, "")]))
    assert isinstance(decision, SendBack) and "change_undone" in [r.key for r in decision.reasons], decision
    assert ("For example: `for col in ['Education', 'City']: employee[col] = "
            "LabelEncoder().fit_transform(employee[col])`") in decision.text, decision.text


async def test_label_encoding_asked_and_get_dummies_sent_runs_as_label_encoding() -> None:
    """DSEval employee-dataset on f2da134: "Encode the categorical columns using label
    encoding" as ``get_dummies``, undone, the loop to run given, and "encoded" answered twice;
    the seven questions after fit on text. The step runs as the question asks, and what runs
    leaves the table as the authors' reference cell does (run here on the set's file)."""
    import pandas as pd
    from sklearn.preprocessing import LabelEncoder

    from tests.dseval_problems import PROBLEMS

    employee = pd.read_csv(PROBLEMS / "_inputs" / "employee-dataset" / "Employee.csv")
    info = VariableInfo("employee", "pandas.DataFrame", list(employee.shape), list(employee.columns),
                        {str(k): str(v) for k, v in employee.dtypes.items()})
    asked = "Encode the categorical columns using label encoding. Save the result in-place."
    facts = QuestionFacts(asked, (), True, 1, 0, (), {"employee": info}, asks_change=True)
    j = Judge(JudgeSettings(tool_name=TOOL), facts)
    sent = ("employee = pd.get_dummies(employee, columns=['Education', 'Gender', 'City'])\n"
            "print(employee.shape)")
    decision = j.on_action(code(sent), Facts())
    assert isinstance(decision, Run), decision
    ran = decision.action.code
    assert "get_dummies" not in ran and ran.endswith("print(employee.shape)"), ran
    mine = {"employee": employee.copy(), "pd": pd}
    exec(ran.replace("print(employee.shape)", ""), mine)
    reference = employee.copy()
    for column in reference.select_dtypes(include=["object", "str"]).columns:
        reference[column] = LabelEncoder().fit_transform(reference[column])
    pd.testing.assert_frame_equal(mine["employee"], reference)
    ex = Execution(code="", outputs=[{"output_type": "stream", "name": "stdout", "text": "(4653, 9)\n"}])
    said = await j.after_step(StepFacts(ran, ex), Facts())
    assert [r.key for r in said.reasons][:1] == ["label_encoding_mended"] and said.revert is None, said
    assert "text column of `employee` (Education, City, Gender, EverBenched)" in said.notes[0], said.notes[0]
    naming = QuestionFacts("Use label encoding for 'City'.", (), True, 1, 0, (), {"employee": info},
                           asks_change=True)
    named = Judge(JudgeSettings(tool_name=TOOL), naming)
    kept = named.on_action(code(sent), Facts())
    assert isinstance(kept, Run) and "get_dummies" in kept.action.code, "a question naming its columns"


async def test_a_tests_result_unpacked_p_value_first_runs_swapped_and_the_model_is_told() -> None:
    """DABench hard 177 with the 1.5B model: ``p_value, _ = mannwhitneyu(...)`` printed the U
    statistic as the p-value, and told so, the model sent the same cell three times."""
    j = judge("Is the age different between the classes? Use the Mann-Whitney U test. @p_value[p]")
    sent = "p_value, _ = mannwhitneyu(a, b)\nprint(round(p_value, 4))"
    decision = j.on_action(code(sent), Facts())
    assert isinstance(decision, Run) and decision.action.code == "_, p_value = mannwhitneyu(a, b)\n" \
        "print(round(p_value, 4))", decision
    ex = Execution(code="", outputs=[{"output_type": "stream", "name": "stdout", "text": "0.0\n"}])
    said = await j.after_step(StepFacts(decision.action.code, ex), Facts())
    assert [r.key for r in said.reasons] == ["statistic_first_mended"], said.reasons
    assert "ran with the two names swapped" in said.notes[0]


async def test_a_block_rewritten_twice_runs_with_both_rewrites_and_both_are_told() -> None:
    """An indentation mend and the population deviation on one block: it runs with both, and
    the model reads both notes above the output (each rewrite was once kept apart, and the
    indentation's note was lost when the deviation rewrote the mended code again)."""
    asked = "What is the population standard deviation of the fare? @std_dev_fare[value]"
    j = judge(asked)
    sent = "fares = df['Fare']\n    print(round(fares.std(), 2))"
    decision = j.on_action(code(sent), Facts())
    assert isinstance(decision, Run), decision
    ran = decision.action.code
    assert ran == "fares = df['Fare']\nprint(round(fares.std(ddof=0), 2))", ran
    ex = Execution(code="", outputs=[{"output_type": "stream", "name": "stdout", "text": "49.67\n"}])
    said = await j.after_step(StepFacts(decision.action.code, ex), Facts())
    assert [r.key for r in said.reasons] == ["indentation_mended", "population_std_mended"], said.reasons
    again = await j.after_step(StepFacts("print(1)", ex), Facts())
    assert not again.reasons, "the notes go with the step they were made for"


async def test_a_step_that_shrinks_the_persons_table_is_undone_unless_the_question_asks() -> None:
    frames = {"df": VariableInfo("df", "pandas.DataFrame", [3, 2], ["tip", "day"])}
    smaller = VariableInfo("df", "pandas.DataFrame", [2, 2], ["tip", "day"])
    ex = Execution(code="", variables=VariableChanges(changed=[smaller]), execution_count=4)
    step = StepFacts("df = df[df.tip > 1]\nprint(len(df))", ex)
    facts = QuestionFacts("What share tipped more than 1?", frames=frames)
    j = Judge(JudgeSettings(), facts)
    said = await j.after_step(step, Facts())
    assert said.revert is not None and said.revert.key == "data_undone" and not said.kept
    assert "replaced `df` (the person's data: 3 rows) by 2 rows" in said.revert.text
    assert "`subset = df[df.tip > 1]`" in said.revert.text and j.budget.undone_at == 1
    asked = Judge(JudgeSettings(), QuestionFacts("Drop the small tips from now on.", frames=frames,
                                                 asks_change=True))
    said = await asked.after_step(step, Facts())
    assert said.revert is None and [c.rows for c in said.kept] == [2]
    assert "`df`: 2 of 3 rows since cell [4] (`df = df[df.tip > 1]`)" in said.notes[-1]
    grown = VariableInfo("df", "pandas.DataFrame", [3, 3], ["tip", "day", "pct"])
    wider = Execution(code="", variables=VariableChanges(changed=[grown]))
    assert (await j.after_step(StepFacts("df['pct'] = df.tip", wider), Facts())).revert is None
    gone = Execution(code="", variables=VariableChanges(deleted=["df"]))
    assert (await j.after_step(StepFacts("del df", gone), Facts())).revert is not None
    assert (await Judge(JudgeSettings(keep_data=False), facts).after_step(step, Facts())).revert is None


async def test_a_step_that_reads_the_persons_table_again_is_undone_and_not_renamed() -> None:
    """The conversation benchmark's tips: "From now on, look only at dinners" kept, and the
    third question's step began ``df = pd.read_csv('tips.csv')``: the dinners-only table gone
    for the rest of the conversation. A copy under a new name would be as wrong, so the code
    sent again is not renamed: it is undone again."""
    frames = {"df": VariableInfo("df", "pandas.DataFrame", [176, 7], ["tip", "day", "time"])}
    whole = VariableInfo("df", "pandas.DataFrame", [244, 7], ["tip", "day", "time"])
    ex = Execution(code="", variables=VariableChanges(changed=[whole]), execution_count=6)
    code = "df = pd.read_csv('tips.csv')\nprint((df[df.day == 'Sat'].smoker == 'Yes').mean())"
    asks = "Of the Saturday dinners, what percent were smokers?"
    j = Judge(JudgeSettings(), QuestionFacts(asks, frames=frames))
    said = await j.after_step(StepFacts(code, ex), Facts())
    assert said.revert is not None and said.revert.key == "data_undone", said
    assert said.revert.text.startswith("Step 1 replaced `df` (the person's data as this conversation left "
                                       "it: 176 rows) by 244 rows: reading the file again"), said.revert.text
    assert "(do not read the file again)" in said.revert.text
    again = j.on_action(Action(code, Via.TOOL_CALL, "call-2"), Facts(variables=frames))
    assert isinstance(again, Run) and again.action.code == code, "not renamed"
    asked = Judge(JudgeSettings(), QuestionFacts("From now on, use every meal again. How many bills?",
                                                 frames=frames, asks_change=True))
    kept = await asked.after_step(StepFacts(code, ex), Facts())
    assert kept.revert is None and "`df`: 244 rows (was 176) since cell [6]" in kept.notes[-1], kept.notes
    # rows added otherwise (a concat) go on as a copy under a new name, as a subset does
    concat = "df = pd.concat([df, extra])\nprint(len(df))"
    j = Judge(JudgeSettings(), QuestionFacts(asks, frames=frames))
    said = await j.after_step(StepFacts(concat, ex), Facts())
    assert said.revert is not None, said
    assert "replaced `df` (the person's data: 176 rows) by 244 rows" in said.revert.text
    renamed_run = j.on_action(Action(concat, Via.TOOL_CALL, "call-3"), Facts(variables=frames))
    assert isinstance(renamed_run, Run) and renamed_run.action.code.startswith("df_work = df\n"), renamed_run


async def test_undone_code_sent_again_runs_with_the_table_renamed() -> None:
    """DABench 124 with the 1.5B model: the step that re-read the file into ``df`` and kept
    one vaccine's rows was undone, and the model sent the same code four times, each undone.
    Sent again, it runs with ``df`` renamed: it computes what it was written for and the
    person's ``df`` stays whole."""
    frames = {"df": VariableInfo("df", "pandas.DataFrame", [3, 2], ["tip", "day"])}
    code = "# the big tips\ndf = df[df.tip > 1]\nprint(len(df))"
    j = Judge(JudgeSettings(), QuestionFacts("What share tipped more than 1?", frames=frames))
    smaller = VariableInfo("df", "pandas.DataFrame", [2, 2], ["tip", "day"])
    shrunk = Execution(code="", variables=VariableChanges(changed=[smaller]), execution_count=4)
    assert (await j.after_step(StepFacts(code, shrunk), Facts())).revert is not None
    again = j.on_action(Action(code + "\n", Via.TOOL_CALL, "call-2"), Facts(variables=frames))
    assert isinstance(again, Run) and again.action.call_id == "call-2"
    assert again.action.code == ("df_work = df\n# the big tips\ndf_work = df_work[df_work.tip > 1]\n"
                                 "print(len(df_work))\n"), "the comment stays"
    subset = VariableInfo("df_work", "pandas.DataFrame", [2, 2], ["tip", "day"])
    ran = Execution(code=again.action.code, variables=VariableChanges(created=[subset]), execution_count=5)
    said = await j.after_step(StepFacts(again.action.code, ran), Facts())
    assert said.revert is None and [r.key for r in said.reasons] == ["data_renamed"]
    assert said.notes[0].startswith("This is the code of step 1 again, which was undone"), said.notes
    assert "It ran with `df` renamed `df_work`, so `df` stays as the person has it" in said.notes[0]
    taken = {**frames, "df_work": subset}
    third = j.on_action(Action(code, Via.TOOL_CALL, "call-3"), Facts(variables=taken))
    assert isinstance(third, Run) and third.action.code.startswith("df_work2 = df\n"), "a free name"
    # sent again right after it ran renamed: the same names, so a repeat (DABench 124 on this
    # sitting's tree: df_work, df_work2, df_work3, df_work4, the same cell each time)
    after_third = {**taken, "df_work2": VariableInfo("df_work2", "pandas.DataFrame", [2, 2], ["tip", "day"])}
    ran_renamed = Facts(variables=after_third, steps=[step(1, code, printed="2\n"),
                                                      step(2, third.action.code, printed="2\n")])
    j.budget.undone_at = -1
    fourth = j.on_action(Action(code, Via.TOOL_CALL, "call-5"), ran_renamed)
    assert isinstance(fourth, Skip) and fourth.reason.key == "repeated_success", fourth
    other = j.on_action(Action("print(len(df))", Via.TOOL_CALL, "call-4"), Facts(variables=frames))
    assert isinstance(other, Run) and other.action.code == "print(len(df))", "other code runs as sent"
    plain = Judge(JudgeSettings(), QuestionFacts("What share tipped more than 1?", frames=frames))
    first = plain.on_action(Action(code, Via.TOOL_CALL, "call-1"), Facts(variables=frames))
    assert isinstance(first, Run) and first.action.code == code, "never undone: runs as sent"


def test_renaming_a_table_keeps_what_the_code_computes() -> None:
    code = textwrap.dedent("""\
        import pandas as pd
        df = pd.read_csv('tips.csv')  # read again
        df = df[df['tip'] > 1]
        def share(df):
            return len(df)
        def total():
            global df
            return df['tip'].sum()
        first = lambda df: df.iloc[0]
        print(f"{len(df)} rows", share(df=df), total(), first(df), [len(df) for _ in range(1)])
        del df
    """)
    rewrite = renamed(code, ["df"], {"df", "df_work"})
    assert rewrite is not None and rewrite.names == {"df": "df_work2"}
    assert rewrite.code.startswith("df_work2 = df\nimport pandas as pd\ndf_work2 = pd.read_csv('tips.csv')\n")
    assert "def share(df):\n    return len(df)" in rewrite.code, "a parameter of the name is left alone"
    assert "global df_work2\n    return df_work2['tip'].sum()" in rewrite.code
    assert "first = lambda df: df.iloc[0]" in rewrite.code
    assert ('print(f\'{len(df_work2)} rows\', share(df=df_work2), total(), first(df_work2), '
            '[len(df_work2) for _ in range(1)])') in rewrite.code
    assert rewrite.code.endswith("del df_work2\n")
    assert "read again" not in rewrite.code, "a renamed `global` has no column: written from the tree"
    assert renamed("print(len(tips))", ["df"], set()) is None
    assert renamed("df = df[", ["df"], set()) is None


def test_renaming_keeps_the_persons_comments_and_layout() -> None:
    """The renamed code is the step's cell in the notebook a person reads: every use is
    replaced where it stands, comments, blank lines and quotes as the model wrote them."""
    code = textwrap.dedent("""        # Keep only the transit planets
        df = df[df["method"] == "Transit"]  # a subset

        print(f"{len(df)} planets", "df", df.shape)   # the word in the string stays
    """)
    rewrite = renamed(code, ["df"], {"df"})
    assert rewrite is not None
    assert rewrite.code == textwrap.dedent("""        df_work = df
        # Keep only the transit planets
        df_work = df_work[df_work["method"] == "Transit"]  # a subset

        print(f"{len(df_work)} planets", "df", df_work.shape)   # the word in the string stays
    """)


async def test_an_error_gets_its_hint() -> None:
    ex = Execution(code="", status="error", error=ExecutionError("KeyError", "'Smoker'", []))
    said = await judge().after_step(StepFacts("df['Smoker']", ex), Facts(variables={"df": FRAME}))
    assert [r.key for r in said.reasons] == ["hint"] and "'smoker'" in said.notes[0]


async def test_a_step_at_the_time_limit_is_told_how_to_run_long_code() -> None:
    ex = Execution(code="slow()", status="timeout")
    said = await judge().after_step(StepFacts("slow()", ex), Facts())
    assert [r.key for r in said.reasons] == ["background_hint"]
    ok = await judge().after_step(StepFacts("fast()", Execution(code="fast()")), Facts())
    assert "background_hint" not in [r.key for r in ok.reasons], "told only when it applies"


async def test_code_that_changes_the_world_is_told_how_to_keep_it_from_running_again() -> None:
    sent = "import smtplib\nsmtplib.SMTP('mail').sendmail('a', 'b', 'hi')"
    said = await judge().after_step(StepFacts(sent, Execution(code=sent)), Facts())
    assert [r.key for r in said.reasons] == ["no_replay_hint"]
    marked = "# no-replay\n" + sent
    assert not (await judge().after_step(StepFacts(marked, Execution(code=marked)), Facts())).reasons
    read_only = "print(len(df))"
    assert not (await judge().after_step(StepFacts(read_only, Execution(code=read_only)), Facts())).reasons


async def test_the_last_code_run_is_said_apart() -> None:
    j = judge(max_steps=1)
    assert isinstance(j.on_action(code("x = 1"), Facts()), Run)
    said = await j.after_step(StepFacts("x = 1", Execution(code="x = 1")), Facts())
    assert said.closing is not None and said.closing.key == "last_step" and not said.reasons


# -- after a reply -----------------------------------------------------------------------------


def test_replies_that_run_nothing_three_times_in_a_row_stop_the_answer() -> None:
    j, facts = judge(), Facts()
    for _ in range(2):
        assert j.after_reply(j.on_reply(read(""), "", facts), facts) is None
    stop = j.after_reply(j.on_reply(read(""), "", facts), facts)
    assert isinstance(stop, Stop) and stop.reason.key == "stalled"


def test_a_reply_that_ran_a_step_resets_the_count() -> None:
    j, facts = judge(), Facts()
    j.after_reply(j.on_reply(read(""), "", facts), facts)
    text = "```python\nx = 1\n```"
    decision = j.on_reply(read(text), text, facts)
    assert j.after_reply(decision, Facts(steps=[step(1, "x = 1")])) is None and j.budget.idle == 0


def test_a_reply_after_the_step_limit_was_used_stops_the_answer() -> None:
    j, facts = judge(max_steps=1), Facts()
    j.budget.steps = 1
    text = "```python\nx = 1\n```"
    stop = j.after_reply(j.on_reply(read(text), text, facts), facts)
    assert isinstance(stop, Stop) and stop.reason.key == "step_limit"


@pytest.mark.parametrize(("reply", "calls", "kept"), [("It is 3.", False, "It is 3."),
                                                      ("```python\nprint(3)\n```", False, ""),
                                                      ("It is 3.", True, "")])
def test_only_prose_is_a_partial_answer(reply: str, calls: bool, kept: str) -> None:
    assert judge().partial_answer(reply, calls=calls) == kept


def test_an_answer_without_the_form_is_completed_from_what_its_cells_printed() -> None:
    printed = "@skewness_coefficient[-0.03]\n@skewness_type[Negative Skewness]"
    facts = Facts(steps=[step(1, "print(...)", printed=printed)],
                  cells=[{"cell_type": "markdown", "source": "### Question"}, cell(1, "print(...)", printed)])
    question = "Skewness? Answer as @skewness_coefficient[value] @skewness_type[type]."
    decision = judge(question, first_cell=0).on_answer("The skewness is slightly negative.", facts)
    assert isinstance(decision, Accept) and decision.completed_from == (1,)
    assert decision.answer.endswith("@skewness_coefficient[-0.03] @skewness_type[Negative Skewness]")


def test_an_items_value_is_written_as_the_question_offers_it() -> None:
    """The judge writes an offered value as the question spells it (``not_normal`` for "Not
    Normal"), takes no printed value the question does not offer (``1.0``), and sends back an
    answer whose item is none of them."""
    question = ('Is it normal? @p_value[p] @normality[result] where "p" is a number and "result" is a '
                'string that can either be "normal" or "not_normal".')
    printed = "@p_value[0.01]\n@normality[1.0]\n"
    facts = Facts(steps=[step(1, "print(...)", printed=printed)],
                  cells=[{"cell_type": "markdown", "source": "### Question"}, cell(1, "print(...)", printed)])
    decision = judge(question, first_cell=0).on_answer("@p_value[0.01] @normality[Not Normal]", facts)
    assert isinstance(decision, Accept) and decision.answer == "@p_value[0.01] @normality[not_normal]"
    decision = judge(question, first_cell=0).on_answer("The p-value is 0.01: it is not normal.", facts)
    assert isinstance(decision, Accept), decision
    assert decision.answer.endswith("@p_value[0.01] @normality[not_normal]")
    assert decision.completed_from == (1,)
    sent = judge(question, first_cell=0).on_answer("@p_value[0.01] @normality[1.0]", facts)
    assert isinstance(sent, SendBack) and "not among the values the question offers" in sent.text


def test_a_verdict_printed_by_a_step_that_left_nan_does_not_complete_the_form() -> None:
    """DABench hard 109 with the 1.5B model: a t-test on a column with gaps left ``p_value``
    NaN, the cell printed ``@significance[no significant]`` (``nan < 0.05`` is False), and the
    answer's prose said the difference is significant. The cell's numbers still complete it;
    its verdict does not, and the prose's does (the values offered as ``[a/b]``)."""
    question = ("Is the difference significant? @graduate_mean[mean] @significance[significant/no "
                "significant] where mean is rounded to two decimal places.")
    printed = "@graduate_mean[141.36]\n@significance[no significant]\n"
    nan = VariableInfo("p_value", "numpy.float64", summary="np.float64(nan)")
    facts = Facts(steps=[step(1, "print(...)", printed=printed, changed=[nan], count=1)],
                  cells=[{"cell_type": "markdown", "source": "### Question"}, cell(1, "print(...)", printed)])
    said = "The p-value is 0.0001, so there is a significant difference."
    answer, cells = judge(question, first_cell=0).completed(said, facts)  # as a partial answer is
    assert answer.endswith("@graduate_mean[141.36] @significance[significant]") and cells == (1,)
    fine = Facts(steps=[step(1, "print(...)", printed=printed, count=1)], cells=facts.cells)
    answer, _ = judge(question, first_cell=0).completed(said, fine)
    assert answer.endswith("@graduate_mean[141.36] @significance[no significant]")


def test_the_one_name_asked_printed_where_the_items_name_goes_completes_the_form() -> None:
    """DABench easy 59 with the 1.5B model: ``print(f"@{country}[{cases}]")`` printed
    ``@Congo[965200]`` for ``@country_name[country]``, the answer was the same, sent back and
    insisted on, and two attempts ran out of time. The name printed is the item's value; not
    for a number asked, nor when two such names were printed."""
    question = "Which country has the highest average? @country_name[country], a string."
    facts = Facts(steps=[step(1, "print(...)", printed="@Congo[965200]\n")],
                  cells=[{"cell_type": "markdown", "source": "### Question"},
                         cell(1, "print(...)", "@Congo[965200]\n")])
    decision = judge(question, first_cell=0).on_answer("@Congo[965200]", facts)
    assert isinstance(decision, Accept) and decision.answer.endswith("@country_name[Congo]"), decision
    number = "What is the highest average? @mean_cases[value]"
    assert isinstance(judge(number, first_cell=0).on_answer("@Congo[965200]", facts), SendBack)
    other = Facts(steps=[step(1, "print(...)", printed="@mean_cases[965200]\n")],
                  cells=[cell(1, "print(...)", "@mean_cases[965200]\n")])
    assert isinstance(judge(question, first_cell=0).on_answer("@mean_cases[965200]", other), SendBack)
    two = Facts(steps=[step(1, "print(...)", printed="@Congo[965200]\n@Peru[12]\n")],
                cells=[cell(1, "print(...)", "@Congo[965200]\n@Peru[12]\n")])
    assert isinstance(judge(question, first_cell=0).on_answer("@Congo[965200]", two), SendBack)
    # easy 123: the item's name says nothing of a name, its placeholder does
    long = "Which country has the highest average? @country_with_highest_average[country_name]"
    decision = judge(long, first_cell=0).on_answer("@Congo[965200]", facts)
    assert isinstance(decision, Accept) and decision.answer.endswith("@country_with_highest_average[Congo]")


def test_lines_labelled_with_the_items_names_complete_the_form() -> None:
    """DABench hard 124 and 125 with the 1.5B model: the cells printed
    ``Significance of difference: no`` and ``R-squared: 0.705``, and the answers came in prose
    (at the time limit, and sent back twice). An item printed in the form wins over a
    labelled line; a label that is another name, or a placeholder, completes nothing."""
    printed = ("Significance of difference: no\nR-squared = 0.705\nP value of the test: 0.01\n"
               "mean: value\n")
    facts = Facts(steps=[step(1, "print(...)", printed=printed),
                         step(2, "print(...)", printed="@r_squared[0.71]")],
                  cells=[{"cell_type": "markdown", "source": "### Question"}, cell(1, "print(...)", printed),
                         cell(2, "print(...)", "@r_squared[0.71]")])
    question = ("Answer as @significance_of_difference[yes or no] @r_squared[value] @p_value[p] "
                "@mean[m].")
    decision = judge(question, first_cell=0).on_answer("There is no significant difference.", facts)
    assert isinstance(decision, SendBack), "p_value and mean are still missing"
    text, cells = judge(question, first_cell=0).completed("There is no significant difference.", facts)
    assert text.endswith("@significance_of_difference[no] @r_squared[0.71]"), text
    assert cells == (1, 2)


def test_undone_cells_neither_complete_the_form_nor_count_as_the_questions_code() -> None:
    """A further attempt's branch is forked after the first attempt's cells were undone: the
    notebook keeps them (marked ``undone``) after the question's cell, and they were read as
    the branch's own cells: the form completed from what they printed (a state that is gone),
    the doubts read their code. The same for a model's own undo and a rolled-back streak."""
    printed = "@skewness_coefficient[-0.03]\n@skewness_type[Negative Skewness]"
    gone = cell(1, "print(...)", printed)
    gone["metadata"]["kernel_analyst"]["undone"] = True
    question = "Skewness? Answer as @skewness_coefficient[value] @skewness_type[type]."
    header = {"cell_type": "markdown", "source": "### Question"}
    facts = Facts(steps=[step(2, "print(df.shape)", printed="(891, 12)\n")],
                  cells=[header, gone, cell(2, "print(df.shape)", "(891, 12)")])
    decision = judge(question, first_cell=0).on_answer("The skewness is slightly negative.", facts)
    assert isinstance(decision, SendBack) and "form" in [r.key for r in decision.reasons], decision
    assert code_since(facts.cells, 0) == ["print(df.shape)"]
    assert printed_since(facts.cells, 0) == [(2, "(891, 12)\n")]
    live = dict(gone, metadata={"kernel_analyst": {"status": "ok"}})
    assert code_since([header, live], 0) == ["print(...)"], "a cell not undone is read"


def test_a_result_asked_to_be_shown_and_never_shown_goes_back() -> None:
    """DSEval employee-dataset with the 1.5B model: "Create a pivot table ... Show the result in a
    DataFrame" ran ``pivot_table = employee.pivot_table(...)`` (an assignment shows nothing)
    and answered "The pivot table shows the average 'PaymentTier' for each 'Education' level"."""
    question = ("Create a pivot table that shows the average 'PaymentTier' for each 'Education' level. "
                "Show the result in a DataFrame with 'Education' as the index.")
    silent = "pivot_table = employee.pivot_table(values='PaymentTier', index='Education', aggfunc='mean')"
    quiet = {"cell_type": "code", "id": "c1", "execution_count": 1, "source": silent, "outputs": [],
             "metadata": {"kernel_analyst": {"status": "ok"}}}
    facts = Facts(steps=[step(1, silent, printed="")], cells=[quiet])
    answer = "The pivot table shows the average 'PaymentTier' for each 'Education' level."
    decision = judge(question, has_files=True).on_answer(answer, facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["nothing_shown"], decision
    assert "asks to show the result, and this question's code showed nothing" in decision.text
    shown = dict(quiet, outputs=[{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                  "data": {"text/plain": "Education  PaymentTier\nBachelors 2.6"}}])
    facts = Facts(steps=[step(1, silent, printed="")], cells=[shown])
    again = judge(question, has_files=True).on_answer(answer, facts)
    assert "nothing_shown" not in [r.key for r in getattr(again, "reasons", ())], again
    # DSEval's "Return a DataFrame ...": `students = students.sort_values(...)`, and an answer about it
    sort = "students = students.sort_values(by='ParentEduc')"
    returning = judge("Sort the education level from lowest to highest. Return a DataFrame with "
                      "\"ParentEduc\" as the index.", has_files=True)
    sorted_facts = Facts(steps=[step(1, sort, printed="")], cells=[dict(quiet, source=sort)])
    returned = returning.on_answer("The sorted DataFrame has 30641 rows.", sorted_facts)
    assert "nothing_shown" in [r.key for r in getattr(returned, "reasons", ())], returned
    # a question that does not ask to show: saving in place shows nothing, rightly
    in_place = judge("Encode the 'Gender' column as 0 and 1. Save the result in-place.", has_files=True)
    kept = in_place.on_answer("The 'Gender' column has been encoded.",
                              Facts(steps=[step(1, silent, printed="")], cells=[quiet]))
    assert isinstance(kept, Accept), kept


def test_a_table_asked_for_and_not_shown_by_the_last_cell_goes_back() -> None:
    """DSEval students-exam-scores 5 with the 1.5B model: "Return a DataFrame ... only the rows
    that are outliers" made ``outliers`` and then printed the two bounds in its last cell,
    answering with them. A last cell that displays the table, or prints one, is an answer."""
    question = ("Detect the outliers in math score using the IQR method. Return a DataFrame with the same "
                "columns as the original dataset and only the rows that are outliers.")
    make = "outliers = students[students['MathScore'] < 23]"
    bounds = "print(lower_bound)\nprint(upper_bound)"
    answer = "The outliers are the scores below 23.0 or above 111.0."
    facts = Facts(steps=[step(1, make), step(2, bounds, printed="23.0\n111.0")],
                  cells=[dict(cell(1, make, ""), outputs=[]), cell(2, bounds, "23.0\n111.0")])
    decision = judge(question, has_files=True).on_answer(answer, facts)
    assert isinstance(decision, SendBack) and "nothing_shown" in [r.key for r in decision.reasons], decision
    assert "asks for a DataFrame, and this question's last cell shows none" in decision.text
    table = dict(cell(3, "outliers", ""), outputs=[{"output_type": "execute_result", "execution_count": 3,
                                                     "metadata": {}, "data": {"text/plain": "  Gender ..."}}])
    shown = Facts(steps=[*facts.steps, step(3, "outliers")], cells=[*facts.cells, table])
    again = judge(question, has_files=True).on_answer("There are 76 outlier rows, shown above.", shown)
    assert "nothing_shown" not in [r.key for r in getattr(again, "reasons", ())], again
    one_per_line = cell(3, "print(a)\nprint(b)\nprint(c)", "0.8178\n0.9526\n0.8071")
    numbers = Facts(steps=[*facts.steps, step(3, "print(a)")], cells=[*facts.cells, one_per_line])
    still = judge(question, has_files=True).on_answer("The outliers are below 23.0 or above 111.0.", numbers)
    assert "nothing_shown" in [r.key for r in getattr(still, "reasons", ())], still
    printed = cell(3, "print(outliers)", "   Gender  MathScore\n12  male  20\n40  female  18")
    table_printed = Facts(steps=[*facts.steps, step(3, "print(outliers)")], cells=[*facts.cells, printed])
    also = judge(question, has_files=True).on_answer("There are 76 outlier rows, shown above.", table_printed)
    assert "nothing_shown" not in [r.key for r in getattr(also, "reasons", ())], also
    shape = Facts(steps=[step(1, "print(df.shape)")], cells=[cell(1, "print(df.shape)", "(30641, 14)")])
    shown_shape = judge("Show the shape of the dataframe.", has_files=True)
    told = shown_shape.on_answer("30641 rows, 14 columns.", shape)
    assert "nothing_shown" not in [r.key for r in getattr(told, "reasons", ())], "a shape is no table"


def test_a_number_sent_back_and_then_typed_into_code_goes_back() -> None:
    """DSEval students-exam-scores with the 1.5B model: correlations made up, sent back as no
    output's, then written into the matrix (``correlation_matrix.iloc[0, 1] = 0.85``) and
    cited from that cell's code."""
    question = "Compute the mutual correlation among math, reading and writing scores."
    corr = "correlation_matrix = students[['MathScore', 'ReadingScore']].corr()"
    answer = "MathScore and ReadingScore have a correlation of 0.85."
    the_judge, quiet = _sent_back_as_no_outputs(question, corr, answer)
    typed = "correlation_matrix.iloc[0, 1] = 0.85"
    written = dict(quiet, id="c2", execution_count=2, source=typed)
    facts = Facts(steps=[step(1, corr, printed=""), step(2, typed, printed="")], cells=[quiet, written])
    second = the_judge.on_answer(answer, facts)
    assert isinstance(second, SendBack) and [r.key for r in second.reasons] == ["typed_in"], second
    assert "now they come only from code that writes them in as they are: 0.85" in second.text
    # a number from code that was never sent back (a threshold the code chose) is no laundering
    fresh = judge(question, has_files=True).on_answer(answer, facts)
    assert "typed_in" not in [r.key for r in getattr(fresh, "reasons", ())], fresh


def test_a_number_sent_back_and_then_printed_as_typed_goes_back() -> None:
    """DABench hard 125 with the 1.5B model: an R-squared made up, sent back, then printed by
    ``print(f"R-squared: {0.705}")`` and cited from that cell's output. A number the same
    cell computes and prints is the cell's, even when the code holds other literals."""
    question = "Fit a linear regression of y on x and report the R-squared."
    fit = "model = LinearRegression().fit(df[['x']], df['y'])"
    answer = "The R-squared of the model is 0.705."
    the_judge, quiet = _sent_back_as_no_outputs(question, fit, answer)
    typed = 'print(f"R-squared: {0.705}")'
    shown = dict(quiet, id="c2", execution_count=2, source=typed,
                 outputs=[{"output_type": "stream", "name": "stdout", "text": "R-squared: 0.705\n"}])
    facts = Facts(steps=[step(1, fit, printed=""), step(2, typed, printed="R-squared: 0.705\n")],
                  cells=[quiet, shown])
    second = the_judge.on_answer(answer, facts)
    assert isinstance(second, SendBack) and [r.key for r in second.reasons] == ["typed_in"], second
    assert "as they are: 0.705" in second.text
    computed = "print(f'R-squared: {model.score(df[[\"x\"]], df[\"y\"]):.3f} (0.7 is good)')"
    honest = dict(shown, source=computed)
    facts = Facts(steps=[step(1, fit, printed=""), step(2, computed, printed="R-squared: 0.705\n")],
                  cells=[quiet, honest])
    third, _ = _sent_back_as_no_outputs(question, fit, answer)
    assert isinstance(third.on_answer(answer, facts), Accept)


def _sent_back_as_no_outputs(question: str, code: str, answer: str) -> tuple[Judge, dict[str, Any]]:
    """A judge that has sent ``answer`` back once, its numbers no output's, after one quiet
    cell running ``code``; and that cell."""
    quiet = {"cell_type": "code", "id": "c1", "execution_count": 1, "source": code, "outputs": [],
             "metadata": {"kernel_analyst": {"status": "ok"}}}
    the_judge = judge(question, has_files=True)
    first = the_judge.on_answer(answer, Facts(steps=[step(1, code, printed="")], cells=[quiet]))
    assert isinstance(first, SendBack) and "unsupported" in [r.key for r in first.reasons], first
    return the_judge, quiet


def test_a_placeholder_is_no_value() -> None:
    facts = Facts(steps=[step(1, "print(r)", printed="0.71\n")], cells=[cell(1, "print(r)", "0.71")])
    decision = judge("r? Answer as @correlation_coefficient[value].").on_answer(
        "@correlation_coefficient[r_value]", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["form"]
    assert "placeholders, not values: @correlation_coefficient[r_value]" in decision.text


def test_a_summary_over_every_row_for_a_question_that_leaves_outliers_out_is_doubtful() -> None:
    """DABench easy 18 with the 1.5B model: the pruning step undone (it replaced ``df``), then
    ``df['Mar.2019'].mean()`` over every row: 364.78, for 171.44."""
    question = ("Calculate the mean and standard deviation of the \"Mar.2019\" column. Outliers are to be "
                "pruned via the interquartile range method before calculating the mean and standard "
                "deviation.")
    whole = "print(round(df['Mar.2019'].mean(), 2), round(df['Mar.2019'].std(), 2))"
    out = "364.78 966.85\n"
    facts = Facts(steps=[step(1, whole, printed=out)], cells=[cell(1, whole, out)])
    decision = judge(question, has_files=True).on_answer("364.78 and 966.85", facts)
    assert isinstance(decision, SendBack) and [r.key for r in decision.reasons] == ["doubtful"]
    assert "leaves the outliers out before computing" in decision.text, decision.text
    unused = "q = df['Mar.2019'].quantile([0.25, 0.75])\n" + whole  # the bounds computed, not used (7ddff9d)
    seen = Facts(steps=[step(1, unused, printed=out)], cells=[cell(1, unused, out)])
    again = judge(question, has_files=True).on_answer("364.78 and 966.85", seen)
    assert isinstance(again, SendBack) and [r.key for r in again.reasons] == ["doubtful"], again
    bounded = ("q1, q3 = df['Mar.2019'].quantile([0.25, 0.75])\nkept = df[df['Mar.2019'].between(q1 - 1.5 * "
               "(q3 - q1), q3 + 1.5 * (q3 - q1))]\nprint(round(kept['Mar.2019'].mean(), 2), "
               "round(kept['Mar.2019'].std(), 2))")
    for code, asked in ((bounded, question), (whole, "What is the mean of the \"Mar.2019\" column?")):
        printed = "171.44 188.25\n"
        seen = Facts(steps=[step(1, code, printed=printed)], cells=[cell(1, code, printed)])
        assert isinstance(judge(asked, has_files=True).on_answer("171.44 and 188.25", seen), Accept), code



def test_outlier_counts_past_half_the_table_are_doubted() -> None:
    """DABench medium 180, attempt 2 of the 1.5B model on 051e628: ``(Fare - zscore(Fare)) > 3``
    per class, 211 + 178 + 487 of the 891 passengers given as outliers (3, 7, 14)."""
    question = ("Perform outlier detection on the fare variable for each passenger class separately. Use "
                "the Z-score method and determine the number of outliers in each class. "
                "@class1_outliers[o1], @class2_outliers[o2], @class3_outliers[o3]")

    def given(answer: str, asked: str = question, rows: int = 891) -> object:
        shown = answer.replace(", ", "\n")
        facts = Facts(steps=[step(1, "print(x)", printed=shown)], cells=[cell(1, "print(x)", shown)])
        return judge(asked, table_rows=(rows,)).on_answer(answer, facts)

    decision = given("@class1_outliers[211], @class2_outliers[178], @class3_outliers[487]")
    assert isinstance(decision, SendBack) and [r.kind for r in decision.reasons] == ["outliers_most"]
    assert "count 876 of the table's 891 rows as outliers" in decision.text
    # the right counts, the rows left without the outliers, and 32% of a table (DABench easy 553)
    assert isinstance(given("@class1_outliers[3], @class2_outliers[7], @class3_outliers[14]"), Accept)
    assert isinstance(given("@outliers_count[20], @rows_without_outliers[871]",
                            "How many fare outliers are there by the Z-score, and how many rows are left "
                            "without them? @outliers_count[n], @rows_without_outliers[m]"), Accept)
    assert isinstance(given("@outliers_count[3131]", "How many outliers has the column? @outliers_count[n]",
                            9796), Accept)
