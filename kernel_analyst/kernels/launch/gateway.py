"""Kernels behind a Jupyter Kernel Gateway or Jupyter Enterprise Gateway.

The gateway starts and owns the kernel processes (on its host, or as Kubernetes pods,
YARN or Docker containers with Enterprise Gateway); this backend talks to its REST API
(``/api/kernels``, ``/api/kernelspecs``) and to each kernel's websocket
(``/api/kernels/{id}/channels``), so a :class:`KernelSession` works unchanged.

Why a small client of our own, on tornado (already a dependency of ipykernel), rather
than a maintained client library:

- jupyter_server's gateway client (``GatewayClient`` and the ``Gateway*Manager``
  classes) is built for the Jupyter server proxying a browser: its configuration is a
  process-wide traitlets singleton (one gateway, one token per process), its kernel
  client reads the websocket through blocking ``websocket-client`` calls in a thread and
  exposes queues per channel rather than one ordered message stream, and it neither
  reconnects a dropped socket nor reports a kernel the gateway restarted. It would also
  make jupyter_server a runtime dependency.
- ``jupyter-kernel-client`` (PyPI, 1.0.x) is synchronous too (``requests`` plus a
  ``websocket-client`` thread), sends the token as ``Bearer`` (Kernel Gateway expects
  ``token``) and in some cases as a URL query parameter, has no reconnection and no
  liveness watch, and pulls in ``requests`` and ``jupyter-mimetypes``.

Both would put a thread and a second copy of the request/wait logic beside the async
core. What the backend needs is small: a few JSON requests with a header, one websocket
read continuously, a reconnect loop and a liveness poll (``_gw_http``, ``_gw_channels``).

How failures are seen:

- the gateway restarts a kernel that died (its restarter polls every
  ``KernelRestarter.time_to_dead`` s, 3 by default) and says so on the websocket
  (``status: restarting`` or ``dead``): the kernel is reported exited, since its
  namespace is gone; while it starts (before it holds anything) another kernel is
  started in its place instead, up to ``_START_TRIES``;
- a deleted or culled kernel closes the websocket, and ``GET /api/kernels/{id}``
  answers 404; while a cell runs the kernel is polled every ``poll_interval_s``;
- a dropped websocket is reconnected while the kernel exists (the server replays what
  it buffered); after a reconnect a probe checks that the namespace is still ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from jupyter_client.session import Session

from ..exceptions import GatewayError, GatewayUserError, KernelStartError
from ..limits import Limits
from ._gw_channels import KernelChannels, KernelState
from ._gw_files import GatewayFiles
from ._gw_http import GatewayHTTP, GatewayHTTPError
from ._inkernel import GATEWAY_FILE, STARTUP_FILES
from .base import KernelBackend, KernelRequest, RunningKernel
from .request import Channel, Outcome, RequestRouter, deadline_after

log = logging.getLogger(__name__)

ENV_URL = "KERNEL_ANALYST_GATEWAY_URL"
ENV_TOKEN = "KERNEL_ANALYST_GATEWAY_TOKEN"
USERNAME_VAR = "KERNEL_USERNAME"
"""The start request's variable naming the kernel's user: Enterprise Gateway authorizes
it (``authorized_users`` / ``unauthorized_users``), counts kernels per user, impersonates
it where enabled, and names its Kubernetes kernel pods after it."""
USER_FIELD = "{user}"
"""In a ``kernel_env`` value: the kernel's user (a namespace per tenant, for one)."""
ISOLATION = "remote"
_INFO_PROBE_S = 1.0
_START_TRIES = 3
"""Kernels started for one request when the gateway restarts each while it starts."""


class _NoReply(Exception):
    """A request of the backend's own got no reply in time."""


class GatewayKernel(RunningKernel):
    """A kernel owned by a gateway, reached over REST and one websocket."""

    def __init__(self, http: GatewayHTTP, kernel_id: str, *, poll_interval_s: float,
                 reconnect_window_s: float) -> None:
        self.kernel_id = kernel_id
        self.isolation = ISOLATION
        self.kernel_info = {}
        self.kernelspec = {}
        self.exit_reason: str | None = None
        """Why the kernel is considered gone (None while it runs)."""
        self.restarted = False
        """True once the gateway said it restarted the kernel (its process had died)."""
        self.poll_interval_s = poll_interval_s
        self._http = http
        self._path = f"/api/kernels/{kernel_id}"
        # The gateway signs what it forwards; this key only keeps Session from warning.
        self._session = Session(key=uuid.uuid4().hex.encode(), username="kernel-analyst")
        self.router = RequestRouter(self)
        self.router.on_unrouted = self._watch_unrouted
        self._exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters = 0
        self._waiting = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self.on_shutdown: list[Callable[[GatewayKernel], None]] = []
        """Callables run once the kernel is shut down (the backend forgets it)."""
        self.marker = uuid.uuid4().hex
        self.channels = KernelChannels(
            http, kernel_id, self._session.session, on_message=self.router.deliver, probe=self.probe,
            on_lost=self._mark_exited, on_reconnected=self._after_reconnect, on_failure=self.router.fail,
            reconnect_window_s=reconnect_window_s)

    # -- messages ------------------------------------------------------------------------

    def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        return self.send_message(channel, self._session.msg(msg_type, content))

    def send_message(self, channel: Channel, msg: dict[str, Any]) -> str:
        self.channels.send(channel, msg)
        return str(msg["header"]["msg_id"])

    def _watch_unrouted(self, channel: str, msg: dict[str, Any]) -> None:
        """Messages no request claims: the gateway's word that the kernel is gone."""
        if channel != "iopub":
            return
        msg_type = msg.get("header", {}).get("msg_type")
        if not (msg.get("parent_header") or {}).get("msg_id"):
            if msg_type == "status":
                state = msg.get("content", {}).get("execution_state")
                if state in ("restarting", "dead"):
                    self.restarted = self.restarted or state == "restarting"
                    self._mark_exited(f"the kernel died (the gateway reported {state!r})")
        elif msg_type == "shutdown_reply":
            # Not ours: the gateway (culling, a DELETE, another client's restart) stopped it.
            self._mark_exited("the gateway shut the kernel down (culled, deleted or restarted)")

    async def request(self, msg_type: str, content: dict[str, Any], *,
                      timeout: float | None) -> dict[str, Any]:
        """Send a shell request of the backend's own and return its reply.

        Raises ``_NoReply`` after ``timeout`` and GatewayError if the kernel is gone.
        """
        outcome, request = await self.router.request("shell", msg_type, content,
                                                     deadline=deadline_after(timeout))
        if outcome is Outcome.REPLY:
            return request.reply.result()
        if outcome in (Outcome.TIMEOUT, Outcome.NO_REPLY):
            raise _NoReply(msg_type)
        reason = self.exit_reason or self.router.failure or "it stopped"
        raise GatewayError(f"the remote kernel is gone: {reason}. Run a cell to start "
                           "a fresh kernel, then retry.")

    async def evaluate(self, expression: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Evaluate one expression in a silent execute; return its user_expressions entry."""
        limit = timeout or self._http.request_timeout_s
        try:
            reply = await self.request("execute_request", {
                "code": "", "silent": True, "store_history": False, "user_expressions": {"r": expression},
                "allow_stdin": False, "stop_on_error": False}, timeout=limit)
        except _NoReply:
            raise GatewayError(f"the remote kernel did not answer within {limit:g} s") from None
        entry: dict[str, Any] = reply["content"].get("user_expressions", {}).get("r", {})
        return entry

    # -- liveness ------------------------------------------------------------------------

    async def wait_exited(self) -> None:
        self._waiters += 1
        self._waiting.set()
        try:
            await asyncio.shield(self._exited)
        finally:
            self._waiters -= 1
            if not self._waiters:
                self._waiting.clear()

    def is_alive(self) -> bool:
        return not self._exited.done()

    def _mark_exited(self, reason: str, *, expected: bool = False) -> None:
        if not self._exited.done():
            self.exit_reason = reason
            if not (expected or self._closed):
                log.warning("gateway kernel %s: %s", self.kernel_id, reason)
            self._exited.set_result(None)

    async def probe(self) -> KernelState:
        """Ask the gateway whether the kernel still exists."""
        try:
            model = await self._http.call("GET", self._path, missing_ok=True,
                                          timeout=max(2 * self.poll_interval_s, 2.0))
        except GatewayError:
            return "unknown"
        return "gone" if model is None else "alive"

    async def _watch(self) -> None:
        """Poll the gateway while somebody waits on the kernel (a cell is running)."""
        while not self._exited.done():
            await self._waiting.wait()
            await asyncio.sleep(self.poll_interval_s)
            if self._waiters and await self.probe() == "gone":
                self._mark_exited("the gateway no longer has the kernel")

    def _after_reconnect(self) -> None:
        self._spawn(self._check_namespace())

    async def _check_namespace(self) -> None:
        """After a reconnect: a kernel the gateway restarted meanwhile lost our namespace."""
        try:
            entry = await self.evaluate(f"{_FILES_VAR}.marker", timeout=None)
        except GatewayError:
            return
        if entry.get("data", {}).get("text/plain") != repr(self.marker):
            self._mark_exited("the kernel was restarted while the connection was down")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- control -------------------------------------------------------------------------

    async def interrupt(self) -> None:
        if not self.is_alive():
            return
        try:
            await self._http.call("POST", self._path + "/interrupt")
        except GatewayError as exc:
            log.warning("could not interrupt gateway kernel %s: %s", self.kernel_id, exc)

    async def shutdown(self, *, now: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._delete()
        finally:
            await self._let_go("shut down")

    async def detach(self) -> None:
        """Close our websocket and forget the kernel; it keeps running on the gateway."""
        if self._closed:
            return
        self._closed = True
        await self._let_go("detached")

    async def _let_go(self, why: str) -> None:
        """Stop everything of ours that talks to the kernel."""
        self._mark_exited(why, expected=True)
        await self.channels.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for callback in self.on_shutdown:
            callback(self)

    async def _delete(self) -> None:
        """DELETE the kernel: the gateway asks it to stop, then kills it (the API has no
        "now"). Retried briefly: a gateway answers 500 while it is restarting the kernel."""
        deadline = time.monotonic() + self._http.request_timeout_s
        delay = 0.1
        while True:
            try:
                await self._http.call("DELETE", self._path, missing_ok=True)
                return
            except GatewayHTTPError as exc:
                if exc.status < 500 or time.monotonic() + delay > deadline:
                    log.warning("could not delete gateway kernel %s: %s", self.kernel_id, exc)
                    return
            except GatewayError as exc:
                log.warning("could not delete gateway kernel %s: %s", self.kernel_id, exc)
                return
            await asyncio.sleep(delay)
            delay = min(2 * delay, 1.0)

    def describe(self) -> dict[str, Any]:
        remote = "the gateway's deployment (Kubernetes: the pod's resources and securityContext)"
        return {"isolation": self.isolation, "backend": "gateway", "gateway": self._http.url,
                "kernel_id": self.kernel_id,
                "start": {"path": "cold", "reason": "a remote kernel on a gateway is started by the "
                          "gateway; only local kernels are forked from a template"},
                "enforced": {"cpu": f"not by this host: {remote}", "syscalls": f"not by this host: {remote}"}}

    # -- start ---------------------------------------------------------------------------

    async def _reconnect_existing(self) -> None:
        """Open the websocket of a running kernel and adopt its marker: it must be one of
        ours (started with the startup code), or its namespace is not what we recorded."""
        await self.channels.open()
        self._spawn(self._watch())
        info = await self.request("kernel_info_request", {}, timeout=self._http.request_timeout_s)
        self.kernel_info = info["content"]
        entry = await self.evaluate(f"{_FILES_VAR}.marker")
        marker = entry.get("data", {}).get("text/plain") if entry.get("status") == "ok" else None
        if not isinstance(marker, str) or not marker.startswith("'"):
            raise KernelStartError(f"gateway kernel {self.kernel_id} is not a kernel-analyst kernel "
                                   "(or it was restarted); its namespace is not the recorded one")
        self.marker = marker.strip("'")

    async def _start(self, code: str) -> None:
        """Open the websocket, wait for kernel_info, then run the startup code."""
        await self.channels.open()
        self._spawn(self._watch())
        info: dict[str, Any] | None = None
        while info is None:
            with contextlib.suppress(_NoReply):
                info = await self.request("kernel_info_request", {}, timeout=_INFO_PROBE_S)
        self.kernel_info = info["content"]
        reply = await self.request("execute_request", {
            "code": code, "silent": True, "store_history": False, "user_expressions": {"cap": _REINSTALL_CAP},
            "allow_stdin": False, "stop_on_error": True}, timeout=None)
        content = reply["content"]
        if content.get("status") != "ok":
            raise KernelStartError(
                f"the kernel's startup code failed on the gateway ({content.get('ename')}: "
                f"{content.get('evalue')}); the kernel needs Python 3 with IPython/ipykernel")
        cap = content.get("user_expressions", {}).get("cap", {})
        if cap.get("status") != "ok":
            raise KernelStartError(f"could not install the output cap in the remote kernel "
                                   f"({cap.get('ename')}: {cap.get('evalue')})")


_FILES_VAR = "_kernel_analyst_files"
# The output cap patches sys.stdout/stderr.write. Local kernels install it through
# exec_files, before any cell; here the startup code runs as a cell, and IPython 9 puts
# back the write methods it saw at the start of every cell (its output "tee"), undoing
# the patch. user_expressions are evaluated after that restore, so install it again
# there (unless it survived, as with older IPython).
_REINSTALL_CAP = (
    "[_kernel_analyst.cap.install(s) for s in (__import__('sys').stdout, __import__('sys').stderr)"
    " if 'install.<locals>' not in getattr(s.write, '__qualname__', '')]"
)


@lru_cache(maxsize=1)
def _kernel_sources() -> tuple[str, str]:
    return "\n".join(path.read_text() for path in STARTUP_FILES), GATEWAY_FILE.read_text()


def startup_code(limits: Limits, preload: tuple[str, ...], marker: str) -> str:
    """What a remote kernel runs first: a private working directory, the helpers that
    local kernels get through ``exec_files``, the file server and the flush budget (in a
    module of its own, so no user-visible names appear)."""
    helpers, kernel_side = _kernel_sources()
    return "\n".join([
        "import atexit as _ka_gw_atexit, os as _ka_gw_os, shutil as _ka_gw_shutil",
        "import tempfile as _ka_gw_tempfile, types as _ka_gw_types",
        f"_ka_gw_os.environ['KERNEL_ANALYST_MAX_OUTPUT'] = {str(limits.max_output_bytes)!r}",
        f"_ka_gw_os.environ['KERNEL_ANALYST_MAX_RICH'] = {str(limits.max_rich_output_bytes)!r}",
        f"_ka_gw_os.environ['KERNEL_ANALYST_PRELOAD'] = {','.join(preload)!r}",
        "_ka_gw_root = _ka_gw_tempfile.mkdtemp(prefix='kernel-analyst-')",
        "_ka_gw_atexit.register(_ka_gw_shutil.rmtree, _ka_gw_root, True)",
        "_ka_gw_os.chdir(_ka_gw_root)",
        helpers,
        "_kernel_analyst.adopt = lambda path: None  # host paths mean nothing to a remote kernel",
        "_ka_gw_module = _ka_gw_types.ModuleType('_kernel_analyst_files')",
        f"exec(compile({kernel_side!r}, '<kernel-analyst remote>', 'exec'), _ka_gw_module.__dict__)",
        f"{_FILES_VAR} = _ka_gw_module.KernelFileServer(_ka_gw_root)",
        "_ka_gw_module.throttle_flushes((__import__('sys').stdout, __import__('sys').stderr))",
        f"{_FILES_VAR}.marker = {marker!r}",
        "del _ka_gw_atexit, _ka_gw_os, _ka_gw_shutil, _ka_gw_tempfile, _ka_gw_types, _ka_gw_module",
        "del _ka_gw_root",
    ])


def _user_refused(url: str, user: str | None, owner: str | None, detail: str) -> GatewayUserError:
    who = f"user {user!r}" if user is not None else "the user it runs as (no KERNEL_USERNAME was sent)"
    whose = f" for {owner!r}" if owner is not None else ""
    return GatewayUserError(
        f"the gateway at {url} refused to start a kernel{whose} as {who} (HTTP 403: {detail}). Map "
        "the tenant to a user the gateway accepts (--gateway-user TENANT=USER), send one for every kernel "
        "(--gateway-env KERNEL_USERNAME=USER), or change the gateway's authorized_users / "
        "unauthorized_users", user=user)


class GatewayBackend(KernelBackend):
    """Starts kernels on a Jupyter Kernel Gateway or Enterprise Gateway.

    ``url`` is the gateway's base URL (``https://`` for TLS). ``token`` is sent as an
    ``Authorization: token ...`` header, never in a URL or a log line. Nothing is
    contacted before the first :meth:`start` (or :meth:`check`).
    """

    name = "gateway"

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 60.0,
        kernel_name: str | None = None,
        validate_cert: bool = True,
        ca_certs: str | None = None,
        kernel_env: Mapping[str, str] | None = None,
        poll_interval_s: float = 1.0,
        reconnect_window_s: float = 30.0,
        restore_uploads: bool = True,
        usernames: Mapping[str, str] | None = None,
    ) -> None:
        """
        Args:
            url: base URL of the gateway, e.g. ``https://eg.example.org``.
            token: the gateway's auth token (``KG_AUTH_TOKEN`` / ``EG_AUTH_TOKEN``).
            connect_timeout_s: limit for opening a connection to the gateway.
            request_timeout_s: limit for one REST request (a kernel start has
                ``Limits.startup_timeout_s`` instead: pods can take a while).
            kernel_name: the gateway kernelspec to start; default: the gateway's default,
                or the session's ``KernelEnvironment(kernelspec=...)``.
            validate_cert: check the gateway's TLS certificate (keep True outside tests).
            ca_certs: a CA bundle file for a gateway with a private CA.
            kernel_env: extra ``KERNEL_*`` variables for the kernel (Enterprise Gateway
                reads e.g. ``KERNEL_NAMESPACE``, ``KERNEL_USERNAME``); other names are
                dropped by the gateway unless it allows them. ``{user}`` in a value
                becomes the kernel's user (``KERNEL_NAMESPACE=team-{user}``).
            poll_interval_s: how often the kernel's existence is checked while a cell runs.
            reconnect_window_s: how long a dropped websocket is retried before the kernel
                is reported lost.
            restore_uploads: keep a host copy of uploads in the session's directory and
                upload them again into a replacement kernel (after a death or restart).
            usernames: the gateway user (``KERNEL_USERNAME``) of each owner (a service
                tenant) whose user is not the owner's own name; see :meth:`username_for`.
        """
        self._http = GatewayHTTP(url, token=token, connect_timeout_s=connect_timeout_s,
                                 request_timeout_s=request_timeout_s, validate_cert=validate_cert,
                                 ca_certs=ca_certs)
        self.url = self._http.url
        self.kernel_name = kernel_name
        self.kernel_env = dict(kernel_env or {})
        self.usernames = dict(usernames or {})
        self.poll_interval_s = poll_interval_s
        self.reconnect_window_s = reconnect_window_s
        self.restore_uploads = restore_uploads
        self._specs: dict[str, Any] | None = None
        self._kernels: set[GatewayKernel] = set()

    @classmethod
    def from_env(cls, url: str | None = None, *, environ: Mapping[str, str] | None = None,
                 **options: Any) -> GatewayBackend | None:
        """The backend configured by ``url`` (e.g. a ``--gateway`` option) or
        ``KERNEL_ANALYST_GATEWAY_URL``, with the token from ``KERNEL_ANALYST_GATEWAY_TOKEN``;
        None when neither gives a URL (use local kernels). The one place that reads them."""
        env = os.environ if environ is None else environ
        url = url or env.get(ENV_URL) or None
        if url is None:
            return None
        return cls(url, token=env.get(ENV_TOKEN) or None, **options)

    def __repr__(self) -> str:
        return f"GatewayBackend({self.url!r})"

    def username_for(self, owner: str | None) -> str | None:
        """The ``KERNEL_USERNAME`` a kernel started for ``owner`` carries: the owner's entry
        in ``usernames``, else ``kernel_env``'s ``KERNEL_USERNAME`` (one user for all),
        else the owner's own name. None (no owner, nothing configured) sends none, and
        Enterprise Gateway then uses the user it runs as."""
        if owner is not None and owner in self.usernames:
            return self.usernames[owner]
        return self.kernel_env.get(USERNAME_VAR) or owner

    @property
    def kernels_per_owner(self) -> bool:
        """True unless every kernel starts as the same user (``kernel_env`` names one and
        no owner is mapped to another)."""
        return bool(self.usernames) or USERNAME_VAR not in self.kernel_env

    def resolved_isolation(self, limits: Limits) -> str:
        """Always ``remote``: the gateway's deployment decides (a pod per kernel under
        Enterprise Gateway on Kubernetes); local sandbox settings do not apply."""
        return ISOLATION

    async def check(self) -> dict[str, Any]:
        """Contact the gateway: its version and kernelspecs (raises GatewayError)."""
        version = await self._http.call("GET", "/api")
        specs = await self._kernelspecs()
        return {"version": (version or {}).get("version"), "default": specs.get("default"),
                "kernelspecs": sorted(specs.get("kernelspecs", {}))}

    async def _kernelspecs(self) -> dict[str, Any]:
        if self._specs is None:
            self._specs = await self._http.call("GET", "/api/kernelspecs") or {}
        return self._specs

    async def _spec_meta(self, request: KernelRequest) -> dict[str, Any]:
        env = request.environment
        if env.python or env.venv:
            raise KernelStartError("a gateway runs kernels from its own kernelspecs; use "
                                   "KernelEnvironment(kernelspec=NAME) or kernel_name=, not python=/venv=")
        specs = await self._kernelspecs()
        name = env.kernelspec or self.kernel_name or specs.get("default") or "python3"
        found = specs.get("kernelspecs", {}).get(name)
        if found is None:
            raise KernelStartError(f"the gateway at {self.url} has no kernelspec {name!r}; it has: "
                                   f"{', '.join(sorted(specs.get('kernelspecs', {}))) or 'none'}")
        spec = found.get("spec", {})
        return {"name": name, "display_name": spec.get("display_name", name),
                "language": spec.get("language", "python")}

    async def start(self, request: KernelRequest) -> RunningKernel:
        if request.attach:
            try:
                return await self._reattach(request)
            except (GatewayError, KernelStartError) as exc:
                log.info("could not reattach to gateway kernel %s (%s); starting a new one",
                         request.attach, exc)
        spec = await self._spec_meta(request)
        timeout = request.limits.startup_timeout_s
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            attempt += 1
            kernel = await self._new_kernel(spec, request)
            try:
                code = startup_code(request.limits, request.preload, kernel.marker)
                await asyncio.wait_for(kernel._start(code), max(0.1, deadline - time.monotonic()))
                await self._attach_files(kernel, request)
            except asyncio.TimeoutError:
                await self._discard(kernel)
                raise KernelStartError(
                    f"the kernel on {self.url} did not become ready within {timeout:g} s; "
                    "raise Limits.startup_timeout_s if the gateway is slow to launch") from None
            except GatewayError:
                await self._discard(kernel)
                if not kernel.restarted:
                    raise
                # Its process died before the kernel held anything (a port taken by
                # another process between the gateway choosing it and the kernel binding
                # it, for one); the gateway restarts it on new ports, but our websocket
                # still points at the old ones. A new kernel is the clean way on.
                if attempt == _START_TRIES or time.monotonic() >= deadline:
                    raise KernelStartError(
                        f"the kernel on {self.url} died while starting, {attempt} time(s) "
                        "(the gateway restarted it each time); its log says why") from None
                log.warning("gateway kernel %s died while starting; starting another (%d of %d)",
                            kernel.kernel_id, attempt + 1, _START_TRIES)
                continue
            except BaseException:
                await self._discard(kernel)
                raise
            log.info("started gateway kernel %s on %s", kernel.kernel_id, self.url)
            return kernel

    async def _new_kernel(self, spec: dict[str, Any], request: KernelRequest) -> GatewayKernel:
        """POST a kernel and wrap it (its websocket not yet open)."""
        model = await self._post_kernel(spec, request)
        kernel = GatewayKernel(self._http, str(model["id"]), poll_interval_s=self.poll_interval_s,
                               reconnect_window_s=self.reconnect_window_s)
        kernel.kernelspec = spec
        self._kernels.add(kernel)
        kernel.on_shutdown.append(self._kernels.discard)
        return kernel

    def start_env(self, request: KernelRequest) -> dict[str, str]:
        """The environment sent with a start request: ``kernel_env`` (``{user}`` in its
        values replaced by the kernel's user), the owner's user (:meth:`username_for`)
        and the kernel's own settings."""
        user = self.username_for(request.owner)
        env = {key: value.replace(USER_FIELD, user) if user is not None else value
               for key, value in self.kernel_env.items()}
        if user is not None:
            env[USERNAME_VAR] = user
        env.update({"KERNEL_ANALYST_MAX_OUTPUT": str(request.limits.max_output_bytes),
                    "KERNEL_ANALYST_MAX_RICH": str(request.limits.max_rich_output_bytes),
                    "KERNEL_ANALYST_PRELOAD": ",".join(request.preload)})
        return env

    async def _post_kernel(self, spec: dict[str, Any], request: KernelRequest) -> dict[str, Any]:
        """POST /api/kernels; a 403 that names the user (Enterprise Gateway's
        authorization) becomes a GatewayUserError that says how to fix it."""
        env = self.start_env(request)
        try:
            model: dict[str, Any] = await self._http.call(
                "POST", "/api/kernels", {"name": spec["name"], "env": env},
                timeout=request.limits.startup_timeout_s)
        except GatewayHTTPError as exc:
            # Enterprise Gateway's refusal names the variable ("Ensure KERNEL_USERNAME is
            # set ..."); its other 403s (kernel limits) do not.
            if exc.status == 403 and USERNAME_VAR in exc.detail:
                raise _user_refused(self.url, env.get(USERNAME_VAR), request.owner, exc.detail) from None
            raise
        return model

    async def _reattach(self, request: KernelRequest) -> GatewayKernel:
        """Connect to a kernel of ours still running on the gateway (another replica
        started it); raises GatewayError or KernelStartError when that is not possible."""
        kernel_id = str(request.attach)
        model = await self._http.call("GET", f"/api/kernels/{kernel_id}", missing_ok=True)
        if model is None:
            raise GatewayError(f"the gateway has no kernel {kernel_id}")
        spec = await self._spec_meta(request)
        kernel = GatewayKernel(self._http, kernel_id, poll_interval_s=self.poll_interval_s,
                               reconnect_window_s=self.reconnect_window_s)
        kernel.kernelspec = spec
        kernel.reattached = True
        self._kernels.add(kernel)
        kernel.on_shutdown.append(self._kernels.discard)
        try:
            await asyncio.wait_for(kernel._reconnect_existing(), request.limits.startup_timeout_s)
            mirror = request.workdir / ".gateway-uploads" if self.restore_uploads else None
            kernel.files = GatewayFiles(kernel.evaluate, mirror=mirror)
        except BaseException:
            await kernel.detach()
            raise
        log.info("reattached to gateway kernel %s on %s", kernel_id, self.url)
        return kernel

    async def _attach_files(self, kernel: GatewayKernel, request: KernelRequest) -> None:
        mirror = request.workdir / ".gateway-uploads" if self.restore_uploads else None
        files = GatewayFiles(kernel.evaluate, mirror=mirror)
        kernel.files = files
        restored = await files.restore()
        if restored:
            log.info("restored %d uploaded file(s) into gateway kernel %s", restored, kernel.kernel_id)

    async def _discard(self, kernel: GatewayKernel) -> None:
        await kernel.shutdown(now=True)

    async def aclose(self) -> None:
        """Delete kernels this backend started that are still open; release the client."""
        kernels, self._kernels = list(self._kernels), set()
        await asyncio.gather(*(k.shutdown(now=True) for k in kernels), return_exceptions=True)
        self._http.close()
