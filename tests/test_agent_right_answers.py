"""Answers that are right, not only grounded (issue 34), end to end through the real
langchain-openai client against a scripted OpenAI-compatible server on 127.0.0.1, with real
kernels: the person's data kept as asked, profile numbers sent back, a failing streak rolled
back, a citation on the computing cell. (Attempts that agree: tests/test_agent_attempts.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import load_chat_model
from tests.conftest import SEABORN, SHARED
from tests.openai_server import OpenAIServer, ScriptedReply

PLANETS = SEABORN / "planets.csv"  # 1,035 rows; 808 with a distance


def _model(server: OpenAIServer) -> Any:
    return load_chat_model("openai:scripted", base_url=server.url, max_retries=0)


def _last(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text())["cells"]
    return cells


async def test_the_persons_table_is_kept_as_asked_across_questions(manager: SessionManager) -> None:
    replies = [
        # 1. "from now on": asked, kept
        ScriptedReply(code="df = df.dropna(subset=['distance'])\nprint(len(df))"),
        ScriptedReply(text="808 planets are left."),
        # 2. a subset written over df for a question that does not ask: undone
        ScriptedReply(code="df = df[df['method'] == 'Transit']\nprint(len(df))"),
        ScriptedReply(code="transit = df[df['method'] == 'Transit']\nprint(len(transit))"),
        ScriptedReply(text="Of them, 224 were found by transit."),
        # 3. the next question sees the table as the person left it
        ScriptedReply(code="print(len(df))"), ScriptedReply(text="808 planets."),
    ]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        first = await analyst.ask("right-kept", "Leave out the planets with no distance from now on. "
                                  "How many are left?", files=[PLANETS])
        second = await analyst.ask("right-kept", "Of the remaining planets, how many were found by transit?")
        third = await analyst.ask("right-kept", "How many planets are there?")
        requests = server.requests
    assert first.text == "808 planets are left."
    assert "asks to change the data, so this is kept" in _last(requests[1])
    note = _last(requests[2])
    assert "The data as the person changed it: `df`: 808 of 1,035 rows since cell [2]" in note, note
    told = _last(requests[3])
    assert "replaced `df` (the person's data: 808 rows) by 224 rows" in told and "was undone" in told, told
    assert [s.execution.text.strip() for s in second.steps] == ["224", "224"] and second.ok
    assert third.text == "808 planets." and third.steps[0].execution.text.strip() == "808"


async def test_the_undone_code_sent_again_runs_with_the_table_renamed(manager: SessionManager) -> None:
    """DABench 124 and 130 with the 1.5B model: the code that wrote a subset over ``df`` was
    undone, and the model sent it again as it was, step after step. The second time it runs
    with ``df`` renamed ``df_work``: the step's output is what the code was written for, the
    person's table is whole for the next question, and the notebook shows both cells."""
    subset = "df = df[df['method'] == 'Transit']\nprint(len(df))"
    transit = int((pd.read_csv(PLANETS)["method"] == "Transit").sum())
    replies = [ScriptedReply(code=subset), ScriptedReply(code=subset),
               ScriptedReply(text=f"{transit} planets were found by transit."),
               ScriptedReply(code="print(len(df), len(df_work))"), ScriptedReply(text="1035 planets.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        first = await analyst.ask("right-renamed", "How many planets were found by transit?", files=[PLANETS])
        second = await analyst.ask("right-renamed", "How many planets are there?")
        requests = server.requests
    assert "was undone" in _last(requests[1])
    told = _last(requests[2])
    assert str(transit) in told and "This is the code of step 1 again, which was undone" in told, told
    assert "It ran with `df` renamed `df_work`, so `df` stays as the person has it" in told, told
    assert first.ok and first.text == f"{transit} planets were found by transit."
    ran = first.steps[1]
    assert ran.code.startswith("df_work = df\ndf_work = df_work[df_work['method'] == 'Transit']"), ran.code
    assert ran.execution.text.strip() == str(transit)
    claim = first.claims.claims[0] if first.claims is not None else None
    assert claim is not None and claim.source is not None
    assert claim.source.cell == ran.execution.execution_count, "cited: the renamed cell"
    assert second.steps[0].execution.text.split() == ["1035", str(transit)], "df whole, the subset kept apart"
    cells = [c for c in _cells(first.notebook_path) if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    undone = [c for c in cells if c["metadata"].get("kernel_analyst", {}).get("undone")]
    assert len(undone) == 1 and "".join(undone[0]["source"]) == subset
    assert sum(src.startswith("df_work = df\n") for src in sources) == 1


async def test_a_number_read_off_the_profile_goes_back_to_be_computed(manager: SessionManager) -> None:
    question = "What percentage of the planets were found by transit?"
    share = "print(round((df['method'] == 'Transit').mean() * 100, 2))"
    replies = [ScriptedReply(text="38%."),  # the profile's rounded share of the column's values
               ScriptedReply(code=share), ScriptedReply(text="38.36% of them.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("right-profile", question, files=[PLANETS])
        told = _last(server.requests[1])
    assert "These numbers are in the table's profile" in told and "38%" in told, told
    assert answer.ok and answer.steps[0].code == share
    claim = answer.claims.claims[0] if answer.claims is not None else None
    assert claim is not None and claim.source is not None
    assert claim.source.cell == answer.steps[0].execution.execution_count, "cited: the computing cell"


async def test_a_repeated_failing_cell_is_rolled_back(manager: SessionManager) -> None:
    failing = "made = df['distance'] * 2\nprint(df['Distance'].mean())"
    computed = "print(round(df['distance'].mean(), 2))"
    replies = [ScriptedReply(code=failing), ScriptedReply(code=failing),
               ScriptedReply(code=computed), ScriptedReply(text="It is 264.07.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("right-rollback", "What is the mean distance?",
                                                            files=[PLANETS])
        after = server.requests[2]["messages"]
    assert answer.ok and answer.text == "It is 264.07."
    sent = [json.dumps(m) for m in after[:-1]]
    assert not any("Distance" in m for m in sent), "the failing turns are out of the request"
    told = str(after[-1]["content"])
    assert told.startswith("Step 1 failed (KeyError: 'Distance') and you sent the same code again"), told
    assert "Variables now:" in told and "made" not in told.split("Variables now:")[1], "made is gone"
    cells = [c for c in _cells(answer.notebook_path) if c["cell_type"] == "code"]
    kept = [c for c in cells if "Distance" in "".join(c["source"])]
    assert len(kept) == 1 and kept[0]["metadata"]["kernel_analyst"].get("undone"), "the notebook keeps it"


async def test_a_reply_that_copies_the_rollbacks_notice_is_no_answer(manager: SessionManager) -> None:
    # DABench 57 with the 1.5B model: its reply after a rollback was the notice itself, word for
    # word, and it was given as the answer (the agent's words to the model, shown to the person)
    failing = "print(df['Distance'].mean())"
    computed = "print(round(df['distance'].mean(), 2))"
    replies = [ScriptedReply(code=failing), ScriptedReply(text="It is 300."),  # sent back once: it failed
               ScriptedReply(code=failing), ScriptedReply(text="(echo)"),  # rolled back, then the copy
               ScriptedReply(code=computed), ScriptedReply(text="It is 264.07.")]
    with _Echoing(replies) as server:
        answer = await Analyst(_model(server), manager).ask("right-echo", "What is the mean distance?",
                                                            files=[PLANETS])
        echoed, told = (str(server.requests[i]["messages"][-1]["content"]) for i in (3, 4))
    assert echoed.startswith("Step 1 failed (KeyError: 'Distance')"), echoed
    assert answer.ok and answer.text == "It is 264.07.", answer.text
    assert told.startswith("Your reply repeated my message instead of answering"), told
    notes = [c for c in _cells(answer.notebook_path) if "repeated my message" in "".join(c["source"])]
    assert notes, "the notebook says the copy ran nothing and was no answer"


async def test_a_reply_that_copies_the_question_is_no_answer(manager: SessionManager) -> None:
    # DABench hard 118: after its step the 1.5B model's reply was the question as the output
    # restated it, placeholders and all, and it was given as the answer
    question = "What is the mean distance of the planets? Answer as @mean_distance[value]."
    computed = "print(round(df['distance'].mean(), 2))"
    replies = [ScriptedReply(code=computed), ScriptedReply(text=f"The question was: {question}"),
               ScriptedReply(text="@mean_distance[264.07]")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("right-question-echo", question, files=[PLANETS])
        told = _last(server.requests[2])
    assert answer.ok and answer.text == "@mean_distance[264.07]", answer.text
    assert told.startswith("Your reply repeated my message instead of answering"), told


async def test_an_average_no_cell_took_goes_back_and_the_mean_answers(manager: SessionManager) -> None:
    # the conversation benchmark's penguins with the 1.5B model: "the lightest on average"
    # answered with the island of the single lightest penguin (Dream; by the mean: Torgersen)
    question = "On which island are the penguins the lightest on average?"
    lightest = "print(df[df['body_mass_g'] == df['body_mass_g'].min()]['island'].values[0])"
    averaged = "print(df.groupby('island')['body_mass_g'].mean().idxmin())"
    replies = [ScriptedReply(code=lightest), ScriptedReply(text="Dream"),
               ScriptedReply(code=averaged), ScriptedReply(text="Torgersen")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager, attempts_on_doubt=1).ask(
            "right-average", question, files=[SEABORN / "penguins.csv"])
        told = _last(server.requests[2])
    assert "none of this question's cells computes one" in told, told
    assert answer.ok and answer.text == "Torgersen", answer.text
    printed = [o.get("text", "") for c in _cells(answer.notebook_path) if c["cell_type"] == "code"
               for o in c.get("outputs", [])]
    assert "Dream\n" in printed and "Torgersen\n" in printed, printed


class _Echoing(OpenAIServer):
    """Replies ``(echo)`` with the last message the model was sent, word for word."""

    def take(self, body: dict[str, Any]) -> tuple[int, ScriptedReply | None]:
        index, reply = super().take(body)
        if reply is not None and reply.text == "(echo)":
            reply = ScriptedReply(text=str(body["messages"][-1]["content"]))
        return index, reply


async def test_a_verdict_judged_by_eye_is_computed_before_it_is_given(manager: SessionManager) -> None:
    """DABench 130 with the 1.5B model: the cell printed the Shapiro-Wilk p-value (0.0) and
    the model answered ``@is_normal[True]``, the opposite of the question's rule. The
    verdict goes back; the cell that computes it with the rule gives the answer."""
    question = ("Check if the distances of the planets follow a normal distribution with the Shapiro-Wilk "
                "test, ignoring missing values. If the p value is less than 0.05, they are not normal. "
                "Answer as @is_normal[isNormal], 'True' or 'False'.")
    test = ("from scipy import stats\np = stats.shapiro(df['distance'].dropna()).pvalue\n"
            "print('p-value:', round(p, 4))")
    replies = [ScriptedReply(code=test), ScriptedReply(text="@is_normal[True]"),
               ScriptedReply(code="print(f'@is_normal[{p >= 0.05}]')"),
               ScriptedReply(text="@is_normal[False]")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        result = await analyst.ask("right-verdict", question, files=[PLANETS])
        requests = server.requests
    told = _last(requests[2])
    assert "No output of this question's code shows the verdict of @is_normal[True]" in told, told
    assert result.text.strip() == "@is_normal[False]" and result.ok
    assert [s.execution.text.strip() for s in result.steps] == ["p-value: 0.0", "@is_normal[False]"]


async def test_a_verdict_from_a_nan_goes_back_to_be_computed_without_the_gaps(
        manager: SessionManager) -> None:
    """DABench easy 19 with the 1.5B model: ``skew`` of a column with gaps is NaN, and the
    rule ``-0.5 <= skewness <= 0.5`` printed False, given as the answer (the step's NaN note
    did not stop it). The answer goes back; the skewness without the gaps gives it."""
    question = ("Does the planets' distance follow a normal distribution? Assume it does if the skewness is "
                "between -0.5 and 0.5. Answer as @is_normal[answer], 'Yes' or 'No'.")
    rule = "print('@is_normal[' + ('Yes' if -0.5 <= skewness <= 0.5 else 'No') + ']')"
    replies = [ScriptedReply(code=f"from scipy.stats import skew\nskewness = skew(df['distance'])\n{rule}"),
               ScriptedReply(text="@is_normal[No]"),
               ScriptedReply(code="skewness = skew(df['distance'].dropna())\n"
                                  f"print(round(skewness, 2))\n{rule}"),
               ScriptedReply(text="@is_normal[No]")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        result = await analyst.ask("right-nan", question, files=[PLANETS])
        requests = server.requests
    told = _last(requests[2])
    assert "`skewness` is NaN in the kernel" in told and "Drop the missing values first" in told, told
    assert result.ok and result.text.strip() == "@is_normal[No]" and result.notes
    assert [s.execution.text.strip() for s in result.steps] == ["@is_normal[No]", "7.35\n@is_normal[No]"]


async def test_a_filter_carried_from_the_previous_question_is_named_and_sent_back(
        manager: SessionManager) -> None:
    """The conversation benchmark's tips with the 1.5B model: after "Of the Saturday dinners
    ...", the next question (about every bill) ran on ``df[df['day'] == 'Sat']`` again, and
    the model answered from it though the step's output said so. The step's output says so,
    the answer from those rows goes back, and the answer comes from the whole table."""
    saturday = "sat = df[df['day'] == 'Sat']\nprint(round((sat['smoker'] == 'Yes').mean() * 100, 2))"
    replies = [ScriptedReply(code=saturday), ScriptedReply(text="48.28% of the Saturday bills."),
               ScriptedReply(code="sat = df[df['day'] == 'Sat']\nprint(round(sat['total_bill'].mean(), 2))"),
               ScriptedReply(text="The average bill was 20.44."),
               ScriptedReply(code="print(round(df['total_bill'].mean(), 2))"),
               ScriptedReply(text="The average bill was 19.79.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        first = await analyst.ask("right-carried",
                                  "Of the Saturday bills, what percent were at smokers' tables?",
                                  files=[SEABORN / "tips.csv"])
        first_told = [_last(r) for r in server.requests]
        result = await analyst.ask("right-carried", "What was the average bill?")
        requests = server.requests
    assert first.ok and not any("earlier question asked about" in told for told in first_told)
    told = json.dumps(requests[3]["messages"][-1])
    assert "df['day'] == 'Sat' keeps only the rows an earlier question asked about" in told, told
    sent_back = _last(requests[4])
    assert "The answer comes from the rows of df['day'] == 'Sat'" in sent_back, sent_back
    assert [s.execution.text.strip() for s in result.steps] == ["20.44", "19.79"]
    assert result.ok and result.text == "The average bill was 19.79."


async def test_a_conversion_that_would_make_nan_of_numbers_written_with_text_runs_mended(
        manager: SessionManager) -> None:
    """DABench easy 55 with the 1.5B model: ``pd.to_numeric(..., errors='coerce')`` on counts
    written with their ranges (``'630308[495000-801000]'``) left the plain zeros, and the
    mean of those was the answer (2200 for 2,081,990), again after the line said so. Every
    value lost begins with a number, so the step converts that number, and the model is told."""
    table = SHARED / "datasets" / "dabench" / "da-dev-tables" / "estimated_numbers.csv"
    coerced = "cases = pd.to_numeric(df['No. of cases'], errors='coerce')\nprint(int(cases.mean()))"
    replies = [ScriptedReply(code=coerced), ScriptedReply(text="@mean_cases[2081990]")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        result = await analyst.ask("right-coerced",
                                   "What is the mean number of cases recorded? @mean_cases[mean]",
                                   files=[table])
        requests = server.requests
    told = json.dumps(requests[1]["messages"][-1])
    assert "would have made NaN of 544 of the 856 values of 'No. of cases'" in told, told
    assert "'630308[495000-801000]'" in told and "Check:" not in told, "mended: nothing left to check"
    assert result.steps[0].code == ("cases = pd.to_numeric(df['No. of cases'].astype(str).str.extract("
                                    "r'(-?\\d+(?:\\.\\d+)?)')[0], errors='coerce')\nprint(int(cases.mean()))")
    assert result.steps[0].execution.text.strip() == "2081990"
    assert result.ok and result.text == "@mean_cases[2081990]"


async def test_a_conversion_that_makes_nan_of_most_of_a_column_is_told(
        manager: SessionManager, tmp_path: Path) -> None:
    """The same conversion on values that begin with a word (``'about 130'``): nothing to mend
    with certainty, so the step's output says what was lost, from the uploaded file's own
    rows, and an answer from that step goes back (DABench easy 55 on dc6fa7d: answered at once)."""
    table = tmp_path / "counts.csv"
    rows = "".join(f"r{i},{'about ' if i % 3 else ''}{100 + i}\n" for i in range(30))
    table.write_text("region,cases\n" + rows)
    coerced = "cases = pd.to_numeric(df['cases'], errors='coerce')\nprint(int(cases.mean()))"
    extracted = ("cases = pd.to_numeric(df['cases'].astype(str).str.extract(r'(\\d+)')[0])\n"
                 "print(int(cases.mean()))")
    replies = [ScriptedReply(code=coerced), ScriptedReply(text="@mean_cases[113]"),  # the line not read
               ScriptedReply(code=extracted), ScriptedReply(text="@mean_cases[114]")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager, attempts_on_doubt=1)
        result = await analyst.ask("right-coerced-told",
                                   "What is the mean number of cases recorded? @mean_cases[mean]",
                                   files=[table])
        requests = server.requests
    told = json.dumps(requests[1]["messages"][-1])
    assert "made NaN of 20 of the 30 values of 'cases'" in told, told
    assert "'about 101'" in told and "would have made" not in told
    sent = json.dumps(requests[2]["messages"][-1])
    assert "The answer comes from your last step as it was" in sent and "made NaN of 20" in sent, sent
    assert "made NaN" not in json.dumps(requests[3]["messages"][-1])  # the extraction loses nothing
    assert [s.execution.text.strip() for s in result.steps] == ["113", "114"]
    assert result.ok and result.text == "@mean_cases[114]"


async def test_items_beside_a_call_that_repeats_printed_work_are_the_answer(manager: SessionManager) -> None:
    """DABench medium 219 with the 1.5B model: the right ``@name[value]`` items written beside
    the tool called again with the code that printed them; the call was refused as a repeat
    three times, and a wrong partial answer ended the question. The items are the answer, and
    the history stays a valid exchange for the next question (no call left unanswered)."""
    count = "print(f\"@planet_count[{len(df)}]\")"
    replies = [ScriptedReply(code=count),
               ScriptedReply(text="@planet_count[1035]", code=count),
               ScriptedReply(code="print(len(df))"), ScriptedReply(text="There are 1035 planets.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        answer = await analyst.ask("right-repeat-items", "How many planets are there? "
                                   "Answer as @planet_count[value].", files=[PLANETS])
        after = await analyst.ask("right-repeat-items", "How many rows does the table have?")
        requests = server.requests
    assert answer.ok and answer.text == "@planet_count[1035]" and len(answer.steps) == 1
    assert answer.claims is not None and answer.claims.all_grounded and answer.claims.claims
    assert len(requests) == 4, "answered at the second reply, not refused as a repeat"
    history = requests[2]["messages"]
    calls = [m for m in history if m["role"] == "assistant" and m.get("tool_calls")]
    answered = {m["tool_call_id"] for m in history if m["role"] == "tool"}
    assert all(c["id"] in answered for m in calls for c in m["tool_calls"]), history
    assert {"role": "assistant", "content": "@planet_count[1035]"}.items() <= next(
        m for m in history if m["role"] == "assistant" and m.get("content") == "@planet_count[1035]").items()
    assert after.ok and after.text == "There are 1035 planets."


async def test_a_partial_answer_in_prose_is_completed_from_the_printed_items(manager: SessionManager) -> None:
    """DABench hard 271 with the 1.5B model: a cell printed the question's items, the model
    sent that cell again three times (refused as repeats), and the partial answer it was
    asked for came in prose without them. The items the cell printed complete it, marked."""
    count = "print(f\"@planet_count[{len(df)}]\")"
    replies = [ScriptedReply(code=count), ScriptedReply(code=count), ScriptedReply(code=count),
               ScriptedReply(code=count), ScriptedReply(text="The output shows how many planets there are.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager, attempts_on_doubt=1)  # the first attempt's own end
        answer = await analyst.ask("right-partial-items", "How many planets are there? "
                                   "Answer as @planet_count[value].", files=[PLANETS])
        asked = len(server.requests)
    assert asked == 5 and answer.partial and answer.stop_reason == "max_steps"
    assert answer.text.endswith("@planet_count[1035]"), answer.text
    assert any("taken from what cell [2] printed" in n for n in answer.notes), answer.notes
    assert answer.claims is not None and not answer.claims.unsupported


async def test_a_block_indented_where_python_expects_none_runs_mended(manager: SessionManager) -> None:
    """The mpg conversation with the 1.5B model: a block whose lines after the first were
    indented as if inside it, sent four times, each an ``IndentationError`` that ran nothing.
    It runs with the lines moved back, the notebook keeps the code that ran, and the model
    is told why."""
    indented = "transit = df[df['method'] == 'Transit']\n    print(len(transit))"
    replies = [ScriptedReply(code=indented), ScriptedReply(text="397 were found by transit.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "right-indent", "How many planets were found by transit?", files=[PLANETS])
        told = _last(server.requests[1])
    assert answer.ok and [s.execution.status for s in answer.steps] == ["ok"]
    assert answer.steps[0].execution.text.strip() == "397"
    assert answer.steps[0].code == "transit = df[df['method'] == 'Transit']\nprint(len(transit))"
    assert "lines indented where Python expects no indent (line 2)" in told, told
    sources = ["".join(c["source"]) for c in _cells(answer.notebook_path) if c["cell_type"] == "code"]
    assert answer.steps[0].code in sources and indented not in sources


async def test_an_earlier_answer_given_again_word_for_word_goes_back(manager: SessionManager) -> None:
    """DSEval students-exam-scores 2 with the 1.5B model: a question that asked for a table of
    means was answered with question 1's answer word for word; its numbers still held (the
    table's shape), so no check on numbers saw it."""
    first = "The table has 1035 rows and 6 columns."
    replies = [ScriptedReply(code="print(df.shape)"), ScriptedReply(text=first),
               ScriptedReply(code="print((df['method'] == 'Transit').sum())"), ScriptedReply(text=first),
               ScriptedReply(text="397 were found by transit.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        shape = await analyst.ask("right-repeated", "How big is the table?", files=[PLANETS])
        transit = await analyst.ask("right-repeated", "How many planets were found by transit?")
        told = _last(server.requests[4])
    assert shape.text == first
    assert 'word for word, your answer to an earlier question ("How big is the table?")' in told, told
    assert transit.ok and transit.text == "397 were found by transit."


async def test_an_items_value_with_more_decimals_than_asked_is_rounded_not_sent_back(
        manager: SessionManager) -> None:
    """DABench easy 218 with the 1.5B model: ``@correlation_coefficient[0.08133301638819802]``
    for "rounded to two decimal places" was sent back for its decimals; the model ran its cell
    five more times instead of rounding, and the question ended at the step limit. The value is
    rounded as asked, the answer accepted at once, and its citation says "rounded"."""
    corr = "print(df['distance'].corr(df['orbital_period']))"
    planets = pd.read_csv(PLANETS)
    r = str(planets["distance"].corr(planets["orbital_period"]))  # what the cell prints
    replies = [ScriptedReply(code=corr), ScriptedReply(text=f"@correlation_coefficient[{r}]")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "right-round", "What is the correlation between distance and orbital period? Answer as "
            "@correlation_coefficient[r_value], rounded to two decimal places.", files=[PLANETS])
        asked = len(server.requests)
    assert len(r.split(".")[1]) > 2, r
    assert answer.ok and asked == 2 and answer.text == f"@correlation_coefficient[{float(r):.2f}]"
    assert answer.claims is not None and answer.claims.all_grounded
    assert [c.source.form for c in answer.claims.claims if c.source] == ["rounded"], answer.claims


async def test_a_files_column_replaced_by_a_computation_is_named_and_sent_back(
        manager: SessionManager) -> None:
    """DABench easy 123 with the 1.5B model: the file's own ``daily_vaccinations_per_million``
    recomputed from two other columns, and the answer taken from it (Algeria, for Gibraltar).
    The line after the step names the column, the answer from that step goes back, and the
    answer from the file's column is the one given."""
    question = "On which day is the average tip the highest?"
    recomputed = "df['tip'] = df['total_bill'] / df['size']\nprint(df.groupby('day')['tip'].mean().idxmax())"
    again = "df = pd.read_csv('tips.csv')\nprint(df.groupby('day')['tip'].mean().idxmax())"
    replies = [ScriptedReply(code=recomputed), ScriptedReply(text="Sat"),
               ScriptedReply(code=again), ScriptedReply(text="Sun")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager, attempts_on_doubt=1).ask(
            "right-recomputed", question, files=[SEABORN / "tips.csv"])
        requests = server.requests
    told = _last(requests[1])
    assert "replaced the values of `tip`, a column of the file `tips.csv`" in told, told
    assert "The answer comes from your last step as it was" in _last(requests[2]), _last(requests[2])
    assert "replaced the values of `tip`" not in _last(requests[3])  # the file's column, read again
    assert answer.ok and answer.text == "Sun" and len(requests) == 4, answer.text
    assert [s.execution.text.strip() for s in answer.steps] == ["Sat", "Sun"]


async def test_the_population_std_asked_for_is_what_the_step_computes(manager: SessionManager) -> None:
    """DABench easy 129 with the 1.5B model: "population standard deviation" asked,
    ``df['Fare'].std()`` run, the slip named after the step, and 49.69 (the sample one)
    answered again in each of three attempts. The step runs with ``ddof=0``, the notebook
    keeps the code that ran, and the model is told."""
    question = "What is the population standard deviation of the tips? Round it to two decimals."
    sample = "print(round(df['tip'].std(), 2))"
    population = round(float(pd.read_csv(SEABORN / "tips.csv")["tip"].std(ddof=0)), 2)
    replies = [ScriptedReply(code=sample), ScriptedReply(text=f"{population}")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("right-population", question,
                                                            files=[SEABORN / "tips.csv"])
        told = _last(server.requests[1])
    assert "so your step ran with pandas' `.std()` and `.var()` as `.std(ddof=0)`" in told, told
    assert "population standard deviation (or variance), which divides by n" not in told  # no slip left
    assert [s.execution.text.strip() for s in answer.steps] == [str(population)]
    assert answer.ok and answer.text == str(population)
    code = ["".join(c["source"]) for c in _cells(answer.notebook_path) if c["cell_type"] == "code"]
    assert "print(round(df['tip'].std(ddof=0), 2))" in code, code


async def test_a_change_the_questions_words_say_is_not_the_one_asked_is_undone(
        manager: SessionManager) -> None:
    """DSEval employee-dataset 7 with the 1.5B model: "label encoding ... in-place" run as
    ``pd.get_dummies``, the slip named and not acted on, and the table without its target for
    the seven questions after. The step is undone, the label encoding that follows is kept,
    and the next question sees the table with its columns."""
    one_hot = "df = pd.get_dummies(df, columns=['sex'])\nprint(df.shape)"
    label = ("from sklearn.preprocessing import LabelEncoder\n"
             "df['sex'] = LabelEncoder().fit_transform(df['sex'].astype(str))\n"
             "print(sorted(df['sex'].unique()))")
    replies = [ScriptedReply(code=one_hot), ScriptedReply(code=label),
               ScriptedReply(text="Encoded as 0, 1, 2."),
               ScriptedReply(code="print(df.shape[1], df['sex'].dtype)"), ScriptedReply(text="7 columns.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        first = await analyst.ask("right-wrong-change", "Encode the 'sex' column using label encoding. Save "
                                  "the result in-place.", files=[SEABORN / "penguins.csv"])
        second = await analyst.ask("right-wrong-change", "How many columns does the table have?")
        told = _last(server.requests[1])
    assert "The question asks for label encoding" in told, told
    assert ("Step 1 changed `df` in a way the line above says the question does not ask for, so it was "
            "undone") in told, told
    assert [s.execution.text.strip() for s in first.steps] == [
        "(344, 8)", "[np.int64(0), np.int64(1), np.int64(2)]"]
    assert second.steps[0].execution.text.strip() == "7 int64", second.steps[0].execution.text


async def test_an_answer_that_says_an_undone_change_is_done_goes_back(manager: SessionManager) -> None:
    """DSEval employee-dataset 7 with the 1.5B model, after the undo above: "The categorical
    columns have been encoded using label encoding." with no cell since, accepted, and the
    next question split a table of text columns. The answer goes back; the label encoding
    then run is kept."""
    one_hot = "df = pd.get_dummies(df, columns=['sex'])\nprint(df.shape)"
    label = ("from sklearn.preprocessing import LabelEncoder\n"
             "df['sex'] = LabelEncoder().fit_transform(df['sex'].astype(str))\nprint(df['sex'].dtype)")
    replies = [ScriptedReply(code=one_hot), ScriptedReply(text="The 'sex' column has been label encoded."),
               ScriptedReply(code=label), ScriptedReply(text="Encoded: `sex` now holds 0, 1, 2.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        result = await analyst.ask("right-undone-answer", "Encode the 'sex' column using label encoding. "
                                   "Save the result in-place.", files=[SEABORN / "penguins.csv"])
        sent_back = _last(server.requests[2])
        dtype = await (await manager.session("right-undone-answer")).execute("print(df['sex'].dtype)")
    assert ("Step 1's change of `df` was undone (it was not the change the question asks for), and no "
            "step changed the data since") in sent_back, sent_back
    assert "still holds text" not in sent_back, "the undone step's table is not the table any more"
    assert result.text.startswith("Encoded: `sex` now holds 0, 1, 2."), result.text
    assert [s.execution.text.strip() for s in result.steps] == ["(344, 8)", "int64"]
    assert dtype.text.strip() == "int64"
