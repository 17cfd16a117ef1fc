"""The one place where prompt text is read and rendered.

Every sentence the model reads lives in ``agent/prompts/`` as package data: the system
prompt (``system.md``), the tool description (``tool.txt``), the note on kernel state
attached to each question (``context.md``) and the short messages of observations
(``messages.txt``, one ``name = text`` per line). Templates use ``string.Template``
(``$name``), so Python code with braces can appear in prompt text, and rendering is
strict: a missing value raises ``KeyError`` instead of reaching the model as ``$name``.
"""

from __future__ import annotations

import functools
import string
from importlib import resources
from typing import Any

_PACKAGE = "kernel_analyst"
_DIRECTORY = "agent/prompts"


@functools.cache
def template(name: str, /) -> str:
    """The text of the prompt file ``name`` (e.g. ``"system.md"``)."""
    return resources.files(_PACKAGE).joinpath(f"{_DIRECTORY}/{name}").read_text(encoding="utf-8")


def render(name: str, /, **values: Any) -> str:
    """Render the prompt file ``name`` with ``values``; every placeholder must be given."""
    return string.Template(template(name)).substitute(values)


@functools.lru_cache(maxsize=1)
def _messages() -> dict[str, str]:
    found: dict[str, str] = {}
    for number, line in enumerate(template("messages.txt").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, text = line.partition(" = ")
        if not sep:
            raise ValueError(f"messages.txt line {number}: expected `name = text`")
        found[key.strip()] = text
    return found


def message_names() -> list[str]:
    """Names of the short messages in ``messages.txt``, in file order."""
    return list(_messages())


def message(key: str, /, **values: Any) -> str:
    """Render the short message ``key`` from ``messages.txt``."""
    return string.Template(_messages()[key]).substitute(values)


def shortened(text: str, width: int = 120) -> str:
    """``text`` on one line (its spacing collapsed), cut at ``width`` characters, for a message."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def system_prompt(*, tool_name: str, max_steps: int, budget: int, send_images: bool,
                  protocol: str = "tools", undo: bool = False) -> str:
    """The analyst's system prompt, for the action protocol ``protocol`` (``tools``: the
    model calls the tool; ``code``: it writes ```python blocks, see agent/protocols.py;
    ``auto``: an undecided conversation, told to call the tool or, failing that, write a block).
    ``undo``: the model is offered the undo step (agent/tools/undo.py), and told when to use it."""
    figures = message("figures_shown" if send_images else "figures_hidden")
    if protocol == "code":
        how_to_run, how_to_answer = template("protocol_code.md").strip(), message("answer_code")
    elif protocol == "tools":
        how_to_run, how_to_answer = message("run_tools", tool_name=tool_name), message("answer_tools")
    elif protocol == "auto":  # the tool, or a python block for a model that cannot call it
        how_to_run = message("run_tools", tool_name=tool_name) + " " + message("run_auto")
        how_to_answer = message("answer_auto")
    else:
        raise ValueError(f"no system prompt for the protocol {protocol!r}; expected tools, code or auto")
    # What every question needs, and nothing else: the rare instructions (background runs,
    # no-replay, a kernel's death, memory) are told when they apply, in the step's output.
    undo_rule = ""
    if undo:
        # One line, not wrapped: the directive's text must reach the model whole.
        undo_rule = "- " + message(f"undo_rule_{protocol}") + "\n"
    return render("system.md", max_steps=max_steps, budget=f"{budget:,}", figures_note=figures,
                  how_to_run=how_to_run, how_to_answer=how_to_answer, undo_rule=undo_rule).strip()


def tool_description() -> str:
    """The description of the Python tool, as the model sees it."""
    return template("tool.txt").strip()


def kernel_context(*, files: str, variables: str) -> str:
    """The note on existing files and variables appended to a question."""
    return render("context.md", files=files, variables=variables).rstrip()
