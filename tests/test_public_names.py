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

AGENT_MODELS = ["ModelEnvironment", "ModelSpec", "install_hint", "load_chat_model", "LOCAL_SERVER_KEY"]
AGENT_TESTING = ["ModelCall", "ScriptedChatModel", "tool_call", "tool_calls"]
EDA = ["EdaError", "EdaReport", "ExcelPlan", "JsonPlan", "LoadPlan", "ParquetPlan", "Plan", "PlannedCell",
       "PlaybookOptions", "Progress", "ReaderMissingError", "STEPS", "StepResult", "TableShape",
       "UnreadableFileError", "detect", "notebook_html", "plan_cells", "run_playbook", "selected_steps",
       "summary_first", "summary_markdown", "write_html", "write_notebook"]
CLAIMS = ["AnswerCheck", "CellRef", "Claim", "ClaimStatus", "Derivation", "Grounding", "Ignored", "Mention",
          "MovedClaim", "Part", "Source", "SourceIndex", "cell_anchor", "cell_parts", "cite_markdown",
          "ground", "read_mentions", "recheck"]

# The modules of agent/ before it was regrouped into rooms (issue 33), each with the names it
# had then and the module that holds them now: the earlier path is that very module. (The
# loop's internal classes StepRunner, AnswerReview and ReviewSettings, and ending's helpers
# ground_partial and now, gave way to the judge; nothing outside the agent used them.)
A = "kernel_analyst.agent"
EARLIER_AGENT = {
    "background": ("tools.background", ["BackgroundSteps", "DEFAULT_WAIT_S", "Directive", "MAX_WAIT_S",
                                        "START_WAIT_S", "StepResult", "context_note", "find_directive"]),
    "checks": ("feedback.checks", ["Comparison", "ValueLookup", "comparison_notes", "comparisons",
                                   "empty_answer", "last_output_line", "never_matches_by_type",
                                   "result_notes"]),
    "context_window": ("loop.context_window", ["is_context_overflow", "is_observation", "observation_id",
                                               "trim_oldest_observation"]),
    "ending": ("loop.ending", ["finish", "partial_text", "record_answer"]),
    "figures": ("loop.figures", ["ImagesMode", "accepts_images", "figures_message", "images_enabled",
                                 "takes_images", "without_images"]),
    "form": ("feedback.form", ["AnswerForm"]),
    "handoff": ("briefing.handoff", ["describe", "hand_cells", "handoff_note", "variable_changes"]),
    "hints": ("feedback.hints", ["ErrorTeacher"]),
    "llamacpp": ("models.llamacpp", ["INSTALL_HINT", "LlamaCppChatModel", "load_llamacpp"]),
    "observation": ("tools.observation", ["Observation", "ObservationSettings", "SavedOutput", "elide",
                                          "format_error", "observe", "observe_step", "png_size",
                                          "resources_note", "scrub_frame_path", "store_saved_output",
                                          "trim_traceback"]),
    "review": ("feedback.answers", []),
    "steps": ("loop.acting", []),
    "tool": ("tools.kernel_tool", ["KernelTool", "KernelToolInput", "TOOL_NAME", "store_saved_output"]),
    "turn": ("loop.state", ["Conversation", "EventCallback", "Turn"]),
    "undo": ("tools.undo", ["DEFAULT_CHECKPOINTS", "UNDO_TOOL_NAME", "UndoTool", "UndoToolInput",
                            "enable_checkpoints", "find_undo", "undo_step"]),
    "uploads": ("briefing.uploads", ["TABLE_SUFFIXES", "UploadedTable", "frame_names", "is_table", "preload",
                                     "read_uploads", "tables_note"]),
}
EARLIER_AGENT_FACES = {  # earlier modules that are packages now, and modules that stayed
    "briefing": ["describe_files", "describe_variables", "question_markdown", "refresh_variables",
                 "track_variables"],
    "playbook": ["EdaReport", "PlannedCell", "PlaybookOptions", "Progress", "STEPS", "StepResult",
                 "UnreadableFileError", "plan_cells", "run_playbook"],
    "prompting": ["kernel_context", "message", "message_names", "render", "system_prompt", "template",
                  "tool_description"],
    "protocols": ["Action", "ActiveProtocol", "FoundCode", "InvalidCall", "PROTOCOLS", "ProtocolName",
                  "ProtocolState", "Reading", "Via", "bare_code", "cut_fence", "find_code", "is_code_only",
                  "looks_like_a_call", "unfence_answers"],
    "results": ["Answer", "Step", "Usage"],
    "events": ["AgentNote", "FinalAnswer", "ModelText", "StepCode", "StepFinished", "StepOutput",
               "StepStarted"],
    "analyst": ["Analyst", "AnalystSettings", "EventCallback", "ImagesMode", "MAX_IDLE_REPLIES"],
}

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
                                                ("kernel_analyst.agent", AGENT), ("kernel_analyst.eda", EDA),
                                                ("kernel_analyst.claims", CLAIMS)])
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


@pytest.mark.parametrize(("module", "names"), [(f"{A}.models", AGENT_MODELS),
                                                (f"{A}.testing", AGENT_TESTING)])
def test_the_agent_models_and_testing_names_still_import(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    assert not [name for name in names if getattr(imported, name, None) is None]


@pytest.mark.parametrize("old", sorted(EARLIER_AGENT))
def test_earlier_agent_module_paths_are_the_modules_that_hold_them_now(old: str) -> None:
    new, names = EARLIER_AGENT[old]
    earlier = importlib.import_module(f"{A}.{old}")
    assert earlier is importlib.import_module(f"{A}.{new}")
    namespace: dict[str, object] = {}
    for name in names:
        exec(f"from {A}.{old} import {name}", namespace)
        assert namespace[name] is getattr(earlier, name)


@pytest.mark.parametrize("module", sorted(EARLIER_AGENT_FACES))
def test_earlier_agent_names_still_import(module: str) -> None:
    imported = importlib.import_module(f"{A}.{module}")
    missing = [name for name in EARLIER_AGENT_FACES[module] if getattr(imported, name, None) is None]
    assert not missing, f"{A}.{module} lost {missing}"
    if module == "playbook":
        import kernel_analyst.eda as eda

        assert imported.run_playbook is eda.run_playbook
