"""How a model's reply becomes code (agent/protocols.py): pure, no kernel, no model.

The shapes are the ones a real small model (Qwen2.5-Coder-1.5B behind llama-server) wrote
when it did not make native tool calls, and the ones other local servers leave in text.
"""

from __future__ import annotations

import pytest

from kernel_analyst.agent.protocols import PROTOCOLS, ProtocolState, Via, find_code
from kernel_analyst.frontend.settings import PROTOCOL_NAMES

TOOL = "python"
CALL = {"name": TOOL, "args": {"code": "1 + 1"}, "id": "call_1", "type": "tool_call"}


def read(state: ProtocolState, text: str, calls: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
    return state.read(text, calls or [], [], tool_name=TOOL)


# -- the text forms --------------------------------------------------------------------------

QWEN_FENCE = """To find the survival rate, I will load the data and compute the mean.

```python
import pandas as pd
df = pd.read_csv('titanic.csv')
print(df['survived'].mean())
```

The survival rate is 0.6225, and 142 male passengers survived."""


def test_a_python_fence_is_the_step_and_what_follows_it_is_not_kept() -> None:
    found = find_code(QWEN_FENCE, tool_name=TOOL)
    assert found is not None and found.action.via is Via.PYTHON_FENCE
    assert found.action.code == ("import pandas as pd\ndf = pd.read_csv('titanic.csv')\n"
                                 "print(df['survived'].mean())")
    assert found.before == "To find the survival rate, I will load the data and compute the mean."
    assert found.kept.endswith("```") and "0.6225" not in found.kept  # the invented numbers are dropped


def test_several_python_fences_are_one_step_in_order() -> None:
    text = "First:\n```python\na = 1\n```\nthen\n```py\nprint(a + 1)\n```\n"
    found = find_code(text, tool_name=TOOL)
    assert found is not None and found.action.code == "a = 1\n\nprint(a + 1)"


@pytest.mark.parametrize("text", [
    'I will call the tool.\n```json\n{"name": "python", "arguments": {"code": "print(2)"}}\n```',
    '```json\n{"name": "python", "arguments": "{\\"code\\": \\"print(2)\\"}"}\n```',  # arguments as a string
    '```json\n{"function": {"name": "python", "arguments": {"code": "print(2)"}}}\n```',
    '```json\n[{"name": "python", "parameters": {"code": "print(2)"}}]\n```',
    '```\n{"name": "python", "arguments": {"code": "print(2)"}}\n```',  # a bare fence
])
def test_a_json_call_in_a_fence_is_parsed(text: str) -> None:
    found = find_code(text, tool_name=TOOL)
    assert found is not None and found.action.via is Via.JSON_FENCE and found.action.code == "print(2)"


def test_a_json_call_with_raw_newlines_in_the_code_is_parsed_never_evaluated() -> None:
    text = '```json\n{"name": "python", "arguments": {"code": "x = 1\nprint(x)"}}\n```'
    found = find_code(text, tool_name=TOOL)
    assert found is not None and found.action.code == "x = 1\nprint(x)"
    evil = '```json\n{"name": "python", "arguments": {"code": __import__("os").getcwd()}}\n```'
    assert find_code(evil, tool_name=TOOL) is None  # not JSON: not run, and nothing evaluated


def test_a_json_call_with_python_triple_quotes_as_qwen_writes_it() -> None:
    text = ('```json\n{\n  "name": "python",\n  "arguments": {\n    "code": """\nimport pandas as pd\n'
            'print(pd.read_csv("titanic.csv").shape)\n"""\n  }\n}\n```\n\nThe survival rate is 0.6224.')
    found = find_code(text, tool_name=TOOL)
    assert found is not None and found.action.via is Via.JSON_FENCE
    assert found.action.code == '\nimport pandas as pd\nprint(pd.read_csv("titanic.csv").shape)\n'


def test_a_json_call_whose_arguments_brace_is_never_closed_is_read() -> None:
    """DABench hard 109 with the 1.5B model: three calls in a row lacked the arguments'
    closing brace, and none ran. Up to two braces left out are added; more is no call."""
    text = '```json\n{\n  "name": "python",\n  "arguments": {\n    "code": """\nprint(1)\n"""\n}\n```'
    found = find_code(text, tool_name=TOOL)
    assert found is not None and found.action.code == "\nprint(1)\n"
    assert find_code('```json\n{"name": "python", "arguments": {"code": "print(2)"\n```', tool_name=TOOL) \
        is not None
    assert find_code('```json\n{"name": "python", "arguments": {"x": {"code": "print(3)"\n```',
                     tool_name=TOOL) is None


def test_a_call_that_cannot_be_read_is_not_an_answer() -> None:
    broken = '```json\n{"name": "python", "arguments": {"code": print(1)}}\n```\nThe rate is 0.62.'
    state = ProtocolState("auto")
    reading = read(state, broken)
    assert reading.unreadable and not reading.is_answer and reading.actions == []
    assert state.active == "code" and reading.switched_to == "code"
    tools = ProtocolState("auto")
    read(tools, "", [CALL])
    assert read(tools, broken).is_answer  # a tools conversation's prose is its answer


@pytest.mark.parametrize("text", [
    '```json\n{"name": "search", "arguments": {"code": "x"}}\n```',   # another tool
    '```json\n{"survival_rate": 0.38, "men": 0.19}\n```',             # data, not a call
    '```json\n{"name": "python", "arguments": {"query": "x"}}\n```',  # no code
    'The answer is 0.38.',
    '```text\nsurvived    0.383838\n```',
    '```\nsurvived    0.383838\n```',  # an untagged fence of output is not code
])
def test_text_that_asks_to_run_nothing(text: str) -> None:
    assert find_code(text, tool_name=TOOL) is None


def test_tool_call_tags_as_qwen_writes_them() -> None:
    text = ('<tool_call>\n{"name": "python", "arguments": {"code": "import pandas as pd\\nprint(1)"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "python", "arguments": {"code": "print(2)"}}\n</tool_call>')
    found = find_code(text, tool_name=TOOL)
    assert found is not None and found.action.via is Via.TOOL_CALL_TAG
    assert found.action.code == "import pandas as pd\nprint(1)\n\nprint(2)"


def test_execute_python_tags_with_or_without_a_fence_inside() -> None:
    found = find_code("Let me check.\n<execute_python>\nprint(3)\n</execute_python>\nDone.", tool_name=TOOL)
    assert found is not None and found.action.via is Via.EXECUTE_TAG and found.action.code == "print(3)"
    assert found.before == "Let me check." and found.kept.endswith("</execute_python>")
    fenced = find_code("<execute_python>\n```python\nprint(4)\n```\n</execute_python>", tool_name=TOOL)
    assert fenced is not None and fenced.action.code == "print(4)"


def test_a_fence_left_open_counts_only_if_its_code_parses() -> None:
    complete = find_code("```python\nprint(df.shape)\n", tool_name=TOOL)
    assert complete is not None and complete.action.code == "print(df.shape)"
    assert find_code("```python\nfor row in df.itertuples(:\n", tool_name=TOOL) is None


def test_a_fence_inside_indented_prose_and_tildes() -> None:
    found = find_code("Steps:\n  ~~~python\n  print(5)\n  ~~~\n", tool_name=TOOL)
    assert found is not None and found.action.code.strip() == "print(5)"


# -- the protocols ---------------------------------------------------------------------------


def test_auto_switches_to_code_when_the_model_writes_code_as_text() -> None:
    state = ProtocolState("auto")
    assert state.active is None and state.binds_tools and state.prompt_protocol == "tools"
    reading = read(state, QWEN_FENCE)
    assert reading.switched_to == "code" and state.active == "code"
    assert state.binds_tools and state.system_prompt == "auto"  # what the model is offered stays
    assert [a.via for a in reading.actions] == [Via.PYTHON_FENCE] and not reading.is_answer
    assert reading.text.startswith("To find") and reading.kept_text is not None
    again = read(state, "```python\nprint(1)\n```")
    assert again.switched_to is None and again.actions[0].code == "print(1)"
    assert read(state, "The rate is 0.38.").is_answer


def test_auto_follows_native_calls_and_then_never_runs_a_fence_in_prose() -> None:
    state = ProtocolState("auto")
    reading = read(state, "", [CALL])
    assert reading.switched_to == "tools" and state.active == "tools"
    assert [(a.code, a.via, a.call_id) for a in reading.actions] == [("1 + 1", Via.TOOL_CALL, "call_1")]
    answer = read(state, "The mean is 2. You could compute it with:\n```python\ndf.mean()\n```")
    assert answer.is_answer and answer.actions == []


def test_auto_before_any_code_keeps_prose_as_the_answer() -> None:
    state = ProtocolState("auto")
    reading = read(state, "The survival rate is 0.62.")
    assert reading.is_answer and state.active is None


def test_tools_never_reads_code_from_text() -> None:
    state = ProtocolState("tools")
    assert read(state, QWEN_FENCE).is_answer and state.active == "tools"


def test_code_reads_every_text_form_and_binds_no_tools() -> None:
    state = ProtocolState("code")
    assert not state.binds_tools and state.prompt_protocol == "code"
    reading = read(state, '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>')
    assert reading.actions[0].via is Via.TOOL_CALL_TAG and reading.switched_to is None


def test_native_calls_of_other_tools_and_empty_code_are_calls_without_actions() -> None:
    state = ProtocolState("tools")
    other = {"name": "search", "args": {"q": "x"}, "id": "c2", "type": "tool_call"}
    empty = {"name": TOOL, "args": {"code": "  "}, "id": "c3", "type": "tool_call"}
    reading = read(state, "", [other, empty])
    assert reading.actions == [] and [c[0] for c in reading.calls] == ["search", TOOL]
    assert not reading.is_answer  # each call is answered with an error instead


def test_a_model_without_tool_calling() -> None:
    state = ProtocolState("auto")
    state.fall_back_to_code()
    assert state.active == "code" and not state.binds_tools
    with pytest.raises(ValueError, match="tool calling"):
        ProtocolState("tools").fall_back_to_code()
    with pytest.raises(ValueError, match="protocol must be one of"):
        ProtocolState("json")  # type: ignore[arg-type]


def test_the_flags_offer_the_same_protocols() -> None:
    assert PROTOCOL_NAMES == PROTOCOLS


# -- what an auto conversation is told ------------------------------------------------------


def test_an_undecided_auto_conversation_is_offered_a_python_block() -> None:
    from kernel_analyst.agent.prompting import system_prompt

    state = ProtocolState("auto")
    assert state.system_prompt == "auto" and state.prompt_protocol == "tools"
    auto = system_prompt(tool_name="python", max_steps=5, budget=4000, send_images=False, protocol="auto")
    tools = system_prompt(tool_name="python", max_steps=5, budget=4000, send_images=False, protocol="tools")
    assert "the `python` tool. If you cannot call tools, write the code in a ```python block" in auto
    assert "without calling the tool and without a ```python block" in auto
    assert "If you cannot call tools" not in tools
    state.fall_back_to_code()
    assert (state.system_prompt, state.binds_tools) == ("code", False)
    assert ProtocolState("tools").system_prompt == "tools"


def test_code_written_as_text_is_kept_as_its_code_only() -> None:
    reply = ("The mean is @mean[100.00].\n```python\nimport pandas as pd\nprint(1)\n```\n"
             "Output: 1\nSo the answer is 1.")
    reading = ProtocolState("auto").read(reply, tool_name="python")
    assert reading.kept_text == "```python\nimport pandas as pd\nprint(1)\n```"
    assert reading.text == "The mean is @mean[100.00]."  # still shown to the user and kept in the notebook


def test_an_answer_written_in_a_python_block_is_the_answer() -> None:
    state = ProtocolState("code")
    reading = read(state, "```python\n@mean_fare[34.65]\n```")
    assert reading.is_answer and reading.text == "@mean_fare[34.65]"
    both = read(state, "The answer:\n```python\n@mean_fare[34.65], @count[891]\n```")
    assert both.is_answer and both.text == "The answer:\n@mean_fare[34.65], @count[891]"
    code = read(state, "```python\nprint('@mean_fare[34.65]')\n```")
    assert not code.is_answer and code.actions[0].code == "print('@mean_fare[34.65]')"
