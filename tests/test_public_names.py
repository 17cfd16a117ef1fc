"""The public contract does not move: every name importable from ``kernel_analyst``,
``kernel_analyst.kernels`` and ``kernel_analyst.agent`` before the kernels package was
regrouped (issue 27) still is, and so are the module paths the README and docs/ name.

The lists are frozen here on purpose: a name may be added to an ``__all__``, never
dropped from these.
"""

from __future__ import annotations

import importlib

import pytest

TOP = ["Analyst", "Answer", "Execution", "KernelSession", "KernelTool", "Limits", "SessionManager"]

KERNELS = [
    "ConversationInfo", "DiskQuotaError", "EndCause", "Execution", "ExecutionError", "FileInfo",
    "FileTooLargeError", "GatewayError", "GatewayUserError", "KernelAnalystError", "KernelBackend",
    "KernelCrashLoopError", "KernelEnding", "KernelEnvironment", "KernelSession", "KernelStartError",
    "Limits",
    "LocalBackend", "NotebookFormatError", "RecoveryPolicy", "RecoveryReport", "Run", "RunNotFoundError",
    "RunStatus", "RunningKernel", "SandboxUnavailableError", "SessionBusyError", "SessionClosedError",
    "SessionManager", "UnsafeFileNameError", "VariableChanges", "VariableFetchError", "VariableInfo",
]

AGENT = [
    "AgentError", "AgentEvent", "Analyst", "AnalystSettings", "Answer", "EdaReport", "EventCallback",
    "FinalAnswer", "ImagesMode", "KernelTool", "KernelToolError", "KernelToolInput", "MissingAPIKeyError",
    "ModelConfigError", "ModelEnvironment", "ModelSpec", "ModelText", "Observation", "ObservationSettings",
    "PlaybookOptions", "ProviderNotInstalledError", "SavedOutput", "ScriptError", "Step", "StepCode",
    "StepFinished", "StepOutput", "StepStarted", "StopReason", "TOOL_NAME", "ToolCallingUnsupportedError",
    "Usage", "load_chat_model", "observe", "observe_step", "run_playbook",
]

# Module paths named in README.md and docs/, and the names they are used for there;
# and modules whose names the front ends and tests have always imported from them.
DOCUMENTED = {
    "kernel_analyst.kernels.sync": ["SyncSessionManager", "SyncKernelSession"],
    "kernel_analyst.kernels.testing": ["FakeKernel", "FakeBackend", "cpu_burners"],
    "kernel_analyst.kernels.backends.gateway": ["GatewayBackend", "GatewayKernel"],
    "kernel_analyst.kernels.backends": ["Channel", "GatewayBackend", "GatewayKernel", "KernelBackend",
                                        "KernelEnvironment", "KernelFiles", "KernelRequest", "LocalBackend",
                                        "LocalKernel", "RunningKernel"],
    "kernel_analyst.kernels.verify": ["PIXEL_FRACTION", "PIXEL_TOLERANCE", "CellCheck", "InputCheck",
                                      "NotebookFormatError", "VerifyReport", "check_inputs", "compare_cell",
                                      "compare_images", "compare_outputs", "normalise", "read_notebook",
                                      "recorded_status", "verify_notebook"],
    "kernel_analyst.kernels.execution": ["Execution", "ExecutionError", "OutputCollector", "VariableChanges",
                                         "VariableInfo", "strip_ansi", "output_from_msg"],
    "kernel_analyst.kernels.exceptions": ["KernelAnalystError", "CheckpointError", "RunNotFoundError"],
    "kernel_analyst.kernels.files": ["FileInfo", "safe_name", "store", "read", "listing", "disk_usage"],
    "kernel_analyst.kernels.limits": ["Limits", "ISOLATION_LEVELS"],
    "kernel_analyst.kernels.endings": ["EndCause", "KernelEnding"],
    "kernel_analyst.kernels.recovery": ["RecoveryPolicy", "RecoveryReport"],
    "kernel_analyst.kernels.conversation": ["KeepReport", "DiscardReport", "FileMerge", "parent_of"],
    "kernel_analyst.server.mcp_client": ["TasksClient", "TaskHandle", "TaskState", "get_task", "wait_task",
                                         "cancel_task"],
}


@pytest.mark.parametrize(("module", "names"), [("kernel_analyst", TOP), ("kernel_analyst.kernels", KERNELS),
                                                ("kernel_analyst.agent", AGENT)])
def test_every_public_name_still_imports(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in names if getattr(imported, name, None) is None]
    assert not missing, f"{module} lost {missing}"
    dropped = sorted(set(names) - set(imported.__all__))
    assert not dropped, f"{module}.__all__ dropped {dropped}"
    for name in names:  # ``from module import name`` as a user writes it
        namespace: dict[str, object] = {}
        exec(f"from {module} import {name}", namespace)
        assert namespace[name] is getattr(imported, name)


@pytest.mark.parametrize(("module", "names"), sorted(DOCUMENTED.items()))
def test_documented_module_paths_still_import(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"


def test_earlier_paths_are_the_same_objects() -> None:
    from kernel_analyst import kernels
    from kernel_analyst.kernels import backends
    from kernel_analyst.kernels.backends import gateway

    assert backends.LocalBackend is kernels.LocalBackend and backends.KernelBackend is kernels.KernelBackend
    assert gateway.GatewayBackend is kernels.launch.GatewayBackend
