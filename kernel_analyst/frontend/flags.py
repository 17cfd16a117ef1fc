"""The flags every front end shares, defined once: kernel, model and debug options.

``kernel-analyst eda|verify|ask|chat`` and ``kernel-analyst serve|mcp`` add these groups to
their parsers and read them back with :func:`kernel_settings` and :func:`model_settings`,
so a flag has one spelling, one help text and one default everywhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..kernels.allowlist import normalise_allowlist
from ..kernels.limits import CPU_POLICIES, ISOLATION_LEVELS, Limits
from .settings import (
    DEFAULT_ATTEMPTS_TIME_SHARE,
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_UPLOAD_MB,
    DEFAULT_MODEL_TIMEOUT_S,
    DEFAULT_QUESTION_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    ENV_NAME,
    IMAGES_MODES,
    PROTOCOL_NAMES,
    RECOVERY_MODES,
    KernelSettings,
    ModelSettings,
    RecoveryMode,
)

_MODEL_EXAMPLES = "e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:qwen2.5-coder"


def add_kernel_flags(parser: argparse.ArgumentParser, *, session_dir: Path | None = None,
                     session_dir_help: str = "keep session files here (default: a temporary directory, "
                                             "removed at exit)") -> None:
    """``--isolation --timeout --interrupt-grace --memory --cpus --cpu-policy --max-upload-mb
    --network --session-dir --gateway --gateway-env``."""
    group = parser.add_argument_group("kernel options")
    group.add_argument("--isolation", choices=ISOLATION_LEVELS,
                       help="kernel isolation: none, process, sandbox, auto (default: auto)")
    group.add_argument("--timeout", type=float, metavar="SECONDS",
                       help=f"time limit per cell (default {DEFAULT_TIMEOUT_S:g})")
    group.add_argument("--interrupt-grace", type=float, metavar="SECONDS",
                       help="how long an interrupted cell (a timeout, a cancel) may take to stop before its "
                            "kernel is restarted; its variables are kept only if it stops in time "
                            f"(default {Limits().interrupt_grace_s:g})")
    group.add_argument("--memory", type=int, metavar="MB", help="kernel memory limit in MiB (default 4096)")
    group.add_argument("--cpus", type=_cores, metavar="CORES",
                       help="CPU each kernel may use, in cores (0.5, 1, 2; 0 = no share); its thread pools "
                            "are sized to it (default: 1 for serve and mcp, no share otherwise)")
    group.add_argument("--cpu-policy", choices=CPU_POLICIES,
                       help="how --cpus is enforced: quota (a hard cap, and a fair weight), weight (a fair "
                            "weight alone: idle cores may be used), burst (quota, plus time left unused "
                            "in one period spent in the next) (default quota)")
    group.add_argument("--max-upload-mb", type=_upload_mb, metavar="MB",
                       help="the largest data file accepted, in MiB: files given to eda, ask and chat, "
                            f"uploads to the service (default {DEFAULT_MAX_UPLOAD_MB}); the session's "
                            "disk quota grows with it")
    group.add_argument("--network", type=_network, metavar="on|off|HOST,...",
                       help="the kernels' network: on, off, or only these host names (an allowlist, "
                            "reached through a proxy; sandbox isolation only), e.g. "
                            "pypi.org,files.pythonhosted.org (default: off under sandbox, else on)")
    group.add_argument("--session-dir", type=Path, metavar="DIR", default=session_dir, help=session_dir_help)
    group.add_argument("--gateway", metavar="URL", help="run kernels on a Jupyter (Enterprise) Gateway; "
                       "token from KERNEL_ANALYST_GATEWAY_TOKEN")
    group.add_argument("--gateway-env", action="append", type=_env_pair, default=[], metavar="KEY=VALUE",
                       help="send this variable with every gateway kernel start (repeatable); gateways "
                            "pass KERNEL_* names to the kernel, e.g. KERNEL_NAMESPACE=team-{user} ({user} "
                            "is the kernel's gateway user), or KERNEL_USERNAME=USER to start every "
                            "kernel as USER")


def add_gateway_user_flag(parser: argparse.ArgumentParser) -> None:
    """``--gateway-user TENANT=USER``: the services' tenants as gateway users."""
    parser.add_argument("--gateway-user", action="append", type=_key_value, default=[], metavar="TENANT=USER",
                        help="with --gateway: start TENANT's kernels as gateway user USER (sent as "
                             "KERNEL_USERNAME; repeatable). Default: a tenant's kernels start as the "
                             "tenant's own name, or as --gateway-env KERNEL_USERNAME if given")


def add_tenant_cpus_flag(parser: argparse.ArgumentParser) -> None:
    """``--tenant-cpus CORES``: the CPU of all of one tenant's kernels together."""
    parser.add_argument("--tenant-cpus", type=_cores, metavar="CORES",
                        help="CPU all of one tenant's kernels may use together, in cores, so a tenant "
                             "with many conversations cannot take the machine from the others "
                             "(default 0: no budget, each kernel's --cpus only)")


def _cores(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of cores (0.5, 1, 2); got {text!r}") from None
    if value != 0 and not 0.01 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"cores must be 0 (no share) or between 0.01 and 1024; got {text}")
    return value


def _network(text: str) -> bool | tuple[str, ...]:
    if text in ("on", "off"):
        return text == "on"
    try:
        return normalise_allowlist(part for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _upload_mb(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in MiB; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"the upload limit must be at least 1 MiB; got {text}")
    return int(value + 0.999)  # a fraction of a MiB rounds up: never below what was asked


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE; got {text!r}")
    return key.strip(), value


def _env_pair(text: str) -> tuple[str, str]:
    key, value = _key_value(text)
    if not ENV_NAME.fullmatch(key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with a variable name as KEY; got {text!r}")
    return key, value

def add_recovery_flag(parser: argparse.ArgumentParser, *, default: RecoveryMode) -> None:
    """``--recovery replay|none``: bring a conversation's variables back after its kernel
    was lost (a restart, a crash), or not."""
    parser.add_argument("--recovery", choices=RECOVERY_MODES, default=default,
                        help="after a kernel is lost (a restart, a crash, a kernel death): replay = bring "
                             "the variables back from a snapshot or by re-running the recorded cells "
                             "(cells marked '# kernel-analyst: no-replay' are skipped); none = go on in "
                             f"an empty kernel (default {default})")


def add_database_flag(parser: argparse.ArgumentParser) -> None:
    """``--database URL``: where the service keeps its session records."""
    parser.add_argument("--database", metavar="URL",
                        help="keep session records here: sqlite:///PATH, or postgresql://USER@HOST/DB for "
                             "several replicas on one registry (default: SQLite in the session directory; "
                             "a password can come from PGPASSWORD or ~/.pgpass)")


def add_model_flags(parser: argparse.ArgumentParser, *, required: bool, purpose: str = "") -> None:
    """``--model --base-url --max-steps --images --protocol --max-tokens --model-timeout
    --question-timeout --attempts --attempts-time-share --preload``."""
    group = parser.add_argument_group("model options")
    suffix = f"; {purpose}" if purpose else ""
    group.add_argument("--model", required=required, metavar="PROVIDER:MODEL", help=_MODEL_EXAMPLES + suffix)
    group.add_argument("--base-url", metavar="URL",
                       help="an OpenAI-compatible server (vLLM, llama.cpp, Ollama)")
    group.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS, metavar="N",
                       help=f"code steps per answer (default {DEFAULT_MAX_STEPS})")
    group.add_argument("--images", choices=IMAGES_MODES, default="auto",
                       help="send figures to the model as images: auto (when its LangChain profile says "
                            "it takes images), on (unless the profile says it does not), off "
                            "(default auto)")
    group.add_argument("--protocol", choices=PROTOCOL_NAMES, default="auto",
                       help="how the model runs code: tools (native tool calls), code (it writes "
                            "```python blocks; for local models without tool calling), auto (tool calls "
                            "when the model makes them, else the code it writes; default)")
    group.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, metavar="N",
                       help=f"tokens one model reply may have (default {DEFAULT_MAX_TOKENS}); a reply seen "
                            "repeating itself is cut sooner")
    group.add_argument("--model-timeout", type=float, default=DEFAULT_MODEL_TIMEOUT_S, metavar="SECONDS",
                       help="seconds a model call may wait for the reply's next piece, the first included "
                            f"(default {DEFAULT_MODEL_TIMEOUT_S:g}); past it the question ends with what the "
                            "cells show")
    group.add_argument("--question-timeout", type=_seconds_or_none, default=DEFAULT_QUESTION_TIMEOUT_S,
                       metavar="SECONDS",
                       help="seconds one question's answer may take (default "
                            f"{DEFAULT_QUESTION_TIMEOUT_S:g}); past it the question ends with what the cells "
                            "show, like the step limit; none: no bound")
    group.add_argument("--attempts", type=int, default=1, metavar="N",
                       help="try every question N times, in forked branches whose answers must agree, "
                            "and give the answer most reach (default 1: a question whose first answer "
                            "fails a check is tried 3 times either way)")
    group.add_argument("--attempts-time-share", type=_share, default=DEFAULT_ATTEMPTS_TIME_SHARE,
                       metavar="SHARE",
                       help="the attempts made because an answer is in doubt may add at most this share "
                            "of the latest questions' seconds (default "
                            f"{DEFAULT_ATTEMPTS_TIME_SHARE:g}: a question takes at most about 1.5 times "
                            "its single attempt on average); 0: never try again on doubt; none: no bound")
    group.add_argument("--preload", choices=("on", "off"), default="on",
                       help="load each uploaded table into a DataFrame (the EDA loader's code, a cell in "
                            "the notebook) before the model's first step, and show the model its profile "
                            "(default on); off: show the model the loader's code to run itself")


def add_debug_flag(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """``--debug``: full tracebacks and debug logging. On a subcommand it does not override
    the value given before the subcommand's name."""
    parser.add_argument("--debug", action="store_true",
                        default=False if top_level else argparse.SUPPRESS,
                        help="show tracebacks and debug logging")


def kernel_settings(args: argparse.Namespace) -> KernelSettings:
    """The kernel settings given on the command line."""
    return KernelSettings(isolation=args.isolation, timeout_s=args.timeout,
                          interrupt_grace_s=args.interrupt_grace, memory_mb=args.memory,
                          cpus=args.cpus, cpu_policy=args.cpu_policy,
                          tenant_cpus=getattr(args, "tenant_cpus", None),
                          max_upload_mb=args.max_upload_mb, network=args.network,
                          session_dir=args.session_dir, gateway_url=args.gateway,
                          gateway_env=dict(args.gateway_env),
                          gateway_users=dict(getattr(args, "gateway_user", None) or []))


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The model settings given on the command line."""
    return ModelSettings(spec=args.model, base_url=args.base_url, max_steps=args.max_steps,
                         images=args.images, protocol=args.protocol, preload=args.preload == "on",
                         attempts=args.attempts, attempts_time_share=args.attempts_time_share,
                         max_tokens=args.max_tokens, model_timeout_s=args.model_timeout,
                         question_timeout_s=args.question_timeout)


def _seconds_or_none(text: str) -> float | None:
    """``--question-timeout``: a positive number of seconds, or ``none`` (no bound)."""
    return _number_or_none(text, lambda value: 0 < value < float("inf"), "a positive number of seconds")


def _share(text: str) -> float | None:
    """``--attempts-time-share``: a number 0 or more, or ``none`` (no bound)."""
    return _number_or_none(text, lambda value: value >= 0, "a number 0 or more")


def _number_or_none(text: str, valid: Callable[[float], bool], wanted: str) -> float | None:
    """A flag's number that ``valid`` accepts, or None for ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{wanted}, or none; got {text!r}") from None
    if not valid(value):  # NaN is valid for none of them
        raise argparse.ArgumentTypeError(f"{wanted}, or none; got {text!r}")
    return value


__all__ = ["add_database_flag", "add_debug_flag", "add_gateway_user_flag", "add_kernel_flags",
           "add_model_flags", "add_recovery_flag", "add_tenant_cpus_flag", "kernel_settings",
           "model_settings"]
