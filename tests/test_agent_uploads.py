"""The analyst on real uploads, end to end: the real langchain-openai client against a
scripted OpenAI-compatible server on 127.0.0.1, real kernels, real files from
``../shared/datasets``.

Each case is one the local 1.5B model showed (issue 26): a Latin-1, semicolon, decimal-comma
file read as one column; a filter on a value the column never holds answered ``nan``; an
answer in prose where the question gave a template; a loop that ran out of steps with
nothing to say; code given as the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent import load_chat_model
from kernel_analyst.eda import detect
from kernel_analyst.kernels import UnsafeFileNameError
from tests.conftest import MESSY, SEABORN
from tests.openai_server import OpenAIServer, ScriptedReply

ACCENTS = MESSY / "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv"
TIPS = SEABORN / "tips.csv"


def _fence(code: str) -> ScriptedReply:
    return ScriptedReply(text=f"```python\n{code}\n```")


def _model(server: OpenAIServer) -> Any:
    return load_chat_model("openai:qwen", base_url=server.url, max_retries=0, timeout=60)


def _last(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def _stream(execution: Any, name: str) -> str:
    return "".join(o.get("text", "") for o in execution.outputs if o.get("name") == name)


def _cells(path: Path) -> list[Any]:
    return list(nbformat.read(path, as_version=4).cells)


async def test_a_latin1_semicolon_decimal_comma_upload_is_read_right_before_the_first_step(
    manager: SessionManager,
) -> None:
    code = "print(len(df), round(df['Occupancy rate'].mean(), 4))"
    replies = [_fence(code), ScriptedReply(text="The file has 638 rows; the mean occupancy rate is 0.6871.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "uploads-accents", "How many rows, and the mean Occupancy rate to 4 decimals?", files=[ACCENTS]
        )
        note = str(server.requests[0]["messages"][1]["content"])
    name = ACCENTS.name
    assert (
        f"`{name}` is already loaded as the DataFrame `df` (delimited text, encoding cp1252, delimiter "
        "';', decimal comma)"
    ) in note
    assert "    " + detect(ACCENTS).code(compact=True) in note  # the loader's own call
    assert "df: 638 rows x 8 columns" in note and "- Occupancy rate: float64" in note  # its profile
    loading = next(c for c in _cells(answer.notebook_path) if c.cell_type == "code")
    assert loading.metadata["kernel_analyst"]["role"] == "profile"
    assert "sep=';'" in loading.source and "decimal=','" in loading.source
    created = loading.metadata["kernel_analyst"]["variables"]["created"]
    assert [(v["name"], v["shape"]) for v in created] == [("df", [638, 8])]
    assert answer.ok and answer.steps[0].execution.text == "638 0.6871\n"
    assert answer.claims is not None and answer.claims.all_grounded


async def test_the_upload_read_again_plainly_is_read_as_it_was_loaded(manager: SessionManager) -> None:
    """Small models read the file again whatever the note says (70 of 102 DABench
    notebooks): a plain ``pd.read_csv('file')`` of a Latin-1, semicolon, decimal-comma file
    gets the loader's choices and says so; a choice the call makes itself is kept."""
    name = ACCENTS.name
    plain = (f"import pandas as pd\nd = pd.read_csv('{name}')\n"
             "print(len(d), round(d['Occupancy rate'].mean(), 4))")
    own = f"print(pd.read_csv('./{name}', sep=',', encoding='latin-1').shape)"
    replies = [_fence(plain), _fence(own), ScriptedReply(text="638 rows; the mean occupancy rate is 0.6871.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "uploads-reread", "How many rows, and the mean Occupancy rate to 4 decimals?", files=[ACCENTS])
    first, second = answer.steps[0].execution, answer.steps[1].execution
    assert first.ok and _stream(first, "stdout") == "638 0.6871\n"
    assert f"kernel-analyst: read {name} as it was loaded (encoding, sep, decimal" in _stream(first, "stderr")
    assert second.ok and _stream(second, "stdout").startswith("(638, 1)")  # its own sep and encoding
    assert "as it was loaded (decimal;" in _stream(second, "stderr")  # only what it did not choose
    guard = [c for c in _cells(answer.notebook_path) if c.cell_type == "code"][1]
    assert guard.metadata["kernel_analyst"]["role"] == "profile" and "read_csv_as_loaded" in guard.source
    assert answer.ok and answer.claims is not None and answer.claims.all_grounded


async def test_an_upload_a_plain_read_reads_right_gets_no_rereading_cell(manager: SessionManager) -> None:
    replies = [_fence("print(len(df))"), ScriptedReply(text="244 rows.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("uploads-plain", "How many rows?", files=[TIPS])
    code = [c for c in _cells(answer.notebook_path) if c.cell_type == "code"]
    roles = [c.metadata["kernel_analyst"].get("role") for c in code]
    assert roles == ["profile", None] and answer.text == "244 rows."


async def test_an_answer_with_no_work_twice_goes_back_sampled_and_then_computes(
        manager: SessionManager) -> None:
    """DABench 5, 28, 62 (the 1.5B model): answered at once from the profile, sent back,
    answered again without code, and that answer was given. Now a second send-back, at a
    higher temperature: the model computes."""
    replies = [ScriptedReply(text="The mean tip is 2.00."), ScriptedReply(text="The mean tip is 2.00."),
               _fence("print(round(df['tip'].mean(), 4))"), ScriptedReply(text="The mean tip is 2.9983.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("uploads-nowork", "What is the mean tip?",
                                                            files=[TIPS])
        temperatures = [r.get("temperature") for r in server.requests]
        told, first_told = _last(server.requests[2]), _last(server.requests[1])
    assert "2.00 (cell [1]: the profile of df)" in first_told, "the profile named as such, not its last line"
    assert temperatures == [None, None, 0.7, None], "the call after the second send-back samples"
    assert told.startswith("Your answer was not accepted: again no code of yours computed it")
    said = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "assistant"]
    assert not any("2.00" in str(m) for m in said), "the made-up answers are not read back"
    assert answer.ok and answer.text == "The mean tip is 2.9983." and len(answer.steps) == 1
    returned = [c for c in _cells(answer.notebook_path) if c.metadata["kernel_analyst"].get("returned")]
    assert len(returned) == 2, "both answers stay in the notebook, marked as returned"


async def test_without_preloading_the_first_step_runs_the_notes_call(manager: SessionManager) -> None:
    call = detect(ACCENTS).code(compact=True)
    replies = [
        _fence(f"import pandas as pd\n{call}\nprint(df.shape)"),
        ScriptedReply(text="638 rows, 8 columns."),
    ]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager, profile_files=False).ask(
            "uploads-call", "How many rows and columns?", files=[ACCENTS]
        )
        note = str(server.requests[0]["messages"][1]["content"])
    assert "(638 rows; delimited text, encoding cp1252, delimiter ';', decimal comma): read it with" in note
    assert f"\n    {call}\n" in note
    assert (
        "Columns: Classement (str), Quartier (str), Date (datetime64[us]), Année (int64), Occupancy rate "
        "(float64)" in note
    )
    assert answer.ok and answer.steps[0].execution.text == "(638, 8)\n"


async def test_a_wrong_separator_and_the_same_error_again_get_the_loaders_call(
    manager: SessionManager,
) -> None:
    read = f"import pandas as pd\ndf = pd.read_csv('{ACCENTS.name}', encoding='latin-1')"
    wrong = f"{read}\nprint(df['Classement'])"
    again = wrong.replace("'latin-1'", "'cp1252'")
    right = f"import pandas as pd\n{detect(ACCENTS).code(compact=True)}\nprint(df['Classement'].nunique())"
    replies = [_fence(wrong), _fence(again), _fence(right), ScriptedReply(text="There are 4 classes.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager, profile_files=False).ask(
            "uploads-separator", "How many classes (Classement) are there?", files=[ACCENTS]
        )
        first, second = _last(server.requests[1]), _last(server.requests[2])
    assert "Error: KeyError: 'Classement'" in first
    assert (
        "`df` has a single column, "
        "'Classement;Quartier;Date;Année;Occupancy rate;Average Price;RevPAR;Source'"
        f": `{ACCENTS.name}` was read with the wrong separator (its delimiter is `;`)"
    ) in first
    assert detect(ACCENTS).code(compact=True) in first
    # the same error again: both steps taken back, with the file's first lines and the call
    assert second.startswith("Steps 1 to 2 failed the same way (KeyError: 'Classement'), so they were "
                             "taken back")
    assert f"This is the same error again. The first lines of `{ACCENTS.name}` are:" in second
    assert "Classement;Quartier;Date;Année;Occupancy rate" in second and "3 stars;All;01-01-13" in second
    assert "Do not guess the options again" in second and detect(ACCENTS).code(compact=True) in second
    assert answer.ok and answer.steps[-1].execution.text == "4\n"


async def test_a_decode_error_names_the_encoding(manager: SessionManager) -> None:
    plain = f"import pandas as pd\ndf = pd.read_csv('{ACCENTS.name}', encoding='utf-8')"  # its own choice
    replies = [_fence(plain), _fence("print(len(df))"), ScriptedReply(text="638 rows.")]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "uploads-decode", "How many rows?", files=[ACCENTS]
        )
        told = _last(server.requests[1])
    assert "Error: UnicodeDecodeError" in told
    assert f"`{ACCENTS.name}` is not UTF-8 text: its encoding is cp1252." in told
    assert detect(ACCENTS).code(compact=True) in told
    assert f"`{ACCENTS.name}` is also already loaded as the DataFrame `df`" in told
    assert answer.ok and answer.text == "638 rows."


async def test_a_filter_on_a_value_the_column_never_holds_and_a_nan_answer(manager: SessionManager) -> None:
    replies = [
        _fence("print(df[df['smoker'] == True]['tip'].mean())"),
        ScriptedReply(text="nan"),
        _fence("print(round(df[df['smoker'] == 'Yes']['tip'].mean(), 2))"),
        ScriptedReply(text="Smokers tip 3.01 on average."),
    ]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "uploads-filter", "What do smokers tip on average?", files=[TIPS]
        )
        observed, feedback = _last(server.requests[1]), _last(server.requests[2])
    assert observed.startswith("Output of your code (step 1):\nnan\n")
    assert "Check: df['smoker'] == True matches no row: column 'smoker' (str) holds 'No', 'Yes'." in observed
    assert "Check: the result 'nan' is empty or NaN" in observed
    assert feedback.startswith("Your answer was not accepted yet:\n- Your answer is nan: that is no finding.")
    assert answer.ok and answer.text == "Smokers tip 3.01 on average."
    assert any("Your answer is nan" in note for note in answer.notes)


async def test_an_answer_not_in_the_form_asked_goes_back_once_with_every_reason(
    manager: SessionManager,
) -> None:
    question = "What is the mean tip? Answer as @mean_tip[value], rounded to 2 decimal places."
    replies = [
        _fence("print(round(df['tip'].mean(), 2))"),
        ScriptedReply(text="The mean tip is 3.0, about 15.7% of the bill."),
        ScriptedReply(text="@mean_tip[3.0]"),
    ]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask("uploads-form", question, files=[TIPS])
        feedback = _last(server.requests[2])
    # one message, every reason: the number no cell printed, and the form
    assert feedback.count("Your answer was not accepted yet") == 1
    assert "No output of this conversation shows these numbers: 15.7%." in feedback
    assert (
        "The question asks for the answer in this form: @mean_tip[value] (missing: @mean_tip[...])"
        in feedback
    )
    assert answer.ok and answer.text == "@mean_tip[3.0]" and len(server.requests) == 3


async def test_a_step_limit_ends_with_a_grounded_partial_answer(manager: SessionManager) -> None:
    replies = [
        _fence("print(len(df))"),
        _fence("print(round(df['tip'].mean(), 3))"),
        _fence("print(df.groupby('day')['tip'].mean())"),  # past the limit: not run
        ScriptedReply(text="There are 244 bills and the mean tip is 2.998; the tips by day are missing."),
    ]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager, max_steps=2).ask(
            "uploads-partial", "How many bills, the mean tip, and the mean tip by day?", files=[TIPS]
        )
        asked = _last(server.requests[3])
    assert asked.startswith("You have used all 2 code runs for this question. Answer now, without code")
    assert answer.stop_reason == "max_steps" and answer.partial
    assert answer.text.startswith(
        "Partial answer (the step limit was reached before a full answer): There are 244 bills"
    )
    assert answer.claims is not None and answer.claims.all_grounded
    markdown = [c for c in _cells(answer.notebook_path) if c.cell_type == "markdown"]
    assert (
        markdown[-1].source.startswith("### Partial answer")
        and markdown[-1].metadata["kernel_analyst"]["partial"] is True
    )
    assert any(c.metadata["kernel_analyst"].get("reason") == "step_limit" for c in markdown)  # the 3rd reply


async def test_code_is_never_the_answer(manager: SessionManager) -> None:
    cut = "Let me compute it.\n```python\nimport pandas as pd\n"
    cut += "result = df.groupby('day')['tip'].agg(\n    ['mean',"
    replies = [
        ScriptedReply(text=cut),
        ScriptedReply(text="print(df['tip'].max())"),
        ScriptedReply(text="10.0."),
    ]
    with OpenAIServer(replies) as server:
        answer = await Analyst(_model(server), manager).ask(
            "uploads-code", "What is the largest tip?", files=[TIPS]
        )
        told = _last(server.requests[1])
    assert told.startswith("Your reply ended inside a code block that was never closed")
    assert answer.ok and answer.text == "10.0." and len(answer.steps) == 1
    assert answer.steps[0].via == "bare_code" and answer.steps[0].execution.text == "10.0\n"
    accounted = [c for c in _cells(answer.notebook_path) if c.metadata["kernel_analyst"].get("ran") is False]
    assert (
        len(accounted) == 1
        and "Reply 1 ran nothing: Your reply ended inside a code block" in accounted[0].source
    )


async def test_replies_that_run_nothing_end_the_answer_early(manager: SessionManager) -> None:
    done = "print(df['tip'].mean())"
    replies = [_fence(done)] * 4 + [ScriptedReply(text="The mean tip is 3.0.")]
    with OpenAIServer(replies, max_requests=10) as server:
        answer = await Analyst(_model(server), manager, max_steps=10, attempts_on_doubt=1).ask(
            "uploads-stall", "Mean tip?", files=[TIPS]
        )
        requests = len(server.requests)
    assert requests == 5  # one step, three repeats that ran nothing, one call asking for an answer
    assert len(answer.steps) == 1 and answer.stop_reason == "max_steps"
    assert any("3 replies in a row ran no code" in note for note in answer.notes)
    kinds = [
        c.metadata["kernel_analyst"].get("reason")
        for c in _cells(answer.notebook_path)
        if c.cell_type == "markdown"
    ]
    assert kinds.count("repeated_success") == 3


@pytest.mark.parametrize(
    "name",
    [
        "csvkit_realdata_Datagov_FY10_EDU_recp_by_State.csv",
        "csvkit_test_utf16_little.csv",
        "seaborn_raw_planets_commented.csv",
    ],
)
async def test_messy_uploads_are_loaded_with_their_rows_counted_right(
    manager: SessionManager, name: str
) -> None:
    from kernel_analyst.agent.testing import ScriptedChatModel

    rows = {
        "csvkit_realdata_Datagov_FY10_EDU_recp_by_State.csv": 53,
        "csvkit_test_utf16_little.csv": 2,
        "seaborn_raw_planets_commented.csv": 1035,
    }[name]
    model = ScriptedChatModel(script=[f"It has {rows} rows."])
    answer = await Analyst(model, manager, require_work=False).ask(
        f"uploads-{rows}", "How many rows?", files=[MESSY / name]
    )
    assert f"df: {rows:,} rows x" in str(model.calls[0].messages[-1].content)
    loading = next(c for c in _cells(answer.notebook_path) if c.cell_type == "code")
    assert loading.metadata["kernel_analyst"]["variables"]["created"][0]["shape"][0] == rows


async def test_files_a_person_uploaded_before_asking_are_read_like_the_questions_own(
    manager: SessionManager,
) -> None:
    """The service's way: files first (``session.upload``), then questions (``uploaded="new"``)."""
    session = await manager.session("uploads-earlier")
    await session.upload(ACCENTS, name="hotels.csv")
    replies = [_fence("print(len(df))"), ScriptedReply(text="It has 638 rows."),
               _fence("print(len(df))"), ScriptedReply(text="Still 638 rows."),
               _fence("print(len(tips))"), ScriptedReply(text="244 rows.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        first = await analyst.ask("uploads-earlier", "How many rows?", uploaded="new")
        again = await analyst.ask("uploads-earlier", "And now?", uploaded="new")
        await session.upload(TIPS)
        third = await analyst.ask("uploads-earlier", "How many rows has tips?", uploaded="new")
        notes = [_last(server.requests[i]) for i in (0, 2, 4)]
    assert first.ok and first.text == "It has 638 rows."
    assert "`hotels.csv` is already loaded as the DataFrame `df` (delimited text, encoding cp1252" in notes[0]
    assert "already loaded" not in notes[1], "read once: the next question keeps the person's df"
    assert again.ok and again.text == "Still 638 rows."
    assert "`tips.csv` is already loaded as the DataFrame `tips`" in notes[2], notes[2]
    assert third.ok and third.steps[0].execution.text.strip() == "244"
    loaders = [c for c in _cells(first.notebook_path) if c.cell_type == "code"
               and c.metadata.get("kernel_analyst", {}).get("role") == "profile"]
    rereading = [c for c in loaders if "read_csv_as_loaded" in c.source]
    assert len(loaders) - len(rereading) == 2, "one loader cell per upload, in the audit trail"
    assert len(rereading) == 1, "hotels.csv read again reads as loaded (tips.csv needs nothing)"


async def test_a_named_file_of_the_working_directory_is_read_and_a_path_trick_refused(
    manager: SessionManager,
) -> None:
    session = await manager.session("uploads-named")
    await session.upload(TIPS, name="data/tips.csv")
    replies = [_fence("print(df.shape)"), ScriptedReply(text="244 rows and 7 columns.")]
    with OpenAIServer(replies) as server:
        analyst = Analyst(_model(server), manager)
        answer = await analyst.ask("uploads-named", "What shape is it?", uploaded=["data/tips.csv"])
        note = _last(server.requests[0])
        with pytest.raises(UnsafeFileNameError):
            await analyst.ask("uploads-named", "And this?", uploaded=["../../etc/passwd"])
    assert answer.ok and "`data/tips.csv` is already loaded as the DataFrame `df`" in note
