"""The front ends' settings: one set of defaults for the CLI, ``serve`` and MCP.

Kernel settings say how sessions run (isolation, time limit, memory, where their files
go, a remote gateway); model settings say which chat model answers and how (step limit,
whether figures are sent as images). Both are small frozen dataclasses built from
parsed flags (:mod:`.flags`) or by hand, and :meth:`KernelSettings.limits` is the one
place that turns them into :class:`~kernel_analyst.kernels.Limits`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..kernels import Limits
from ..kernels.limits import CPU_POLICIES, ISOLATION_LEVELS

if TYPE_CHECKING:  # the agent package loads LangChain; flags and settings stay light
    from ..agent import ImagesMode

IMAGES_MODES: tuple[ImagesMode, ...] = ("auto", "on", "off")
"""Values of ``--images``: ``auto`` sends figures when the model's LangChain profile says it
takes image input, ``on`` unless the profile says it does not, ``off`` never."""

PROTOCOL_NAMES: tuple[str, ...] = ("auto", "tools", "code")
"""Values of ``--protocol`` (kernel_analyst.agent.protocols.PROTOCOLS, kept here so the
flags load without LangChain; a test keeps the two equal)."""

RecoveryMode = Literal["replay", "none"]
"""Values of ``--recovery``: see :class:`~kernel_analyst.kernels.recovery.RecoveryPolicy`."""
RECOVERY_MODES: tuple[RecoveryMode, ...] = ("replay", "none")

DEFAULT_MAX_STEPS = 15
"""Agent code steps per question, for every front end (the library's ``Analyst`` default)."""

DEFAULT_MAX_TOKENS = 1024
"""Tokens one model reply may have, for every front end (the library's ``Analyst`` default)."""

DEFAULT_ATTEMPTS_TIME_SHARE = 0.5
"""The share of the latest questions' seconds that attempts made because an answer is in
doubt may add, for every front end (the library's ``Analyst`` default)."""

DEFAULT_MODEL_TIMEOUT_S = 300.0
"""Seconds a model call may wait for the reply's next piece, for every front end (the
library's ``Analyst`` default)."""

DEFAULT_QUESTION_TIMEOUT_S = 1800.0
"""Seconds one question's answer may take, for every front end (the library's ``Analyst``
default; a test keeps the two equal)."""

DEFAULT_TIMEOUT_S: float | None = Limits.timeout_s
"""Seconds a cell may run, for every front end (the library's ``Limits.timeout_s``)."""

DEFAULT_MAX_UPLOAD_MB: int = Limits.max_upload_mb
"""The largest file an upload (``eda``, ``ask``, ``chat`` and the service alike) accepts, in
MiB (the library's ``Limits.max_upload_mb``; ``--max-upload-mb`` changes it)."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What an environment variable's name may be (``--gateway-env``)."""


def package_version() -> str:
    """The installed version of kernel-analyst (``--version``, the service's info)."""
    try:
        return metadata.version("kernel-analyst")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


@dataclass(frozen=True)
class KernelSettings:
    """How a front end's kernels run; a field left at None keeps the base ``Limits``."""

    isolation: str | None = None
    """``none``, ``process``, ``sandbox`` or ``auto``; None keeps the base."""
    timeout_s: float | None = None
    """Seconds per cell; None keeps the base (:data:`DEFAULT_TIMEOUT_S` by default)."""
    interrupt_grace_s: float | None = None
    """Seconds an interrupted cell (a timeout, a cancel) may take to stop before its kernel
    is restarted (``--interrupt-grace``); None keeps the base (``Limits.interrupt_grace_s``)."""
    memory_mb: int | None = None
    """Kernel memory limit in MiB; None keeps the base."""
    cpus: float | None = None
    """``Limits.cpus``: each kernel's CPU share in cores (``--cpus``); 0 is no share; None
    keeps the base."""
    cpu_policy: str | None = None
    """``Limits.cpu_policy`` (``--cpu-policy``): quota, weight or burst; None keeps the base."""
    tenant_cpus: float | None = None
    """``Limits.tenant_cpus``: the CPU of one tenant's kernels together (``--tenant-cpus``);
    0 is no budget; None keeps the base."""
    max_upload_mb: int | None = None
    """The largest file an upload accepts, in MiB (``--max-upload-mb``); None keeps the base
    (:data:`DEFAULT_MAX_UPLOAD_MB` by default). Raising it raises the session's disk
    quota and file-size limit with it, so a file that may be uploaded also fits."""
    network: bool | tuple[str, ...] | None = None
    """``Limits.network``: True (all), False (none), host names (an allowlist, sandbox
    only); None keeps the base."""
    session_dir: Path | None = None
    """Where session files go; None lets the front end choose (a temporary directory)."""
    gateway_url: str | None = None
    """Run kernels on this Jupyter (Enterprise) Gateway; None runs them here."""
    gateway_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Variables sent with every gateway kernel start (``--gateway-env KEY=VALUE``): the
    gateways pass ``KERNEL_*`` names on to the kernel (Enterprise Gateway reads e.g.
    ``KERNEL_NAMESPACE``, and ``KERNEL_USERNAME`` as the user of every kernel)."""
    gateway_users: Mapping[str, str] = field(default_factory=dict, hash=False)
    """The gateway user (``KERNEL_USERNAME``) of each tenant whose user is not its own
    name (``--gateway-user TENANT=USER``); see ``GatewayBackend.username_for``."""

    def __post_init__(self) -> None:
        if self.isolation is not None and self.isolation not in ISOLATION_LEVELS:
            choices = ", ".join(ISOLATION_LEVELS)
            raise ValueError(f"isolation must be one of {choices}; got {self.isolation!r}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"the timeout must be positive; got {self.timeout_s:g}")
        if self.interrupt_grace_s is not None and self.interrupt_grace_s <= 0:
            raise ValueError(f"the interrupt grace must be positive; got {self.interrupt_grace_s:g}")
        if self.memory_mb is not None and self.memory_mb < 64:
            raise ValueError(f"the memory limit must be at least 64 MiB; got {self.memory_mb}")
        for name in ("cpus", "tenant_cpus"):
            value = getattr(self, name)
            if value is not None and value != 0 and not 0.01 <= value <= 1024:
                raise ValueError(f"{name} must be 0 (none) or between 0.01 and 1024 cores; got {value}")
        if self.cpu_policy is not None and self.cpu_policy not in CPU_POLICIES:
            raise ValueError(f"cpu_policy must be one of {', '.join(CPU_POLICIES)}; got {self.cpu_policy!r}")
        if self.max_upload_mb is not None and self.max_upload_mb < 1:
            raise ValueError(f"the upload limit must be at least 1 MiB; got {self.max_upload_mb}")
        for key in self.gateway_env:
            if not ENV_NAME.fullmatch(key):
                raise ValueError(f"--gateway-env wants KEY=VALUE with a variable name as KEY; got {key!r}")
        for tenant, user in self.gateway_users.items():
            if not tenant or not user:
                raise ValueError(f"--gateway-user wants TENANT=USER, both non-empty; got {tenant!r}={user!r}")

    def limits(self, base: Limits | None = None, **extra: Any) -> Limits:
        """The one ``Limits`` builder: ``base`` (default ``Limits()``) with these settings
        and ``extra`` fields applied."""
        changes: dict[str, Any] = {}
        if self.isolation is not None:
            changes["isolation"] = self.isolation
        if self.timeout_s is not None:
            changes["timeout_s"] = self.timeout_s
        if self.interrupt_grace_s is not None:
            changes["interrupt_grace_s"] = self.interrupt_grace_s
        if self.memory_mb is not None:
            changes["memory_mb"] = self.memory_mb
        if self.network is not None:
            changes["network"] = self.network
        for name in ("cpus", "tenant_cpus"):
            if getattr(self, name) is not None:
                changes[name] = getattr(self, name) or None  # 0: none
        if self.cpu_policy is not None:
            changes["cpu_policy"] = self.cpu_policy
        limits = base or Limits()
        if self.max_upload_mb is not None:
            changes.update(upload_limits(limits, self.max_upload_mb))
        changes.update(extra)
        return limits.with_(**changes) if changes else limits

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        data = asdict(self)
        data["session_dir"] = str(self.session_dir) if self.session_dir is not None else None
        data["gateway_env"] = dict(self.gateway_env)
        data["gateway_users"] = dict(self.gateway_users)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelSettings:
        """The inverse of :meth:`to_dict` (unknown keys ignored)."""
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        if known.get("session_dir") is not None:
            known["session_dir"] = Path(known["session_dir"])
        if isinstance(known.get("network"), list):
            known["network"] = tuple(known["network"])
        return cls(**known)


def upload_limits(base: Limits, max_upload_mb: int) -> dict[str, Any]:
    """The ``Limits`` fields that let a file of ``max_upload_mb`` MiB be uploaded and used:
    the upload limit itself, a disk quota with room for the file and as much again (what
    is derived from it: an out-of-core engine's spill, a converted copy), and a file-size
    limit at least as large (a kernel may write what it may be given)."""
    changes: dict[str, Any] = {"max_upload_mb": max_upload_mb}
    if base.max_disk_mb is not None and base.max_disk_mb < 2 * max_upload_mb:
        changes["max_disk_mb"] = 2 * max_upload_mb
    if base.max_file_size_mb is not None and base.max_file_size_mb < max_upload_mb:
        changes["max_file_size_mb"] = max_upload_mb
    return changes


@dataclass(frozen=True)
class ModelSettings:
    """Which chat model answers questions, and how."""

    spec: str | None = None
    """``provider:model`` (``openai:gpt-4o-mini``); None: no model (code and EDA only)."""
    base_url: str | None = None
    """An OpenAI-compatible server to send requests to (vLLM, llama.cpp, Ollama)."""
    max_steps: int = DEFAULT_MAX_STEPS
    """Code steps the agent may take per question."""
    images: ImagesMode = "auto"
    """Send figures to the model as images: see :data:`IMAGES_MODES`."""
    protocol: str = "auto"
    """How the model runs code: see :data:`PROTOCOL_NAMES`."""
    preload: bool = True
    """Load each uploaded table into a DataFrame before the model's first step (the EDA
    loader's code, a recorded cell) and show the model its profile; False: show the loader's
    code for the model to run (``--preload off``)."""
    attempts: int = 1
    """Attempts at every question, in forked branches whose answers must agree
    (``--attempts``); a question whose first answer is in doubt is tried again either way."""
    attempts_time_share: float | None = DEFAULT_ATTEMPTS_TIME_SHARE
    """The share of the latest questions' seconds that attempts made because an answer is
    in doubt may add (``--attempts-time-share``; None: no bound)."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Tokens one model reply may have (``--max-tokens``)."""
    model_timeout_s: float = DEFAULT_MODEL_TIMEOUT_S
    """Seconds a model call may wait for the reply's next piece (``--model-timeout``)."""
    question_timeout_s: float | None = DEFAULT_QUESTION_TIMEOUT_S
    """Seconds one question's answer may take before it ends with what the cells show
    (``--question-timeout``; None: no bound)."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """More keywords for the model class (``temperature=0``, ``timeout=30`` ...)."""

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max steps must be at least 1; got {self.max_steps}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1; got {self.attempts}")
        if self.attempts_time_share is not None and not self.attempts_time_share >= 0:
            raise ValueError("the attempts' time share must be 0 or more, or None; "
                             f"got {self.attempts_time_share}")
        if self.max_tokens < 16:
            raise ValueError(f"max tokens must be at least 16; got {self.max_tokens}")
        if self.model_timeout_s <= 0:
            raise ValueError(f"the model timeout must be positive; got {self.model_timeout_s:g}")
        if self.question_timeout_s is not None and not self.question_timeout_s > 0:
            raise ValueError("the question timeout must be positive, or None; "
                             f"got {self.question_timeout_s:g}")
        if self.images not in IMAGES_MODES:
            raise ValueError(f"images must be one of {', '.join(IMAGES_MODES)}; got {self.images!r}")
        if self.protocol not in PROTOCOL_NAMES:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOL_NAMES)}; got {self.protocol!r}")

    def with_(self, **changes: Any) -> ModelSettings:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``extra`` as given; keep it JSON-able to round-trip)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSettings:
        """The inverse of :meth:`to_dict` (unknown keys ignored)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


__all__ = ["DEFAULT_ATTEMPTS_TIME_SHARE", "DEFAULT_MAX_STEPS", "DEFAULT_MAX_TOKENS", "DEFAULT_MAX_UPLOAD_MB",
           "DEFAULT_MODEL_TIMEOUT_S", "DEFAULT_QUESTION_TIMEOUT_S", "DEFAULT_TIMEOUT_S", "ENV_NAME",
           "IMAGES_MODES", "PROTOCOL_NAMES",
           "RECOVERY_MODES", "KernelSettings", "ModelSettings", "RecoveryMode", "package_version",
           "upload_limits"]
