"""``kernel-analyst serve`` and ``kernel-analyst mcp``: argument parsing only."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from pathlib import Path
from typing import Any

from ..kernels import KernelAnalystError, Limits
from ..kernels.limits import ISOLATION_LEVELS
from .config import ServerConfig, TokenTable, environment_overrides, read_tokens_file

_LOOPBACK = ("localhost",)


def add_cli(subparsers: Any) -> None:
    """Register the ``serve`` and ``mcp`` subcommands on an argparse subparsers object."""
    serve = subparsers.add_parser(
        "serve", help="run the HTTP API, the web page and MCP (/mcp)",
        description="Serve sessions over HTTP: JSON API (schema at /openapi.json), a web page at /, "
                    "and MCP (streamable HTTP) at /mcp. Bearer tokens are required; without "
                    "--token-file or KERNEL_ANALYST_TOKEN one is generated and printed.")
    _common(serve, default_port=8000)
    serve.add_argument("--max-sessions", type=int, default=20, help="open sessions in total (default 20)")
    serve.add_argument("--max-sessions-per-tenant", type=int, default=5, help="per tenant (default 5)")
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
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=default_port,
                        help=f"port (default {default_port}; 0 = any)")
    parser.add_argument("--session-dir", type=Path, default=Path("kernel-analyst-sessions"),
                        help="where session files and audit notebooks are kept")
    parser.add_argument("--token-file", type=Path, help="tokens file: one 'TENANT TOKEN' per line")
    parser.add_argument("--model", help="PROVIDER:MODEL for ask (e.g. openai:gpt-4o-mini)")
    parser.add_argument("--base-url", help="OpenAI-compatible base URL for the model")
    parser.add_argument("--max-steps", type=int, default=12, help="agent code steps per question (12)")
    parser.add_argument("--isolation", choices=ISOLATION_LEVELS, default="auto", help="kernel isolation")
    parser.add_argument("--timeout", type=float, default=60.0, help="default execution timeout, s (60)")
    parser.add_argument("--max-timeout", type=float, default=300.0, help="timeout ceiling, s (300)")
    parser.add_argument("--memory", type=int, default=4096, help="kernel memory limit, MiB (4096)")
    parser.add_argument("--idle-timeout", type=float, default=1800.0,
                        help="close sessions idle this long, s (1800; 0 = never)")
    parser.add_argument("--max-upload-mb", type=float, default=100.0, help="largest upload, MiB (100)")
    parser.add_argument("--pool-size", type=int, default=1, help="kernels started in advance (1)")
    parser.add_argument("--gateway", metavar="URL",
                        help="run kernels on a Jupyter Kernel/Enterprise Gateway "
                             "(token from KERNEL_ANALYST_GATEWAY_TOKEN)")


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """A ServerConfig from parsed arguments and the environment's tokens."""
    tokens = environment_overrides()
    if args.token_file:
        tokens = _merge(tokens, read_tokens_file(args.token_file))
    no_auth = bool(getattr(args, "no_auth", False))
    if no_auth and not _is_loopback(args.host):
        raise ValueError("--no-auth is only allowed when listening on a loopback address")
    limits = Limits(isolation=args.isolation, timeout_s=min(args.timeout, args.max_timeout),
                    memory_mb=args.memory, max_upload_mb=max(1, int(args.max_upload_mb + 0.999)))
    return ServerConfig(
        root_dir=args.session_dir, host=args.host, port=args.port, tokens=tokens, auth=not no_auth,
        limits=limits, max_sessions=getattr(args, "max_sessions", 20),
        max_sessions_per_tenant=getattr(args, "max_sessions_per_tenant", 5),
        max_body_bytes=int(getattr(args, "max_body_mb", 2.0) * 1024 * 1024),
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024), default_timeout_s=args.timeout,
        max_timeout_s=args.max_timeout, idle_timeout_s=args.idle_timeout or None,
        pool_size=args.pool_size, model=args.model, base_url=args.base_url, max_steps=args.max_steps,
        gateway_url=getattr(args, "gateway", None))


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


def _prepare(args: argparse.Namespace, command: str) -> tuple[ServerConfig, Any] | None:
    """Config and model from the arguments, or None after printing one clear line."""
    from .runner import resolve_model

    try:
        config = config_from_args(args)
        return config, resolve_model(config)
    except (ValueError, OSError, KernelAnalystError) as exc:
        print(f"kernel-analyst {command}: {exc}", file=sys.stderr)
        return None


def run_serve(args: argparse.Namespace) -> int:
    """``kernel-analyst serve``."""
    from .runner import serve

    prepared = _prepare(args, "serve")
    if prepared is None:
        return 2
    try:
        return serve(prepared[0], model=prepared[1])
    except KeyboardInterrupt:
        return 0


def run_mcp(args: argparse.Namespace) -> int:
    """``kernel-analyst mcp``."""
    from .runner import run_mcp_stdio, serve_mcp_http

    prepared = _prepare(args, "mcp")
    if prepared is None:
        return 2
    config, model = prepared
    try:
        if args.transport == "stdio":
            asyncio.run(run_mcp_stdio(config, model=model))
            return 0
        return serve_mcp_http(config, model=model)
    except KeyboardInterrupt:
        return 0
