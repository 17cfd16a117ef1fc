"""Configuration of the HTTP service and the MCP server: typed, with one place that reads
the environment (:func:`environment_overrides`)."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..frontend.settings import (
    DEFAULT_ATTEMPTS_TIME_SHARE,
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL_TIMEOUT_S,
    DEFAULT_QUESTION_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    RECOVERY_MODES,
    KernelSettings,
    ModelSettings,
    RecoveryMode,
)
from ..kernels import Limits

if TYPE_CHECKING:
    from ..agent import ImagesMode

DEFAULT_TENANT = "default"
SERVICE_CPUS = 1.0
"""Each kernel's CPU share in the service, in cores, unless ``--cpus`` says otherwise: one
tenant's busy cell cannot take every core from the others, the service and the page
(``Limits.cpus``; ``docs/security.md`` has the figures)."""
TOKEN_ENV = "KERNEL_ANALYST_TOKEN"
TOKENS_FILE_ENV = "KERNEL_ANALYST_TOKENS_FILE"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenTable:
    """Bearer tokens and the tenant each one belongs to.

    Only sha256 digests are kept, and ``repr`` shows counts, so a token can never end up
    in a log line or a traceback through this object.
    """

    def __init__(self, tokens: Mapping[str, str] | None = None) -> None:
        self._tenants: dict[bytes, str] = {}
        for token, tenant in (tokens or {}).items():
            self.add(token, tenant)

    def add(self, token: str, tenant: str) -> None:
        """Accept ``token`` for ``tenant`` (tokens must be at least 16 characters)."""
        if len(token) < 16:
            raise ValueError(f"tokens must be at least 16 characters (tenant {tenant!r})")
        if not tenant or not tenant.isprintable():
            raise ValueError("a tenant name must be non-empty printable text")
        self._tenants[_digest(token)] = tenant

    def tenant(self, token: str) -> str | None:
        """The tenant of ``token``, or None. The lookup is by sha256 digest, so its timing
        says nothing useful about the token."""
        return self._tenants.get(_digest(token))

    def __len__(self) -> int:
        return len(self._tenants)

    def __bool__(self) -> bool:
        return bool(self._tenants)

    def __repr__(self) -> str:
        return f"TokenTable({len(self._tenants)} tokens, {len(set(self._tenants.values()))} tenants)"

    @classmethod
    def generated(cls, tenant: str = DEFAULT_TENANT) -> tuple[TokenTable, str]:
        """A table with one fresh random token; returns the table and the token (to print once)."""
        token = secrets.token_urlsafe(32)
        return cls({token: tenant}), token


def read_tokens_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse a tokens file: one ``TENANT TOKEN`` pair per line; ``#`` starts a comment."""
    tokens: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected 'TENANT TOKEN'")
        tenant, token = parts
        tokens[token] = tenant
    return tokens


@dataclass
class ServerConfig:
    """Everything the service needs; every field has a sensible default."""

    root_dir: Path = field(default_factory=lambda: Path("kernel-analyst-sessions"))
    """Where session directories (working files and audit notebooks) live."""
    host: str = "127.0.0.1"
    """Interface to listen on."""
    port: int = 8000
    """TCP port to listen on (0 picks a free one)."""
    tokens: TokenTable = field(default_factory=TokenTable)
    """Accepted bearer tokens and their tenants; empty means generate one at start."""
    auth: bool = True
    """Require a bearer token (turn off only on a trusted single-user machine)."""
    limits: Limits = field(default_factory=lambda: Limits(cpus=SERVICE_CPUS))
    """Kernel limits (isolation, memory, CPU share ...) for every session; ``tenant_cpus``
    bounds each tenant's kernels together."""
    max_sessions: int = 20
    """Live sessions (a kernel each) allowed in total; more get 429 with Retry-After.
    Dormant conversations do not count."""
    max_sessions_per_tenant: int = 5
    """Live sessions allowed per tenant (waking a dormant one counts as starting one)."""
    max_stored_per_tenant: int = 100
    """Conversations a tenant keeps, live and dormant; a new session beyond it gets 429
    (``DELETE`` one to make room)."""
    max_stored_mb_per_tenant: float | None = 5120.0
    """Disk a tenant's conversations may take, in MB (each measured when it last went
    dormant); a new session beyond it gets 429. None: no limit."""
    max_body_bytes: int = 2 * 1024 * 1024
    """Largest request body, uploads excepted."""
    max_upload_bytes: int = Limits.max_upload_mb * 1024 * 1024
    """Largest uploaded file (``--max-upload-mb``; the kernels' ``Limits.max_upload_mb``)."""
    default_timeout_s: float = DEFAULT_TIMEOUT_S or 120.0
    """Execution timeout when a request gives none (the front ends' one default)."""
    max_timeout_s: float = 300.0
    """The ceiling a request's timeout may not exceed."""
    max_background_timeout_s: float = 86_400.0
    """How long a background run (``POST /sessions/{id}/runs``, MCP ``execute`` with
    ``background``) may last, and its default: 24 hours."""
    idle_timeout_s: float | None = 1800.0
    """Sessions idle this long go dormant: the kernel stops (its namespace snapshotted),
    the conversation stays, and its next use wakes it. None: never."""
    pool_size: int = 1
    """Kernels kept started in advance, so a new session answers at once."""
    retry_after_s: int = 30
    """Retry-After sent with a 429 when no better estimate exists."""
    closed_kept: int = 1000
    """Unused since sessions go dormant instead of closing: dormant conversations are
    kept until deleted, within :attr:`max_stored_per_tenant`."""
    model: str | None = None
    """``provider:model`` for ``ask``; None disables it (409)."""
    base_url: str | None = None
    """OpenAI-compatible base URL for the model."""
    max_steps: int = DEFAULT_MAX_STEPS
    """Agent step limit per question (the front ends' one default)."""
    images: ImagesMode = "auto"
    """Send figures to the model as images: ``auto``, ``on`` or ``off`` (``--images``).
    MCP's ``execute`` has no model of its own: there ``auto`` means on, and the host decides."""
    mcp_inline_image_bytes: int = 32 * 1024
    """MCP ``execute``: every figure comes back as a link to its resource; beside the links,
    downscaled copies (at most 480 px a side) go inline while together they stay under
    this many bytes (``--inline-image-kb``; 0: links only, for hosts that read resources)."""
    mcp_task_after_s: float = 1.0
    """MCP clients that speak the Tasks extension: an ``execute``, ``eda`` or ``ask`` call
    still running after this many seconds answers with a task and goes on."""
    protocol: str = "auto"
    """How the model runs code: ``auto``, ``tools`` or ``code`` (``--protocol``; see
    :mod:`kernel_analyst.agent.protocols`)."""
    preload: bool = True
    """Load each uploaded table into a DataFrame before the model's first step (``--preload``)."""
    attempts: int = 1
    """Attempts at every question, in forked branches that must agree (``--attempts``)."""
    attempts_time_share: float | None = DEFAULT_ATTEMPTS_TIME_SHARE
    """The share of the latest questions' seconds that attempts on doubt may add
    (``--attempts-time-share``; None: no bound)."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Tokens one model reply may have (``--max-tokens``)."""
    model_timeout_s: float = DEFAULT_MODEL_TIMEOUT_S
    """Seconds a model call may wait for the reply's next piece (``--model-timeout``)."""
    question_timeout_s: float | None = DEFAULT_QUESTION_TIMEOUT_S
    """Seconds one question's answer may take (``--question-timeout``; None: no bound)."""
    gateway_url: str | None = None
    """Run kernels on this Jupyter Kernel/Enterprise Gateway (token from
    ``KERNEL_ANALYST_GATEWAY_TOKEN``); None: local kernels, unless
    ``KERNEL_ANALYST_GATEWAY_URL`` is set."""
    gateway_env: dict[str, str] = field(default_factory=dict)
    """Variables sent with every gateway kernel start (``--gateway-env``)."""
    gateway_users: dict[str, str] = field(default_factory=dict)
    """Each tenant's gateway user where it is not the tenant's name (``--gateway-user``);
    every gateway kernel starts as its tenant's user (``KERNEL_USERNAME``)."""
    database_url: str | None = None
    """Where session records are kept (``--database``): None is SQLite in ``root_dir``
    (one API process); a ``postgresql://`` URL lets several replicas share them."""
    recovery: RecoveryMode = "replay"
    """``replay``: a session whose kernel is gone (a restart, a crash, a kernel death) gets
    its variables back at its next use, from a snapshot or by replaying its cells;
    ``none``: it goes on in an empty kernel (``--recovery``)."""
    replica_lease_s: float = 60.0
    """A replica unheard of this long is taken for dead: its idle sessions may be closed
    by the others. Heartbeats come at least four times per lease."""
    housekeeping_interval_s: float | None = None
    """Seconds between housekeeping passes (heartbeats, last-use times, owners, culling);
    None: a quarter of the lease or of the idle timeout, at most 30 s. Tests that drive
    :meth:`SessionService.housekeep` themselves set it long."""

    @property
    def kernel_settings(self) -> KernelSettings:
        """Where kernels run, as the front ends' :class:`KernelSettings` (the gateway fields)."""
        return KernelSettings(gateway_url=self.gateway_url, gateway_env=self.gateway_env,
                              gateway_users=self.gateway_users)

    @property
    def model_settings(self) -> ModelSettings:
        """The model fields as the front ends' :class:`ModelSettings`."""
        return ModelSettings(spec=self.model, base_url=self.base_url, max_steps=self.max_steps,
                             images=self.images, protocol=self.protocol, preload=self.preload,
                             attempts=self.attempts, attempts_time_share=self.attempts_time_share,
                             max_tokens=self.max_tokens,
                             model_timeout_s=self.model_timeout_s,
                             question_timeout_s=self.question_timeout_s)

    def with_(self, **changes: Any) -> ServerConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def __post_init__(self) -> None:
        self.root_dir = Path(self.root_dir)
        if self.max_timeout_s <= 0 or self.default_timeout_s <= 0 or self.max_background_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        if self.default_timeout_s > self.max_timeout_s:
            self.default_timeout_s = self.max_timeout_s
        if self.max_sessions < 1 or self.max_sessions_per_tenant < 1 or self.max_stored_per_tenant < 1:
            raise ValueError("session limits must be at least 1")
        if self.max_stored_mb_per_tenant is not None and self.max_stored_mb_per_tenant <= 0:
            self.max_stored_mb_per_tenant = None
        self.model_settings  # noqa: B018 (validates max_steps and images)
        if self.recovery not in RECOVERY_MODES:
            raise ValueError(f"recovery must be one of {', '.join(RECOVERY_MODES)}; got {self.recovery!r}")
        if self.replica_lease_s <= 0:
            raise ValueError("the replica lease must be positive")
        if self.mcp_inline_image_bytes < 0 or self.mcp_task_after_s < 0:
            raise ValueError("the inline image cap and the task threshold cannot be negative")
        if self.housekeeping_interval_s is not None and self.housekeeping_interval_s <= 0:
            raise ValueError("the housekeeping interval must be positive")


def environment_overrides(environ: Mapping[str, str] | None = None) -> TokenTable:
    """Tokens from the environment: ``KERNEL_ANALYST_TOKEN`` (tenant ``default``) and
    ``KERNEL_ANALYST_TOKENS_FILE`` (a tokens file). The only place that reads it."""
    env = os.environ if environ is None else environ
    table = TokenTable()
    single = env.get(TOKEN_ENV, "").strip()
    if single:
        table.add(single, DEFAULT_TENANT)
    tokens_file = env.get(TOKENS_FILE_ENV, "").strip()
    if tokens_file:
        for token, tenant in read_tokens_file(tokens_file).items():
            table.add(token, tenant)
    return table
