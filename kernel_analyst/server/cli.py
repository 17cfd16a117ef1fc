"""``kernel-analyst serve`` and ``kernel-analyst mcp``: argument parsing only.

The kernel and model flags (and their defaults) are the CLI's own, from
:mod:`kernel_analyst.frontend.flags`; errors are reported by the CLI's entry point
(one line, an exit code from :func:`kernel_analyst.frontend.errors.classify`).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
from pathlib import Path
from typing import Any

from ..frontend import flags
from ..frontend.errors import UsageError
from ..frontend.models import load_model
from ..frontend.settings import KernelSettings
from ..kernels import Limits
from .config import SERVICE_CPUS, ServerConfig, TokenTable, environment_overrides, read_tokens_file

_LOOPBACK = ("localhost",)
DEFAULT_SESSION_DIR = Path("kernel-analyst-sessions")


def add_cli(subparsers: Any) -> None:
    """Register the ``serve`` and ``mcp`` subcommands on an argparse subparsers object."""
    serve = subparsers.add_parser(
        "serve", help="run the HTTP API, the web page and MCP (/mcp)",
        description="Serve sessions over HTTP: JSON API (schema at /openapi.json), a web page at /, "
                    "and MCP (streamable HTTP) at /mcp. Bearer tokens are required; without "
                    "--token-file or KERNEL_ANALYST_TOKEN one is generated and printed.")
    _common(serve, default_port=8000)
    serve.add_argument("--max-sessions", type=int, default=20,
                       help="live sessions (a kernel each) in total; dormant ones do not count (default 20)")
    serve.add_argument("--max-sessions-per-tenant", type=int, default=5, help="per tenant (default 5)")
    serve.add_argument("--max-stored-per-tenant", type=int, default=100,
                       help="conversations a tenant keeps, live and dormant (default 100)")
    serve.add_argument("--max-stored-mb-per-tenant", type=float, default=5120.0,
                       help="disk a tenant's conversations may take, MB (default 5120; 0 = no limit)")
    serve.add_argument("--max-body-mb", type=float, default=2.0, help="largest JSON request body (default 2)")
    serve.add_argument("--no-auth", action="store_true",
                       help="do not require a token (refused unless listening on loopback)")
    serve.set_defaults(func=run_serve)

    mcp = subparsers.add_parser(
        "mcp", help="serve sessions over MCP (stdio or streamable HTTP)",
        description="An MCP server with tools to execute code, upload files, list variables, "
                    "export the notebook and (with --model) ask the agent.")
    mcp.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                     help="stdio (default; for a host that launches this command) or streamable-http")
    _common(mcp, default_port=8001)
    mcp.set_defaults(func=run_mcp)


def _common(parser: argparse.ArgumentParser, *, default_port: int) -> None:
    group = parser.add_argument_group("service options")
    group.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    group.add_argument("--port", type=int, default=default_port,
                       help=f"port (default {default_port}; 0 = any)")
    group.add_argument("--token-file", type=Path, help="tokens file: one 'TENANT TOKEN' per line")
    group.add_argument("--max-timeout", type=float, default=300.0, help="timeout ceiling, s (300)")
    group.add_argument("--max-background-timeout", type=float, default=86_400.0, metavar="SECONDS",
                       help="how long a background run may last, s (86400: 24 h)")
    group.add_argument("--idle-timeout", type=float, default=1800.0,
                       help="sessions idle this long go dormant (kernel stopped, conversation kept; "
                            "the next use wakes it), s (1800; 0 = never)")
    group.add_argument("--pool-size", type=int, default=1, help="kernels started in advance (1)")
    group.add_argument("--inline-image-kb", type=float, default=32.0, metavar="KB",
                       help="MCP execute: figures come back as resource links, with downscaled copies "
                            "inline up to this many KB per result (32; 0 = links only, for hosts that "
                            "read resources)")
    flags.add_database_flag(parser)
    flags.add_recovery_flag(parser, default="replay")
    flags.add_kernel_flags(parser, session_dir=DEFAULT_SESSION_DIR,
                     session_dir_help=f"where session files and audit notebooks are kept "
                                      f"(default ./{DEFAULT_SESSION_DIR})")
    flags.add_tenant_cpus_flag(parser)
    flags.add_gateway_user_flag(parser)
    flags.add_model_flags(parser, required=False,
                          purpose="without it, questions are refused (code and EDA work)")
    flags.add_debug_flag(parser)


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """A ServerConfig from parsed arguments and the environment's tokens."""
    tokens = environment_overrides()
    if args.token_file:
        tokens = _merge(tokens, read_tokens_file(args.token_file))
    no_auth = bool(getattr(args, "no_auth", False))
    if no_auth and not _is_loopback(args.host):
        raise UsageError("--no-auth is only allowed when listening on a loopback address")
    kernel = flags.kernel_settings(args)
    model = flags.model_settings(args)
    timeout = min(kernel.timeout_s or ServerConfig.default_timeout_s, args.max_timeout)
    # --max-upload-mb: kernel flags, one limit everywhere; --cpus: one core unless told
    limits = kernel.limits(Limits(cpus=SERVICE_CPUS), timeout_s=timeout)
    return ServerConfig(
        root_dir=kernel.session_dir or DEFAULT_SESSION_DIR, host=args.host, port=args.port, tokens=tokens,
        auth=not no_auth, limits=limits, max_sessions=getattr(args, "max_sessions", 20),
        max_sessions_per_tenant=getattr(args, "max_sessions_per_tenant", 5),
        max_stored_per_tenant=getattr(args, "max_stored_per_tenant", 100),
        max_stored_mb_per_tenant=getattr(args, "max_stored_mb_per_tenant", 5120.0) or None,
        max_body_bytes=int(getattr(args, "max_body_mb", 2.0) * 1024 * 1024),
        max_upload_bytes=limits.max_upload_mb * 1024 * 1024, default_timeout_s=timeout,
        max_timeout_s=args.max_timeout, idle_timeout_s=args.idle_timeout or None,
        max_background_timeout_s=args.max_background_timeout,
        pool_size=args.pool_size, mcp_inline_image_bytes=int(max(0.0, args.inline_image_kb) * 1024),
        model=model.spec, base_url=model.base_url, max_steps=model.max_steps,
        images=model.images, protocol=model.protocol, preload=model.preload, attempts=model.attempts,
        attempts_time_share=model.attempts_time_share,
        max_tokens=model.max_tokens, model_timeout_s=model.model_timeout_s,
        question_timeout_s=model.question_timeout_s,
        gateway_url=kernel.gateway_url,
        gateway_env=dict(kernel.gateway_env),
        gateway_users=dict(kernel.gateway_users), database_url=_database(args.database, kernel),
        recovery=args.recovery)


def _database(url: str | None, kernel: KernelSettings) -> str | None:
    """``--database`` checked now, so a bad URL is one clear line before anything starts."""
    if url is None:
        return None
    from .registry import database_url

    try:
        database_url(url, kernel.session_dir or DEFAULT_SESSION_DIR)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return url


def _merge(table: TokenTable, more: dict[str, str]) -> TokenTable:
    for token, tenant in more.items():
        table.add(token, tenant)
    return table


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _prepare(args: argparse.Namespace) -> tuple[ServerConfig, Any]:
    """Config and model from the arguments; a model that cannot load fails here, before
    anything starts, with the message the CLI prints as one line."""
    config = config_from_args(args)
    return config, load_model(config.model_settings)


def run_serve(args: argparse.Namespace) -> int:
    """``kernel-analyst serve``."""
    from .runner import serve

    config, model = _prepare(args)
    try:
        return serve(config, model=model, log_level="debug" if getattr(args, "debug", False) else "info")
    except KeyboardInterrupt:
        return 0


def run_mcp(args: argparse.Namespace) -> int:
    """``kernel-analyst mcp``."""
    from .runner import run_mcp_stdio, serve_mcp_http

    config, model = _prepare(args)
    try:
        if args.transport == "stdio":
            asyncio.run(run_mcp_stdio(config, model=model))
            return 0
        return serve_mcp_http(config, model=model)
    except KeyboardInterrupt:
        return 0
