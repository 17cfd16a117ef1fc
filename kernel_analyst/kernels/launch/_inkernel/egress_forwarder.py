"""Inside the sandbox: the kernel's proxy address, forwarded to the host's egress proxy.

    python -I -S egress_forwarder.py PORT SOCKET -- KERNEL ARGV ...

The sandbox has no network but its own loopback, and clients want a TCP proxy address
(``HTTP_PROXY=http://127.0.0.1:PORT``), so this binds 127.0.0.1:PORT there, leaves a
process behind that copies every connection to the proxy's Unix socket (bound into the
sandbox by ``sandbox.py``), and then becomes the kernel (``exec``). The listening socket
exists before the kernel starts, so no client can race it. The copier is forked twice:
the sandbox's init adopts it, not the kernel (whose code may wait for any child), and
when the kernel ends, the init ends and the PID namespace takes the copier with it (it
also stops by itself once the kernel is gone).

It runs with the kernel's interpreter in isolated mode, without site-packages, so it
needs nothing but the standard library; every deadline is the host proxy's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys

_CHUNK = 64 * 1024
_WATCH_S = 1.0


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await source.read(_CHUNK)
            if not data:
                break
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        sink.close()


async def _forward(path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(path)
    except OSError as exc:
        writer.write(f"HTTP/1.1 502 The egress proxy is gone ({exc.strerror})\r\n"
                     "Connection: close\r\nContent-Length: 0\r\n\r\n".encode("ascii", "replace"))
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()
        return
    try:
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
    finally:
        up_writer.close()
        writer.close()


async def _serve(listener: socket.socket, path: str, kernel_pid: int) -> None:
    server = await asyncio.start_server(lambda r, w: _forward(path, r, w), sock=listener)
    async with server:
        while True:  # the PID namespace ends us with the kernel; this is the second way
            await asyncio.sleep(_WATCH_S)
            try:
                os.kill(kernel_pid, 0)
            except ProcessLookupError:
                return


def _copier(listener: socket.socket, path: str, kernel_pid: int) -> None:
    """The forked-twice process: serve until the kernel is gone, then exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kernel's interrupts are not for us
    with open(os.devnull, "rb") as null:
        os.dup2(null.fileno(), 0)
    try:
        asyncio.run(_serve(listener, path, kernel_pid))
    finally:
        os._exit(0)


def main(argv: list[str]) -> None:
    if len(argv) < 5 or argv[3] != "--":
        sys.exit("usage: egress_forwarder.py PORT SOCKET -- KERNEL ARGV ...")
    port, path, command = int(argv[1]), argv[2], argv[4:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    kernel_pid = os.getpid()
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            _copier(listener, path, kernel_pid)
        os._exit(0)
    os.waitpid(child, 0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
