"""How a model's reply becomes this step's code: the agent's action protocols.

Models say "run this" in different ways, and whether native tool calls work depends on
the model, its chat template and the server (llama.cpp, Ollama, vLLM without a tool
parser). The loop (:mod:`.analyst`) does not care: it hands each reply to a
:class:`ProtocolState` and gets back a :class:`Reading`, the code to run (as
:class:`Action` objects) or none, which makes the reply the answer.

Protocols (:data:`PROTOCOLS`):

- ``tools``: native tool calls only; any text is prose, and a reply without a call is
  the answer. Code in a reply's text is never run.
- ``code``: the model writes its code as text; the system prompt asks for exactly one
  ```` ```python ```` block per step, and a reply without one is the answer. The forms
  small models fall back to are read too: a JSON call of the tool in a ```` ```json ````
  fence, ``<tool_call>`` tags (Qwen/Hermes text a server left unparsed) and
  ``<execute_python>`` tags. A JSON call is parsed with :func:`json.loads`, never
  evaluated.
- ``auto`` (the default): native tool calls when the model makes them. A reply with no
  tool call that carries code in one of the text forms above is a step too, and the
  conversation switches to ``code``. The system prompt and the tools offered stay as they
  were (the ``auto`` prompt describes both forms): a model server caches the prompt it has
  seen, and a changed first message would cost the whole prompt again at every
  conversation's first step. Once a conversation has made a native tool call it is a
  ``tools`` conversation for good, so a fence inside its prose answer (an example snippet)
  is never run.

Code is never an answer: a reply that is only code with no fence and no prose runs as a
step (``code``, ``auto``), or is sent back asking for the tool (``tools``); a reply that
ends inside a code block that does not parse (cut at the length limit) runs nothing and is
not an answer either.

Every action records how its code arrived (:class:`Via`): the notebook cell's metadata
and the step's events carry it.
"""

from __future__ import annotations

import ast
import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ProtocolName = Literal["auto", "tools", "code"]
"""An action protocol: see the module docstring."""
PROTOCOLS: tuple[ProtocolName, ...] = ("auto", "tools", "code")
"""Every protocol, the default first."""
ActiveProtocol = Literal["tools", "code"]
"""The protocol a conversation follows once known."""


class Via(str, enum.Enum):
    """How a step's code arrived in the model's reply."""

    TOOL_CALL = "tool_call"
    """A native tool call."""
    PYTHON_FENCE = "python_fence"
    """A ```` ```python ```` fenced block in the text."""
    JSON_FENCE = "json_fence"
    """A JSON call of the tool inside a ```` ```json ```` fence."""
    TOOL_CALL_TAG = "tool_call_tag"
    """A JSON call inside ``<tool_call>`` tags (Qwen/Hermes style)."""
    EXECUTE_TAG = "execute_python_tag"
    """Code inside ``<execute_python>`` tags."""
    BARE_CODE = "bare_code"
    """A reply that is only Python code, with no fence and no prose."""


@dataclass(frozen=True)
class Action:
    """One piece of code the model asked to run."""

    code: str
    """The code, as it will run."""
    via: Via
    """How it arrived."""
    call_id: str = ""
    """The native tool call's id ("" for code written as text)."""


@dataclass(frozen=True)
class InvalidCall:
    """A native tool call whose arguments could not be parsed."""

    call_id: str
    """The call's id."""
    error: str = ""
    """What the provider said was wrong."""


@dataclass(frozen=True)
class Reading:
    """What a reply means under the conversation's protocol."""

    actions: list[Action] = field(default_factory=list)
    """Code to run, in order; empty when the reply is the answer."""
    text: str = ""
    """The reply's prose: the answer when there are no actions; otherwise the text
    before the code (the model's reasoning)."""
    invalid: list[InvalidCall] = field(default_factory=list)
    """Native calls with unreadable arguments (each answered with an error)."""
    calls: list[tuple[str, Any, str]] = field(default_factory=list)
    """Native calls as (name, arguments, id), in order, including calls of unknown tools."""
    switched_to: ActiveProtocol | None = None
    """Set when this reply decided an ``auto`` conversation's protocol."""
    kept_text: str | None = None
    """For code written as text: what the conversation keeps of the reply, its code as one
    python block (:func:`code_block`; a model that invents numbers around its code, before
    or after it, should not read them back); None keeps the reply whole."""
    trailing: str = ""
    """For code written as text: the prose after the code (often an answer the model made
    up before seeing any output)."""
    unreadable: bool = False
    """The text tried to call the tool (a JSON call in a fence or tags) but could not be
    read: the model is told so instead of the reply becoming the answer."""
    cut: bool = False
    """The reply ended inside a ```python block that was never closed and does not parse
    (cut at the length limit): nothing runs, and it is not an answer either."""
    code_only: bool = False
    """Under ``tools``: the reply is only code written as text (never run there), so it
    is not an answer either; the model is told to call the tool with it."""

    @property
    def is_answer(self) -> bool:
        """True when the reply runs nothing and is prose (native calls of unknown tools
        still count); code is never an answer."""
        return (not self.actions and not self.invalid and not self.calls and not self.unreadable
                and not self.cut and not self.code_only)


@dataclass
class ProtocolState:
    """The protocol of one conversation: what was asked for and what the model follows."""

    requested: ProtocolName = "auto"
    """The setting (``auto``, ``tools`` or ``code``)."""
    active: ActiveProtocol | None = None
    """What the conversation follows: fixed for ``tools`` and ``code``; for ``auto``
    None until the model's first action shows it."""
    text_only: bool = False
    """The model cannot be offered tools at all (it writes code as text from the start)."""

    def __post_init__(self) -> None:
        if self.requested not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}; got {self.requested!r}")
        if self.requested != "auto":
            self.active = self.requested

    @property
    def binds_tools(self) -> bool:
        """Whether the model is offered the native tools: under ``tools`` and ``auto``, for
        the whole conversation (so the prompt a server cached stays the same)."""
        return self.requested != "code" and not self.text_only

    @property
    def prompt_protocol(self) -> ActiveProtocol:
        """The protocol the system prompt describes now (``tools`` until code-as-text)."""
        return "code" if self.active == "code" else "tools"

    def prefer_code(self) -> bool:
        """An undecided ``auto`` conversation whose model answered instead of calling the
        tool writes code as text from now on (small local models follow a ```python
        block more readily than a tool they ignored); True if that switched it."""
        if self.active is not None:
            return False
        self.active = "code"
        return True

    @property
    def system_prompt(self) -> ProtocolName:
        """Which system prompt the model is shown, for the whole conversation: ``code`` for a
        model that cannot be offered tools, else the protocol requested (the ``auto``
        prompt describes the tool and the python block alike)."""
        return "code" if self.text_only else self.requested

    def fall_back_to_code(self) -> None:
        """The model cannot bind tools: an ``auto`` conversation writes code as text, and is
        told so by its system prompt, from the start."""
        if self.requested == "tools":
            raise ValueError("the tools protocol needs a model that supports tool calling")
        self.active = "code"
        self.text_only = True

    def read(self, text: str, tool_calls: Sequence[Mapping[str, Any]] = (),
             invalid_calls: Sequence[Mapping[str, Any]] = (), *, tool_name: str,
             cut: bool = False) -> Reading:
        """What a reply (its text and native calls) asks for under this protocol; ``cut``:
        the reply was cut at its length limit."""
        if tool_calls or invalid_calls:
            reading = self._read_native(text, tool_calls, invalid_calls, tool_name)
            if cut and any(not _parses(action.code) for action in reading.actions):
                # the call's arguments were cut mid-code (and completed as JSON by the
                # client): nothing runs, as for a block left open at the limit
                return Reading(text=text, cut=True, switched_to=reading.switched_to)
            return reading
        text = unfence_answers(text)
        if self.active == "tools":
            return Reading(text=text, code_only=is_code_only(text))
        found = find_code(text, tool_name=tool_name) or bare_code(text)
        unreadable = found is None and looks_like_a_call(text, tool_name=tool_name)
        if found is None and not unreadable:
            return Reading(text=text, cut=cut_fence(text))
        switched: ActiveProtocol | None = None
        if self.active is None:
            self.active = switched = "code"
        if found is None:
            return Reading(text=text, unreadable=True, switched_to=switched)
        return Reading(actions=[found.action], text=found.before, switched_to=switched,
                       kept_text=code_block(found.action.code), trailing=text[len(found.kept):].strip())

    def _read_native(self, text: str, tool_calls: Sequence[Mapping[str, Any]],
                     invalid_calls: Sequence[Mapping[str, Any]], tool_name: str) -> Reading:
        switched: ActiveProtocol | None = None
        if self.active is None:
            self.active = switched = "tools"
        actions, calls = [], []
        for call in tool_calls:
            call_id, args = str(call.get("id") or ""), call.get("args")
            calls.append((str(call.get("name", "")), args, call_id))
            code = args.get("code") if isinstance(args, dict) else None
            if call.get("name") == tool_name and isinstance(code, str) and code.strip():
                actions.append(Action(code, Via.TOOL_CALL, call_id))
        invalid = [InvalidCall(str(c.get("id") or ""), str(c.get("error") or _json_error(c.get("args"))))
                   for c in invalid_calls]
        return Reading(actions=actions, text=text, invalid=invalid, calls=calls, switched_to=switched)


# -- code written as text --------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*)\Z", re.DOTALL | re.MULTILINE)
_EXECUTE_TAG = re.compile(r"<execute_python>(.*?)(?:</execute_python>|\Z)", re.DOTALL)
_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_PYTHON_LANGUAGES = frozenset({"python", "py", "python3", "ipython", "ipython3"})
_JSON_LANGUAGES = frozenset({"json", "json5", "tool_call", "tool-call"})
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


@dataclass(frozen=True)
class FoundCode:
    """Code found in a reply's text."""

    action: Action
    """What to run."""
    before: str
    """The prose before the code."""
    kept: str
    """The reply up to the end of the code."""


def code_block(code: str) -> str:
    """A step written as text, as the conversation keeps it: its code in one python block and
    nothing else. The prose around it may hold numbers the model made up before it saw any
    output, and a small model copies those into its answer when it reads them back."""
    return f"```python\n{code.strip()}\n```"


def find_code(text: str, *, tool_name: str) -> FoundCode | None:
    """The code a reply written as text asks to run, or None when it asks for none.

    Tags first (they are unambiguous), then fences: every ```` ```python ```` block of the
    reply, in order, joined as one step (a model that splits its code in two blocks meant
    both), or a JSON call of ``tool_name`` in a ```` ```json ```` fence. A last fence that
    was never closed (the model stopped mid-reply) counts only if its code parses.
    """
    return (_execute_tags(text) or _tool_call_tags(text, tool_name) or _python_fences(text)
            or _json_fences(text, tool_name))


def _execute_tags(text: str) -> FoundCode | None:
    matches = [m for m in _EXECUTE_TAG.finditer(text) if _strip_fence(m.group(1)).strip()]
    if not matches:
        return None
    code = "\n\n".join(_strip_fence(m.group(1)).strip("\n") for m in matches)
    return FoundCode(Action(code, Via.EXECUTE_TAG), text[:matches[0].start()].strip(),
                     text[:matches[-1].end()].rstrip())


def _tool_call_tags(text: str, tool_name: str) -> FoundCode | None:
    codes, first, last = [], None, None
    for match in _TOOL_CALL_TAG.finditer(text):
        code = _call_code(_loads(_strip_fence(match.group(1))), tool_name)
        if code is not None:
            codes.append(code)
            first = first if first is not None else match.start()
            last = match.end()
    if not codes or first is None or last is None:
        return None
    action = Action("\n\n".join(codes), Via.TOOL_CALL_TAG)
    return FoundCode(action, text[:first].strip(), text[:last].rstrip())


def _python_fences(text: str) -> FoundCode | None:
    blocks = [m for m in _fences(text) if m.group(2).lower() in _PYTHON_LANGUAGES and m.group(3).strip()]
    if not blocks:
        return None
    code = "\n\n".join(m.group(3).strip("\n") for m in blocks)
    return FoundCode(Action(code, Via.PYTHON_FENCE), text[:blocks[0].start()].strip(),
                     text[:blocks[-1].end()].rstrip())


def _json_fences(text: str, tool_name: str) -> FoundCode | None:
    for match in _fences(text):
        if match.group(2).lower() not in _JSON_LANGUAGES | {""}:
            continue
        code = _call_code(_loads(match.group(3)), tool_name)
        if code is not None:
            return FoundCode(Action(code, Via.JSON_FENCE), text[:match.start()].strip(),
                             text[:match.end()].rstrip())
    return None


def _fences(text: str) -> list[re.Match[str]]:
    """Closed fences, then a last one left open if its python code parses."""
    found = list(_FENCE.finditer(text))
    tail_from = found[-1].end() if found else 0
    tail = _OPEN_FENCE.search(text, tail_from)
    if tail is not None and tail.group(2).lower() in _PYTHON_LANGUAGES and _parses(tail.group(3)):
        found.append(tail)
    return found


_ANSWER_ONLY = re.compile(r"^(?:\s*@\w+\[[^\]\n]*\][\s,;.]*)+$")


def unfence_answers(text: str) -> str:
    """The reply with fences that hold only ``@name[value]`` answers unwrapped: a small
    model writes its final answer in a python block, where it is a syntax error, not code."""
    def plain(match: re.Match[str]) -> str:
        body = match.group(3)
        return body.strip() if _ANSWER_ONLY.match(body) and not _parses(body) else match.group(0)

    return _FENCE.sub(plain, text)


def bare_code(text: str) -> FoundCode | None:
    """A reply that is only Python code, with no fence and no prose: it runs as a step
    (a model that forgot the fence meant it to run). A bare value (``42``, ``nan``) or a
    name is prose, not code."""
    code = text.strip()
    if not code or "```" in code or not _parses(code):
        return None
    if not any(_does_something(node) for node in ast.parse(code).body):
        return None
    return FoundCode(Action(code, Via.BARE_CODE), "", text.rstrip())


def _does_something(node: ast.stmt) -> bool:
    """A statement that computes: not a bare value, a name, or ``x = 3.2`` (a model
    stating its result as an assignment)."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Call)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return node.value is not None and not isinstance(node.value, (ast.Constant, ast.UnaryOp))
    return True


def cut_fence(text: str) -> bool:
    """True when the reply ends inside a ```python block that was never closed and whose
    code does not parse (the model ran out of tokens mid-block)."""
    found = list(_FENCE.finditer(text))
    tail = _OPEN_FENCE.search(text, found[-1].end() if found else 0)
    return (tail is not None and tail.group(2).lower() in _PYTHON_LANGUAGES | {""}
            and not _parses(tail.group(3)))


def is_code_only(text: str) -> bool:
    """True when a reply is nothing but code: one or more fences and no prose around
    them, an open fence, or bare code."""
    if bare_code(text) is not None or cut_fence(text):
        return True
    blocks = list(_FENCE.finditer(text))
    prose = _FENCE.sub("", text).strip()
    return bool(blocks) and not prose and any(m.group(2).lower() in _PYTHON_LANGUAGES for m in blocks)


def _strip_fence(text: str) -> str:
    """Code inside tags, without a fence the model may have put around it."""
    match = _FENCE.search(text)
    return match.group(3) if match and not text[:match.start()].strip() else text


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return bool(code.strip())


_TRIPLE_QUOTED = re.compile(r'("""|\'\'\')(.*?)\1', re.DOTALL)


_UNCLOSED = 2
"""Closing braces a call may lack and still be read."""


def _loads(text: str) -> Any:
    """JSON, allowing what small models write into it: raw newlines inside strings, Python's
    triple-quoted strings (rewritten as JSON strings first), and up to :data:`_UNCLOSED`
    closing braces left out at the end (DABench hard 109 with the 1.5B model: the arguments'
    brace never closed, three calls in a row, none run). Never evaluated."""
    rewritten = _TRIPLE_QUOTED.sub(lambda m: json.dumps(m.group(2)), text.strip())
    for candidate in (text.strip(), rewritten, *(rewritten + "}" * n for n in range(1, _UNCLOSED + 1))):
        try:
            return json.loads(candidate, strict=False)
        except ValueError:
            continue
    return None


def looks_like_a_call(text: str, *, tool_name: str) -> bool:
    """True when text the protocols could not read still looks like an attempt to call the
    tool (a fence or tags naming it, with ``code``): the model is told, not answered for."""
    bodies = [m.group(3) for m in _FENCE.finditer(text)] + [m.group(1) for m in _TOOL_CALL_TAG.finditer(text)]
    return any(f'"{tool_name}"' in body and '"code"' in body for body in bodies)


def _json_error(args: Any) -> str:
    """Why a call's arguments are not JSON ("" when that is not known): a streamed call
    whose arguments do not parse carries no error of the provider's."""
    if not isinstance(args, str):
        return ""
    try:
        json.loads(args)
    except ValueError as exc:
        return str(exc)
    return ""


def _call_code(data: Any, tool_name: str) -> str | None:
    """The ``code`` argument of a JSON call of ``tool_name``, in the shapes models write:
    ``{"name": ..., "arguments": {...}}`` (arguments possibly a JSON string),
    ``{"function": {"name": ..., "arguments": ...}}``, or a list of such calls (the first)."""
    if isinstance(data, list):
        codes = [c for c in (_call_code(item, tool_name) for item in data) if c is not None]
        return "\n\n".join(codes) if codes else None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("function"), dict):
        return _call_code(data["function"], tool_name)
    name = data.get("name") or data.get("tool") or data.get("tool_name")
    if name is not None and name != tool_name:
        return None
    args: Any = next((data[k] for k in _ARGUMENT_KEYS if k in data), None)
    if isinstance(args, str):
        args = _loads(args)
    code = args.get("code") if isinstance(args, dict) else None
    if code is None and name is not None:
        code = data.get("code")
    return code if isinstance(code, str) and code.strip() else None


__all__ = ["PROTOCOLS", "Action", "ActiveProtocol", "FoundCode", "InvalidCall", "ProtocolName",
           "ProtocolState", "Reading", "Via", "bare_code", "cut_fence", "find_code", "is_code_only",
           "looks_like_a_call", "unfence_answers"]
