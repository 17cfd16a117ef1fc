"""The network allowlist: sandboxed kernels reach listed host names, and nothing else.

``Limits(network=["pypi.org", "files.pythonhosted.org"])`` keeps a ``sandbox`` kernel in
its own network namespace (no interface but its loopback, no DNS) and gives it one way
out, the way sandbox runtimes built on bubblewrap do it: an HTTP(S) proxy that runs here,
outside the sandbox, on a Unix socket bound into it.

    kernel (HTTP_PROXY=http://127.0.0.1:3128)
      -> forwarder on the sandbox's own 127.0.0.1:3128 (``_inkernel/egress_forwarder.py``)
      -> Unix socket (bound into the sandbox)
      -> :class:`EgressProxy` here: CONNECT, or a plain-HTTP request, to a listed name only
      -> the name resolved here, the connection made from here

The proxy decides by the name the client asks for: ``CONNECT host:port`` (HTTPS, any
protocol in a tunnel) or an absolute-form ``GET http://host/...`` (plain HTTP, sent on
with its Host header set to that name and ``Connection: close``, so one connection is
one checked request). It never follows a redirect: a client that follows one makes a new
request, checked like the first. An IP literal passes only when listed as such; a name
listed is resolved here (or from ``hosts``, a fixed address per name), and an address
that DNS gives for it on this machine's loopback, link-local range (cloud metadata) or
another special range is refused, so a listed name cannot be turned into a way to this
host's own services. Every step has a deadline (the request head, the upstream
connect, an idle tunnel), a slow or broken client holds only its own connection, and
:meth:`EgressProxy.aclose` ends every connection task it started.

What it does not do: look inside TLS. A client that tunnels to a listed name reaches
whatever that name's servers serve, and a shared front end (a CDN) may serve other sites
by their TLS SNI or Host header as well ("domain fronting"); list names whose servers you
trust with the session's data.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..allowlist import Allowlist, is_ip_literal, normalise_host
from ..limits import Limits
from ._inkernel import FORWARDER_FILE

log = logging.getLogger(__name__)

FORWARD_PORT = 3128
"""Where the forwarder listens inside the sandbox (its own loopback: no port clash)."""
_CHUNK = 64 * 1024
_BAD_IN_HEADER = re.compile(rb"[\r\n\0]|^[ \t]")  # bare line breaks would smuggle headers past the checks
_HOP_HEADERS = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive", b"host",
                b"te", b"trailer", b"upgrade"}


# -- what the sandbox needs -----------------------------------------------------------------


@dataclass(frozen=True)
class EgressRoute:
    """How a sandboxed kernel reaches its proxy: the hook ``sandbox.py`` applies."""

    socket_path: Path
    """The proxy's Unix socket on the host (bound into the sandbox at the same path)."""
    port: int = FORWARD_PORT
    """The forwarder's port on the sandbox's loopback."""

    def wrap(self, python: str, argv: list[str]) -> list[str]:
        """``argv`` started through the forwarder, run by the kernel's ``python``."""
        return [python, "-I", "-S", str(FORWARDER_FILE), str(self.port), str(self.socket_path), "--", *argv]

    def binds(self) -> list[str]:
        """Host paths the sandbox must see (read-only: a socket can be connected to)."""
        return [str(self.socket_path.parent), str(FORWARDER_FILE)]

    def env(self) -> dict[str, str]:
        """The proxy variables of the kernel (the lower-case ones for curl and others)."""
        proxy = f"http://127.0.0.1:{self.port}"
        local = "localhost,127.0.0.1,::1"
        pairs = {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "NO_PROXY": local}
        return {**pairs, **{k.lower(): v for k, v in pairs.items()}}


# -- the proxy ------------------------------------------------------------------------------


class _Refusal(Exception):
    """A request the proxy answers with an error status (its reason line says why)."""

    def __init__(self, status: int, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.detail = detail or reason


@dataclass
class _Activity:
    at: float


class EgressProxy:
    """An HTTP(S) proxy on a Unix socket that lets clients reach listed hosts only.

    Use as an async context manager (or :meth:`start` / :meth:`aclose`); nothing listens
    before it starts. One proxy serves one kernel.
    """

    def __init__(self, allow: Iterable[str], *, socket_path: str | Path,
                 hosts: Mapping[str, str] | None = None, connect_timeout_s: float = 10.0,
                 head_timeout_s: float = 10.0, idle_timeout_s: float = 300.0,
                 max_connections: int = 64, max_head_bytes: int = 16 * 1024,
                 directory: Path | None = None) -> None:
        """
        Args:
            allow: allowlist entries (see :class:`HostRule`).
            socket_path: where to listen (a path short enough for a Unix socket).
            hosts: fixed addresses for names (used instead of DNS, like /etc/hosts;
                exempt from the address checks: whoever sets them chose the address).
            connect_timeout_s: limit for resolving a name and connecting to it.
            head_timeout_s: limit for a client to send its whole request head.
            idle_timeout_s: a connection with no data either way this long is closed.
            max_connections: connections served at once; more are answered 503.
            max_head_bytes: the largest request head accepted (431 beyond).
            directory: a directory of the proxy's own (its socket's), removed at close.
        """
        self.allowlist = Allowlist(allow)
        self.socket_path = Path(socket_path)
        self.hosts = {normalise_host(k) or k: v for k, v in (hosts or {}).items()}
        self.connect_timeout_s = connect_timeout_s
        self.head_timeout_s = head_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self.max_head_bytes = max_head_bytes
        self.allowed = 0
        """Requests let through so far."""
        self.refused = 0
        """Requests refused so far (any reason)."""
        self._directory = directory
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def route(self) -> EgressRoute:
        """What a sandbox needs to reach this proxy."""
        return EgressRoute(self.socket_path)

    async def start(self) -> EgressProxy:
        """Listen on :attr:`socket_path` (only this user may connect to it)."""
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path),
                                                       limit=self.max_head_bytes)
        self.socket_path.chmod(0o600)
        return self

    async def __aenter__(self) -> EgressProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening and end every connection (their tasks are awaited)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 5.0)
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    # -- one connection --------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except asyncio.CancelledError:
            # Only aclose() (or the loop's end) cancels this task, which asyncio's stream
            # server made: ending it normally keeps Python 3.11 from logging the cancel.
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            if len(self._tasks) > self.max_connections:
                raise _Refusal(503, "Too many connections through the egress proxy")
            head = await self._read_head(reader)
            upstream_reader, upstream, first = await self._open(head)
            self.allowed += 1
            log.debug("egress proxy: %s", head.split(b"\r\n", 1)[0].decode("ascii", "replace"))
            if first is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.write(first)
            await self._splice(reader, writer, upstream_reader, upstream)
        except _Refusal as refusal:
            self.refused += 1
            await self._refuse(writer, refusal)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass  # the client or the upstream went away, or a tunnel idled out
        finally:
            if upstream is not None:
                upstream.close()

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_timeout_s)
        except asyncio.LimitOverrunError:
            raise _Refusal(431, "Request head too large") from None
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise _Refusal(400, "Incomplete request head") from None
            raise
        except asyncio.TimeoutError:
            raise _Refusal(408, "Request head not received in time") from None
        return head

    async def _open(self, head: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes | None]:
        """Check the request and connect to its host; returns the upstream streams and
        the bytes to send there first (None for a tunnel)."""
        lines = head[:-4].split(b"\r\n")
        try:
            method, target, version = lines[0].decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            raise _Refusal(400, "Malformed request line") from None
        if not version.startswith("HTTP/1."):
            raise _Refusal(505, "HTTP version not supported")
        if method == "CONNECT":
            host, port = self._target(f"//{target}")
            reader, writer = await self._connect(host, port)
            return reader, writer, None
        if not target.lower().startswith("http://"):
            raise _Refusal(400, "Not a proxy request", "send absolute-form http:// requests, or CONNECT")
        host, port = self._target(target)
        path = urlsplit(target)._replace(scheme="", netloc="").geturl() or "/"
        headers = _forwarded_headers(lines[1:], host, port)
        reader, writer = await self._connect(host, port)
        first = f"{method} {path} {version}\r\n".encode("ascii") + headers + b"\r\n"
        return reader, writer, first

    def _target(self, url: str) -> tuple[str, int]:
        """The normalised host and port a request names, if the allowlist has them."""
        try:
            parts = urlsplit(url)
            raw_host, port = parts.hostname or "", parts.port
        except ValueError:
            raise _Refusal(400, "Malformed request target") from None
        host = normalise_host(raw_host)
        if host is None:
            raise _Refusal(400, "Malformed host name")
        port = port if port is not None else 80
        if not self.allowlist.allows(host, port):
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise _Refusal(
                403, f"Host {shown} is not on the network allowlist",
                f"kernel-analyst: {shown} is not on this kernel's network allowlist (Limits.network: "
                f"{self.allowlist}). Only listed host names can be reached; ask for it to be added.")
        return host, port

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        deadline = time.monotonic() + self.connect_timeout_s
        addresses = await self._resolve(host, port, deadline)
        failure: BaseException | None = None
        for address in addresses:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port, limit=_CHUNK),
                                              max(0.01, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise _Refusal(504, f"Connecting to {host}:{port} timed out") from None
            except OSError as exc:
                failure = exc
        raise _Refusal(502, f"Could not connect to {host}:{port} ({failure})")

    async def _resolve(self, host: str, port: int, deadline: float) -> list[str]:
        """Addresses for ``host``: itself for an IP literal, ``hosts``, else DNS here
        (loopback, link-local and other special addresses dropped)."""
        if is_ip_literal(host):
            return [host]
        if host in self.hosts:
            return [self.hosts[host]]
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM),
                                           max(0.01, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise _Refusal(504, f"Resolving {host} timed out") from None
        except OSError as exc:
            raise _Refusal(502, f"Could not resolve {host} ({exc.strerror or exc})") from None
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
        usable = [a for a in found if _public_enough(a)]
        if not usable:
            raise _Refusal(403, f"Host {host} resolves to a local or special address ({', '.join(found)})")
        return usable

    async def _splice(self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter,
                      upstream_reader: asyncio.StreamReader, upstream: asyncio.StreamWriter) -> None:
        """Copy both ways until both ends are done; a silence of ``idle_timeout_s`` in both
        directions, or a peer that does not take data for that long, ends it."""
        activity = _Activity(time.monotonic())
        pumps = [asyncio.ensure_future(self._pump(client_reader, upstream, activity)),
                 asyncio.ensure_future(self._pump(upstream_reader, client, activity))]
        try:
            done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
            for pump in done:
                pump.result()
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    activity: _Activity) -> None:
        while True:
            data = await self._read_some(source, activity)
            if not data:
                if sink.can_write_eof():
                    with contextlib.suppress(OSError):
                        sink.write_eof()
                return
            sink.write(data)
            activity.at = time.monotonic()
            await asyncio.wait_for(sink.drain(), self.idle_timeout_s)

    async def _read_some(self, source: asyncio.StreamReader, activity: _Activity) -> bytes:
        while True:
            remaining = activity.at + self.idle_timeout_s - time.monotonic()
            if remaining <= 0:
                raise asyncio.TimeoutError
            with contextlib.suppress(asyncio.TimeoutError):  # the other direction may have moved
                return await asyncio.wait_for(source.read(_CHUNK), remaining)

    async def _refuse(self, writer: asyncio.StreamWriter, refusal: _Refusal) -> None:
        """Answer with the refusal's status; its reason line carries the message, since
        clients show that (not the body) for a refused CONNECT."""
        if refusal.status == 403:
            log.info("egress proxy: refused %s", refusal.reason)
        body = (refusal.detail + "\n").encode("utf-8", "replace")
        writer.write(f"HTTP/1.1 {refusal.status} {refusal.reason}\r\n".encode("ascii", "replace")
                     + b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            await asyncio.wait_for(writer.drain(), 2.0)


async def start_egress(limits: Limits, isolation: str,
                       hosts: Mapping[str, str] | None = None) -> EgressProxy | None:
    """The proxy a kernel launched with ``limits`` needs (started, its socket in a new
    private directory), or None: only a non-empty allowlist under ``sandbox`` has one."""
    allowlist = limits.network_allowlist
    if not allowlist or isolation != "sandbox":
        return None
    directory = Path(tempfile.mkdtemp(prefix="ka-net-"))  # short: Unix socket paths are limited
    proxy = EgressProxy(allowlist, socket_path=directory / "proxy.sock", hosts=hosts, directory=directory)
    try:
        return await proxy.start()
    except BaseException:
        await proxy.aclose()
        raise


def _forwarded_headers(lines: list[bytes], host: str, port: int) -> bytes:
    """The client's headers for the upstream: hop-by-hop and proxy headers dropped, Host
    set to the checked name, one request per connection."""
    kept = []
    for line in lines:
        name, sep, _ = line.partition(b":")
        if not sep or not name or name != name.strip() or _BAD_IN_HEADER.search(line):
            raise _Refusal(400, "Malformed header line")
        if name.lower() not in _HOP_HEADERS:
            kept.append(line + b"\r\n")
    shown = f"[{host}]" if ":" in host else host
    authority = shown if port == 80 else f"{shown}:{port}"
    return f"Host: {authority}\r\n".encode("ascii") + b"".join(kept) + b"Connection: close\r\n"


def _public_enough(address: str) -> bool:
    """False for addresses a listed name must not lead to when DNS gives them: this
    machine (loopback, unspecified), link-local (cloud metadata), multicast, reserved."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast or ip.is_reserved)


__all__ = ["FORWARD_PORT", "EgressProxy", "EgressRoute", "start_egress"]
