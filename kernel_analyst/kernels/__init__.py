"""Live kernels: sessions, executions, the audit trail. Knows nothing about LLMs."""

from .backends import KernelBackend, KernelEnvironment, LocalBackend, RunningKernel
from .exceptions import (
    DiskQuotaError,
    FileTooLargeError,
    GatewayError,
    GatewayUserError,
    KernelAnalystError,
    KernelCrashLoopError,
    KernelStartError,
    NotebookFormatError,
    SandboxUnavailableError,
    SessionClosedError,
    UnsafeFileNameError,
    VariableFetchError,
)
from .execution import Execution, ExecutionError, VariableChanges, VariableInfo
from .files import FileInfo
from .limits import Limits
from .manager import ConversationInfo, SessionManager
from .recovery import RecoveryPolicy, RecoveryReport
from .session import KernelSession

__all__ = [
    "ConversationInfo",
    "DiskQuotaError",
    "Execution",
    "ExecutionError",
    "FileInfo",
    "FileTooLargeError",
    "GatewayError",
    "GatewayUserError",
    "KernelAnalystError",
    "KernelBackend",
    "KernelCrashLoopError",
    "KernelEnvironment",
    "KernelSession",
    "KernelStartError",
    "Limits",
    "LocalBackend",
    "NotebookFormatError",
    "RecoveryPolicy",
    "RecoveryReport",
    "RunningKernel",
    "SandboxUnavailableError",
    "SessionClosedError",
    "SessionManager",
    "UnsafeFileNameError",
    "VariableChanges",
    "VariableFetchError",
    "VariableInfo",
]
