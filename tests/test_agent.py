"""The Analyst loop with a scripted model and real kernels."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from kernel_analyst import Analyst, Answer, SessionManager
from kernel_analyst.agent import ToolCallingUnsupportedError
from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call, tool_calls
from tests.conftest import MESSY, SEABORN, test_limits

TITANIC = SEABORN / "titanic.csv"
# Tests whose kernel state does not matter share this conversation (one kernel).
SCRATCH = "agent-scratch"
LOAD = "import pandas as pd\ndf = pd.read_csv('titanic.csv')"


def notebook_cells(answer: Answer) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(answer.notebook_path.read_text())["cells"]
    return cells


def role(cell: dict[str, Any]) -> str | None:
    """The role the analyst gave a markdown cell (question, model, answer)."""
    return cell["metadata"].get("kernel_analyst", {}).get("role")


def cell_text(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else str(source)


def assert_history_is_valid(messages: list[BaseMessage]) -> None:
    """Every tool call is answered by a tool message before the model speaks again."""
    pending: set[str] = set()
    for msg in messages:
        if isinstance(msg, AIMessage):
            assert not pending, f"unanswered tool calls {pending}"
            pending = {str(c["id"]) for c in msg.tool_calls} | {str(c["id"]) for c in msg.invalid_tool_calls}
        elif isinstance(msg, ToolMessage):
            pending.discard(msg.tool_call_id)
    assert not pending


async def test_titanic_multi_step_analysis(manager: SessionManager) -> None:
    model = ScriptedChatModel(script=[
        tool_call(LOAD + "\ndf.shape", text="Load the data first."),
        tool_call("df.groupby('class')['survived'].mean().round(2)"),
        lambda call: "First class survived most: " + re.findall(r"First +([\d.]+)", call.last_tool_output)[0],
    ])
    analyst = Analyst(model, manager, profile_files=False)  # the model loads the table itself
    answer = await analyst.ask("agent-titanic", "Which class survived most?", files=[TITANIC])

    assert answer.stop_reason == "answered" and answer.ok
    assert answer.text == "First class survived most: 0.63"
    assert [s.execution.status for s in answer.steps] == ["ok", "ok"]
    assert answer.steps[0].observation == "(891, 15)\nVariables: created df: pandas.DataFrame (891, 15)"
    assert answer.files == ["titanic.csv"]
    # What the model was sent: system prompt, then the question with the kernel's state.
    first = model.calls[0]
    assert isinstance(first.messages[0], SystemMessage) and "`python` tool" in first.messages[0].content
    question = str(first.messages[1].content)
    assert question.startswith("Which class survived most?\n")
    assert "- Files in the working directory: titanic.csv (57.0 kB, new)" in question
    assert "- Variables: none yet" in question
    assert [t["function"]["name"] for t in first.tools] == ["python"]  # undo is offered only when asked
    assert model.calls[1].last_tool_output == answer.steps[0].observation
    # Usage is summed over the three model calls.
    assert answer.usage is not None and answer.usage.model_calls == 3 and answer.usage.input_tokens > 0
    # The audit notebook: question, the model's text, both cells, the answer, in order.
    cells = notebook_cells(answer)
    kinds = [(c["cell_type"], role(c)) for c in cells]
    assert kinds == [("markdown", "question"), ("markdown", "model"), ("code", None), ("code", None),
                     ("markdown", "answer")]
    assert cell_text(cells[0]) == "### Question\n\nWhich class survived most?\n\nFiles: `titanic.csv`"
    assert cell_text(cells[1]) == "Load the data first."
    # The answer cell cites the cell each number came from, and sums it up.
    cell_id = cells[3]["id"]
    assert cell_text(cells[4]) == (f'### Answer\n\nFirst class survived most: [0.63](#cell-id={cell_id} '
                                   f'"cell [2] output 1: 0.63 (exact)")\n\n*1 number: 1 from cell 2.*')
    assert answer.claims is not None and answer.claims.summary() == "1 number: 1 from cell 2"
    assert Answer.from_dict(json.loads(json.dumps(answer.to_dict()))).to_dict() == answer.to_dict()


async def test_error_then_correction(manager: SessionManager) -> None:
    def fix(call: ModelCall) -> AIMessage:
        assert call.last_tool_output.startswith("Error: KeyError: 'Survived'")
        return tool_call("print(round(df['survived'].mean(), 4))", text="The column is lower case.")

    model = ScriptedChatModel(script=[
        tool_call(LOAD + "\ndf['Survived'].mean()"),
        fix,
        lambda call: f"The survival rate is {call.last_tool_output.splitlines()[0]}.",
    ])
    answer = await Analyst(model, manager, profile_files=False).ask(SCRATCH, "What share survived?",
                                                                   files=[TITANIC])

    failed, fixed = answer.steps
    assert failed.execution.status == "error" and failed.execution.state == "kept"
    lines = failed.observation.splitlines()
    assert lines[0] == "Error: KeyError: 'Survived'"
    assert re.fullmatch(r"Traceback \(trimmed; \d+ library frames omitted\):", lines[1])
    assert re.fullmatch(r"Cell In\[\d+\], line 3", lines[2])
    assert "site-packages" not in failed.observation and "The above exception" not in failed.observation
    assert lines[-3] == "Variables: created df: pandas.DataFrame (891, 15)"  # made before the error
    assert lines[-2] == ("There is no column 'Survived'; the closest is 'survived' (mind spelling, case, "
                         "spaces and invisible characters).")  # the hint
    assert lines[-1].startswith("The DataFrames' columns are: df: survived, pclass, sex, age")
    assert fixed.execution.status == "ok" and fixed.observation.startswith("0.3838")
    assert answer.text == "The survival rate is 0.3838." and answer.stop_reason == "answered"


async def test_kernel_death_mid_question(manager: SessionManager) -> None:
    def recover(call: ModelCall) -> AIMessage:
        told = call.last_tool_output
        assert told.startswith("The kernel died while running this code")
        assert "All variables from earlier steps were lost: df, rows." in told
        return tool_call("print('df' in globals())\n" + LOAD + "\nlen(df)")

    model = ScriptedChatModel(script=[
        tool_call(LOAD + "\nrows = len(df)"),
        tool_call("import os; os._exit(1)"),
        recover,
        lambda call: f"{call.last_tool_output.splitlines()[1]} rows, after reloading.",
        lambda call: str(call.last_message.content).splitlines()[-1],
    ])
    analyst = Analyst(model, manager, profile_files=False)
    answer = await analyst.ask("agent-death", "How many rows?", files=[TITANIC])

    died = answer.steps[1].execution
    assert (died.status, died.state) == ("died", "lost")
    after = answer.steps[2].execution
    assert (after.status, after.state) == ("ok", "kept") and after.text.startswith("False\n891")
    assert answer.text == "891 rows, after reloading." and answer.stop_reason == "answered"
    markers = [cell_text(c) for c in notebook_cells(answer) if "kernel-analyst:" in cell_text(c)]
    assert markers and "Kernel died during the cell above" in markers[0]

    # A restart between questions: the next question says which variables are gone.
    session = manager.get("agent-death")
    assert session is not None
    await session.restart()
    later = await analyst.ask("agent-death", "Still there?")
    assert later.text == ("These variables from earlier questions are gone (the kernel was restarted or "
                          "they were deleted): df. Re-create the ones you need.")


async def test_the_model_is_told_what_recovery_restored(tmp_path: Path) -> None:
    """With recovery on, the death's observation says the variables will come back, and
    the next one says what was restored; the model goes on without reloading."""
    def after_death(call: ModelCall) -> AIMessage:
        told = call.last_tool_output
        assert "they will be rebuilt" in told and "re-create" not in told, told
        return tool_call("rows + 1")

    def after_restore(call: ModelCall) -> str:
        told = call.last_tool_output
        assert "variables were rebuilt after a loss" in told and "Variables now: df, rows" in told, told
        return f"{told.splitlines()[-1]} rows, plus one."

    model = ScriptedChatModel(script=[
        tool_call(LOAD + "\nrows = len(df)"),
        tool_call("import os; os._exit(1)"),
        after_death,
        after_restore,
    ])
    async with SessionManager(tmp_path, limits=test_limits(), recovery="replay") as private:
        analyst = Analyst(model, private, profile_files=False)
        answer = await analyst.ask("agent-recover", "Rows plus one?", files=[TITANIC])
    restored = answer.steps[2].execution
    assert restored.recovery is not None and restored.recovery.complete
    assert answer.text == "892 rows, plus one." and answer.stop_reason == "answered"


async def test_max_steps_stops_the_loop(manager: SessionManager) -> None:
    model = ScriptedChatModel(function=lambda call: tool_call(f"n = 1 + {call.index}"))
    analyst = Analyst(model, manager, max_steps=2, attempts_on_doubt=1)  # one attempt: the loop alone
    answer = await analyst.ask(SCRATCH, "Loop forever")

    # Two steps, one more call that asked for code anyway, one asking for an answer without code.
    assert answer.stop_reason == "max_steps" and answer.text == "" and not answer.partial
    assert len(answer.steps) == 2 and len(model.calls) == 4
    assert answer.steps[-1].observation.endswith(
        "This was the last code run allowed for this question (2). Answer now with what you have found.")
    assert str(model.calls[3].last_message.content).startswith("You have used all 2 code runs")
    assert cell_text(notebook_cells(answer)[-1]).startswith("### Stopped\n\nThe limit of 2 steps")
    assert_history_is_valid(analyst.history(SCRATCH))  # the code it replied last is not kept


async def test_a_step_limit_ends_with_a_grounded_partial_answer(manager: SessionManager) -> None:
    model = ScriptedChatModel(script=[
        tool_call("import pandas as pd\nt = pd.DataFrame({'x': [3, 4, 5]})\nprint(t['x'].sum())"),
        tool_call("print(t['x'].mean())"),
        tool_call("t['y'] = t['x'] ** 2"),  # past the limit: not run
        "The sum of x is 12 and its mean is 4.0; the mean of y is missing.",
    ])
    analyst = Analyst(model, manager, max_steps=2, attempts_on_doubt=1)
    answer = await analyst.ask(SCRATCH + "-partial", "Sum, mean of x and mean of y?")

    assert answer.stop_reason == "max_steps" and answer.partial
    assert answer.text == ("Partial answer (the step limit was reached before a full answer): The sum of x "
                           "is 12 and its mean is 4.0; the mean of y is missing.")
    assert answer.claims is not None and answer.claims.all_grounded, answer.claims.summary()
    last = cell_text(notebook_cells(answer)[-1])
    assert last.startswith("### Partial answer\n\nPartial answer") and "[12](#cell-id=" in last
    assert_history_is_valid(analyst.history(SCRATCH + "-partial"))


async def test_a_partial_answer_quotes_the_last_result_when_the_model_says_nothing(
        manager: SessionManager) -> None:
    model = ScriptedChatModel(function=lambda call: tool_call(f"print({call.index} * 7)"))
    analyst = Analyst(model, manager, max_steps=2, attempts_on_doubt=1)
    answer = await analyst.ask(SCRATCH + "-quote", "Keep going")
    assert answer.partial and answer.stop_reason == "max_steps"
    assert answer.text == ("The step limit was reached before the model answered. The last result (step 2) "
                           "was: 7")


async def test_the_question_s_time_ends_it_like_the_step_limit(manager: SessionManager) -> None:
    # Each step sleeps past the question's time: after the first reply the judge stops the
    # answer, asks for an answer without code, and says why it is partial.
    def reply(call: ModelCall) -> Any:
        if str(call.last_message.content).startswith("The time for this question"):
            return "The first step printed 0."
        return tool_call(f"import time; time.sleep(0.6); print({call.index})")

    model = ScriptedChatModel(function=reply)
    analyst = Analyst(model, manager, max_steps=10, attempts_on_doubt=1, question_timeout=0.5)
    answer = await analyst.ask(SCRATCH + "-time", "Keep going")

    assert answer.stop_reason == "max_steps" and answer.partial and len(answer.steps) == 1
    assert str(model.calls[1].last_message.content).startswith(
        "The time for this question (0.5 s) is up. Answer now, without code")
    assert answer.text == ("Partial answer (the question's time was up before a full answer): "
                           "The first step printed 0.")
    assert any("ran for its 0.5 s (question_timeout)" in n for n in answer.notes), answer.notes
    assert_history_is_valid(analyst.history(SCRATCH + "-time"))
    with pytest.raises(ValueError, match="question_timeout_s"):
        Analyst(model, manager, question_timeout=0)
    assert Analyst(model, manager).settings.question_timeout_s == 1800.0
    assert Analyst(model, manager, question_timeout=None).settings.question_timeout_s is None


async def test_step_limit_inside_one_reply_then_an_answer(manager: SessionManager) -> None:
    model = ScriptedChatModel(script=[tool_calls("a = 1", "b = 2", "c = 3"), "Done with a and b."])
    analyst = Analyst(model, manager, max_steps=2)
    answer = await analyst.ask(SCRATCH, "Set three variables")

    assert answer.stop_reason == "answered" and [s.code for s in answer.steps] == ["a = 1", "b = 2"]
    refused = model.calls[1].tool_outputs[2]
    assert refused == "Not run: the limit of 2 code runs for this question was reached."
    assert_history_is_valid(analyst.history(SCRATCH))


async def test_multi_turn_keeps_kernel_state_and_history(manager: SessionManager) -> None:
    def second_question(call: ModelCall) -> AIMessage:
        note = str(call.last_message.content)
        assert "- Files in the working directory: titanic.csv (57.0 kB)\n" in note
        assert "- Variables: df: pandas.DataFrame (891, 15) columns: survived, pclass, sex, age," in note
        return tool_call("print(round(df['age'].mean(), 2))")

    model = ScriptedChatModel(script=[
        tool_call(LOAD),
        "Loaded 891 rows.",
        second_question,
        lambda call: f"The mean age is {call.last_tool_output}.",
    ])
    analyst = Analyst(model, manager, profile_files=False)
    first = await analyst.ask("agent-multiturn", "Load the titanic data.", files=[TITANIC])
    second = await analyst.ask("agent-multiturn", "What is the mean age?")

    assert (first.text, second.text) == ("Loaded 891 rows.", "The mean age is 29.7.")
    sent = model.calls[2].messages
    assert [type(m).__name__ for m in sent] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage",
                                                "AIMessage", "HumanMessage"]
    assert str(sent[1].content).startswith("Load the titanic data.")
    history = analyst.history("agent-multiturn")
    assert len(history) == 8 and history[-1].content == second.text
    assert_history_is_valid(history)
    roles = [role(c) for c in notebook_cells(second)]
    assert roles.count("question") == 2 and roles.count("answer") == 2


async def test_large_output_is_saved_for_the_model_to_read(manager: SessionManager) -> None:
    def read_back(call: ModelCall) -> AIMessage:
        name = re.search(r"the full output is in the file (\S+)\]", call.last_tool_output)
        assert name is not None
        return tool_call(f"print(open({name.group(1)!r}).read().count('row '))")

    model = ScriptedChatModel(script=[
        tool_call("for i in range(3000):\n    print(f'row {i}')"),
        read_back,
        lambda call: call.last_tool_output,
    ])
    answer = await Analyst(model, manager, observation_budget=1000).ask(SCRATCH, "Print many rows")

    shown = answer.steps[0].observation
    assert len(shown) <= 1000 and shown.startswith("row 0\n")
    assert shown.endswith("row 2999\nVariables: created i: int = 2999")
    assert answer.text == "3000"


async def test_figures_go_to_models_that_take_images(manager: SessionManager) -> None:
    plot = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 4]); plt.show()"

    def look(call: ModelCall) -> str:
        figures = call.last_message
        assert isinstance(figures, HumanMessage) and isinstance(figures.content, list)
        assert figures.content[0] == {"type": "text", "text": "Figures from step 1:"}
        image: Any = figures.content[1]
        assert image["type"] == "image" and image["mime_type"] == "image/png"
        return "A rising line."

    model = ScriptedChatModel(script=[tool_call(plot), look])
    analyst = Analyst(model, manager, send_images=True)
    answer = await analyst.ask(SCRATCH, "Plot it")
    assert re.fullmatch(r"\[figure 1: \d+x\d+ PNG; attached as an image\]", answer.steps[0].observation)
    figures_note = analyst.history(SCRATCH)[-2]  # images are not carried into later questions
    assert figures_note.content[1] == {"type": "text",
                                       "text": "[figure from an earlier step; no longer attached]"}

    blind = ScriptedChatModel(script=[tool_call(plot), "ok"], profile={"image_inputs": False})
    answer = await Analyst(blind, manager, send_images=True).ask(SCRATCH, "Plot it")
    assert "not shown to you, kept in the notebook" in answer.steps[0].observation
    assert isinstance(blind.calls[1].last_message, ToolMessage)
    assert "You cannot see figures" in str(blind.calls[0].messages[0].content)


async def test_bad_tool_calls_are_explained_to_the_model(manager: SessionManager) -> None:
    bad = AIMessage(content="", tool_calls=[
        {"name": "sql", "args": {"query": "select 1"}, "id": "t1", "type": "tool_call"},
        {"name": "python", "args": {}, "id": "t2", "type": "tool_call"},
    ], invalid_tool_calls=[{"name": "python", "args": "{not json", "id": "t3", "error": "bad JSON",
                            "type": "invalid_tool_call"}])
    model = ScriptedChatModel(script=[bad, "I will stop."])
    analyst = Analyst(model, manager)
    answer = await analyst.ask("agent-bad-calls", "Anything")  # no data files: no work is required

    assert answer.steps == [] and answer.stop_reason == "answered"
    told = model.calls[1].tool_outputs
    assert told[0] == "There is no tool named `sql`. The only tool is `python`."
    assert told[1].startswith("The python tool needs one argument, `code`")
    # streamed, an unreadable call's arguments are read as partial JSON (LangChain's way), so
    # the third call has none: the model is told what the tool needs
    assert told[2].startswith("The python tool needs one argument, `code`"), told[2]
    assert_history_is_valid(analyst.history("agent-bad-calls"))


async def test_model_failure_ends_the_answer_with_error(manager: SessionManager) -> None:
    def fail(call: ModelCall) -> str:
        raise ConnectionError("provider unreachable")

    model = ScriptedChatModel(script=[tool_call("x = 41 + 1"), fail])
    answer = await Analyst(model, manager).ask(SCRATCH, "Try")
    assert answer.stop_reason == "error" and len(answer.steps) == 1
    assert answer.error == "the model call failed: ConnectionError: provider unreachable"
    assert cell_text(notebook_cells(answer)[-1]).endswith("provider unreachable")


async def test_kernel_that_cannot_restart_ends_with_error(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[tool_calls("import os; os._exit(1)", "print(1)", "print(2)")])
    async with SessionManager(tmp_path, limits=test_limits(max_restarts=0)) as private:
        analyst = Analyst(model, private)
        answer = await analyst.ask("agent-crash", "Crash")
        assert answer.stop_reason == "error" and answer.error is not None
        assert answer.error.startswith("the kernel failed: session 'agent-crash': kernel restarted 0 times")
        assert [s.execution.status for s in answer.steps] == ["died"]
        history = analyst.history("agent-crash")
        assert [str(m.content)[:30] for m in history[-2:]] == [
            "The kernel could not run this ", "Not run: the kernel failed on "]
        assert_history_is_valid(history)


def test_models_without_tool_calling_write_code_as_text_or_are_refused(manager: SessionManager) -> None:
    with pytest.raises(ToolCallingUnsupportedError, match="tool calling"):
        Analyst(GenericFakeChatModel(messages=iter(())), manager, protocol="tools")
    analyst = Analyst(GenericFakeChatModel(messages=iter(())), manager)  # auto: code as text
    assert "```python" in str(analyst._loop.systems["code"].content)
    assert analyst._loop.caller.bound is None


def test_settings_are_checked(manager: SessionManager) -> None:
    model = ScriptedChatModel()
    with pytest.raises(ValueError, match="max_steps"):
        Analyst(model, manager, max_steps=0)
    assert Analyst(model, manager, max_steps=3).settings.to_dict()["max_steps"] == 3


async def test_uploading_a_missing_file_raises(manager: SessionManager, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await Analyst(ScriptedChatModel(), manager).ask(SCRATCH, "?", files=[tmp_path / "absent.csv"])


async def test_an_empty_reply_is_no_answer(manager: SessionManager) -> None:
    model = ScriptedChatModel(script=["", "It is 42."])
    answer = await Analyst(model, manager).ask(SCRATCH + "-empty", "What is 6 times 7?")
    assert answer.ok and answer.text == "It is 42." and len(model.calls) == 2
    assert str(model.calls[1].last_message.content).startswith("Your reply was empty.")
    reasons = [c["metadata"]["kernel_analyst"].get("reason") for c in notebook_cells(answer)]
    assert "empty_reply" in reasons


async def test_a_subset_written_over_the_persons_table_is_undone(manager: SessionManager) -> None:
    """Seen with the local model: ``df = df[df['pl_discmethod'] == 'Radial Velocity']`` to
    count one method, and the next question's median came from 553 of 1,035 planets. A
    question that does not ask to change the data leaves ``df`` whole: the step is undone
    and the model told to work under a new name (issue 34)."""
    model = ScriptedChatModel(script=[
        tool_call("df = df[df['pl_discmethod'] == 'Radial Velocity']\nprint(len(df))"),
        tool_call("rv = df[df['pl_discmethod'] == 'Radial Velocity']\nprint(len(rv), len(df))"),
        "553 of the planets.",
        tool_call("print(len(df))"), lambda call: f"{call.last_tool_output.split()[0]} planets in all.",
    ])
    analyst = Analyst(model, manager)
    conversation = SCRATCH + "-shrunk"
    answer = await analyst.ask(conversation, "How many by Radial Velocity?",
                               files=[MESSY / "seaborn_raw_planets_commented.csv"])
    told = str(model.calls[1].last_message.content)
    assert "Step 1 replaced `df` (the person's data: 1,035 rows) by 553 rows." in told, told
    assert "was undone" in told and "`subset = df[df['pl_discmethod'] == 'Radial Velocity']`" in told
    assert answer.steps[1].execution.text.split() == ["553", "1035"]
    assert answer.ok and answer.text == "553 of the planets."
    undone = [c for c in notebook_cells(answer) if c["cell_type"] == "code"
              and c["metadata"]["kernel_analyst"].get("undone")]
    assert [cell_text(c).splitlines()[0] for c in undone] == [
        "df = df[df['pl_discmethod'] == 'Radial Velocity']"]
    later = await analyst.ask(conversation, "How many planets are there?")
    assert later.text == "1035 planets in all."


async def test_a_change_the_question_asks_for_is_kept_and_told_to_the_next_question(
        manager: SessionManager) -> None:
    model = ScriptedChatModel(script=[
        tool_call("df = df.dropna(subset=['distance'])\nprint(len(df))"),
        lambda call: f"{call.last_tool_output.split()[0]} planets are left.",
        tool_call("print(len(df))"), lambda call: f"{call.last_tool_output.split()[0]} planets.",
    ])
    analyst = Analyst(model, manager)
    conversation = SCRATCH + "-kept"
    question = "Leave out the planets with no distance from now on. How many are left?"
    first = await analyst.ask(conversation, question, files=[SEABORN / "planets.csv"])
    told = str(model.calls[1].last_message.content)
    assert "asks to change the data, so this is kept" in told and "`df`: 808 of 1,035 rows" in told, told
    assert first.text == "808 planets are left."
    second = await analyst.ask(conversation, "How many planets are there now?")
    note = str(model.calls[2].last_message.content)
    assert "The data as the person changed it: `df`: 808 of 1,035 rows since cell" in note, note
    assert "(`df = df.dropna(subset=['distance'])`)" in note and second.text == "808 planets."


async def test_an_answer_right_after_a_failed_step_goes_back_once(manager: SessionManager) -> None:
    """Seen with the local model on frictionless' skip-rows file: ``df.loc[2, 'name']``
    failed (KeyError: 2), and the answer gave a name anyway, from the profile."""
    model = ScriptedChatModel(script=[
        tool_call("print(df.shape[0], df.loc[2, 'name'])"), "2 rows; id 2 is english.",
        tool_call("print(df.loc[df['id'] == 2, 'name'].iloc[0])"), "2 rows; id 2 is 中国人.",
    ])
    answer = await Analyst(model, manager).ask(
        SCRATCH + "-failed-last", "How many data rows, and what is the name for id 2?",
        files=[MESSY / "frictionless_skip-rows-before-headers.csv"])
    feedback = str(model.calls[2].last_message.content)
    assert "Your last code failed (KeyError: 2)" in feedback, feedback
    assert answer.ok and answer.text == "2 rows; id 2 is 中国人." and len(answer.steps) == 2


async def test_a_follow_up_answered_without_code_from_an_earlier_number_goes_back(
        manager: SessionManager, tmp_path: Path) -> None:
    """Seen with the local model on a real file: the follow-up "which state has the
    largest TOTAL" answered at once with the first question's sum, no cell run."""
    path = tmp_path / "totals.csv"
    path.write_text("state,total\nA,5\nB,9\nC,7\n")
    model = ScriptedChatModel(script=[
        tool_call("print(df['total'].sum())"), "The totals sum to 21.",
        "B has the largest total, 21.",
        tool_call("print(df['total'].max())"), "B has the largest total, 9.",
    ])
    analyst, cid = Analyst(model, manager), SCRATCH + "-stale-no-code"
    await analyst.ask(cid, "What do the totals sum to?", files=[path])
    answer = await analyst.ask(cid, "Which state has the largest total, and what is it?")
    feedback = str(model.calls[3].last_message.content)
    assert ("These numbers come from the outputs of an earlier question, and no code ran for this one: 21 "
            "(cell [2]: print(df['total'].sum()))." in feedback), feedback
    assert answer.ok and answer.text == "B has the largest total, 9." and len(model.calls) == 5


async def test_a_follow_up_answered_with_an_earlier_questions_number_goes_back(
        manager: SessionManager) -> None:
    table = "import pandas as pd\nt = pd.DataFrame({'state': ['A', 'B', 'C'], 'total': [5, 9, 7]})"
    model = ScriptedChatModel(script=[
        tool_call(table + "\nprint(t['total'].sum())"), "The totals sum to 21.",
        tool_call("print(t.loc[t['total'].idxmax(), 'state'])"), "B has the largest total, 21.",
        tool_call("print(t['total'].max())"), "B has the largest total, 9.",
    ])
    analyst = Analyst(model, manager)
    await analyst.ask(SCRATCH + "-stale", "What do the totals sum to?")
    answer = await analyst.ask(SCRATCH + "-stale", "Which state has the largest total, and what is it?")
    feedback = str(model.calls[4].last_message.content)
    assert ("These numbers come from the outputs of an earlier question, not from this question's work: 21 "
            "(cell [1]: print(t['total'].sum()))." in feedback)
    assert answer.ok and answer.text == "B has the largest total, 9." and answer.claims is not None
    assert answer.claims.all_grounded
