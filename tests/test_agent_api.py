"""Public names stay importable; package data ships with the package."""

from __future__ import annotations

import importlib

import kernel_analyst
import kernel_analyst.agent
import kernel_analyst.eda


def test_top_level_contract() -> None:
    for name in ("SessionManager", "KernelSession", "Execution", "Limits", "Analyst", "KernelTool", "Answer"):
        assert name in kernel_analyst.__all__ and getattr(kernel_analyst, name) is not None
    assert kernel_analyst.Analyst is kernel_analyst.agent.Analyst


def test_every_agent_name_in_all_exists() -> None:
    for module in (kernel_analyst, kernel_analyst.agent, kernel_analyst.eda):
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"{module.__name__}.__all__ names missing objects: {missing}"
        assert sorted(module.__all__) == sorted(set(module.__all__))


def test_playbook_names_of_earlier_versions_still_import() -> None:
    old = importlib.import_module("kernel_analyst.agent.playbook")
    assert old.run_playbook is kernel_analyst.eda.run_playbook
    assert kernel_analyst.agent.PlaybookOptions is kernel_analyst.eda.PlaybookOptions


def test_testing_helpers_import() -> None:
    testing = importlib.import_module("kernel_analyst.agent.testing")
    assert testing.ScriptedChatModel(script=["hi"]).invoke("hello").content == "hi"


def test_prompts_are_package_data() -> None:
    from importlib import resources

    prompts = resources.files("kernel_analyst").joinpath("agent/prompts")
    names = {p.name for p in prompts.iterdir()}
    assert {"system.md", "tool.txt", "context.md", "messages.txt"} <= names
