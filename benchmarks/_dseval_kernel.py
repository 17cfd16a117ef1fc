"""The part of ``benchmarks/dseval.py`` that runs inside the agent's kernel.

``dseval.py`` copies this file and DSEval's toolkit into the hidden folder ``.dseval`` of
the conversation's working directory and calls :func:`begin` before each question and
:func:`grade` (or :func:`release`) after it, through unrecorded execute requests: no
notebook cell, no history, no user variable (this module lives in ``sys.modules`` only).
Grading here rather than in the harness means the agent's objects never leave its kernel:
the authors' validators see them as they are (models, functions, frames with their dtypes),
the namespace diff sees real object identities, and whatever of the agent's code a validator
calls (a model's ``predict``, a function under test) runs where the agent's code runs. Only
the reference, computed in the harness, comes in: pickled, after the agent has answered.

What DSEval decides is DSEval's code: ``Environment.namespace_copy`` and ``namespace_diff``
(simulation.py), ``_Forbidden``, the validator the harness built with ``SubProblem``
(problem.py) and ``validator_comments_to_verdict`` (validator.py).
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import pickle
import sys
import types
from typing import Any

_STATE: dict[str, Any] = {}
"""The question in progress: the namespace copy and ids taken before it, and the
variables hidden from it (``execution.forbid_names``)."""

_TEXT = 4000
"""Characters kept of each text in the verdict (tracebacks, frame diffs)."""


def _toolkit(root: str) -> tuple[Any, Any]:
    """DSEval's simulation and validator modules, from ``root/toolkit/dseval`` (the
    package's ``__init__`` is skipped: it imports the authors' agent, which is not shipped)."""
    if "dseval" not in sys.modules:
        package = types.ModuleType("dseval")
        package.__path__ = [os.path.join(root, "toolkit", "dseval")]
        sys.modules["dseval"] = package
    return importlib.import_module("dseval.simulation"), importlib.import_module("dseval.validator")


def _user_namespace(shell: Any) -> dict[str, Any]:
    """The user's variables as DSEval's Environment holds them (modules included), without
    IPython's own names (``In``, ``Out``, ``_1``, ``get_ipython`` ...) or the product's
    hidden helper."""
    hidden = shell.user_ns_hidden
    return {name: value for name, value in shell.user_ns.items()
            if not name.startswith("_") and not (name in hidden and hidden[name] is value)}


def begin(shell: Any, root: str, forbid: list[str]) -> None:
    """Before a question, as ``Environment.execute`` does before a cell: copy the namespace
    and remember each object's id (for the diff), then hide the forbidden variables."""
    simulation, _ = _toolkit(root)
    environment = simulation.Environment()
    environment.namespace = _user_namespace(shell)
    _STATE.clear()
    _STATE["previous"] = environment.namespace_copy()
    _STATE["ids"] = {name: id(value) for name, value in environment.namespace.items()}
    _STATE["forbidden"] = {}
    for name in forbid:
        if name in shell.user_ns:
            _STATE["forbidden"][name] = shell.user_ns[name]
            shell.user_ns[name] = simulation._Forbidden()


def release(shell: Any, root: str) -> None:
    """After a question that is not graded: put the forbidden variables back."""
    for name, value in _STATE.get("forbidden", {}).items():
        shell.user_ns[name] = value
    _STATE.clear()


def _diff(simulation: Any, namespace: dict[str, Any],
          reference_names: set[str]) -> tuple[dict[str, str], str]:
    """DSEval's namespace diff of the question as the authors' harness would see it: there
    the agent starts each question from a fork of the reference namespace, so a name the
    reference did not have could only be added (the agent's own helpers, kept from its
    earlier questions, are never "updated" or "deleted" there)."""
    if "previous" not in _STATE:
        return {}, "the namespace before the question was lost (a new kernel): no diff"
    diff = simulation.Environment().namespace_diff(namespace, _STATE["previous"], _STATE["ids"])
    as_in_fork = {}
    for name, kind in diff.items():
        if name in reference_names:
            as_in_fork[name] = kind
        elif kind != "deleted":
            as_in_fork[name] = "added"
    return as_in_fork, ""


def _result(shell: Any, count: int | None) -> Any:
    """The value of the graded cell's last expression (IPython's ``Out[count]``), copied so
    that a validator cannot change the agent's objects."""
    if count is None:
        return None
    value = shell.history_manager.output_hist.get(count)
    try:
        return copy.deepcopy(value)
    except Exception:
        return value


def _reference(frozen: dict[str, Any]) -> dict[str, Any]:
    """The reference cell's output with its namespace unpickled (a value that does not
    unpickle here is left out: a validator that needs it says the reference lacks it)."""
    reference = dict(frozen["reference"])
    namespace = {}
    for name, blob in frozen["namespace"].items():
        try:
            namespace[name] = pickle.loads(blob)
        except Exception:
            continue
    reference["namespace_snapshot"] = namespace
    return reference


def _clip(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= _TEXT else value[:_TEXT] + " [...]"
    if isinstance(value, dict):
        return {str(k): _clip(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip(v) for v in value]
    return value if isinstance(value, (int, float, bool)) or value is None else str(value)


def grade(shell: Any, root: str, payload_path: str, verdict_path: str) -> None:
    """After the question: put the forbidden variables back, take the submission the way
    ``Environment.execute`` records a cell, run the question's validator against the
    reference and write the verdict as JSON to ``verdict_path``."""
    simulation, validator = _toolkit(root)
    with open(payload_path, "rb") as f:
        payload = pickle.load(f)
    os.remove(payload_path)
    frozen = pickle.loads(payload["frozen"])
    for name, value in _STATE.get("forbidden", {}).items():
        shell.user_ns[name] = value
    namespace = _user_namespace(shell)
    diff, note = _diff(simulation, namespace, set(frozen["names_before"]))
    _STATE.clear()
    environment = simulation.Environment()
    environment.namespace = namespace
    cell = payload["cell"]
    submission = {
        "source_code": cell["source_code"],
        "stream_output": cell["stream_output"],
        "execute_time": cell["execute_time"],
        "execute_result": _result(shell, cell["count"]),
        "error": cell["error"],
        "namespace_snapshot": environment.namespace_copy(),
        "namespace_diff": diff,
    }
    comments = frozen["validator"].validate(_reference(frozen), submission)
    verdict, subverdict, extended = validator.validator_comments_to_verdict(comments)
    found = {"correct": comments["correct"], "verdict": verdict.value, "subverdict": subverdict.value,
             "reason": _clip(str(extended)), "note": note, "diff": diff, "validation": _clip(comments)}
    with open(verdict_path, "w", encoding="utf-8") as f:
        json.dump(found, f)
