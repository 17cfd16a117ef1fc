"""Runs inside a remote kernel: file transfer for the host, and a bound on how many
stream messages the kernel publishes.

The gateway backend sends this module's source to each kernel it starts (a silent
execute, into a module of its own), so it needs nothing but the standard library.

Files: the host calls the methods of one hidden :class:`KernelFileServer` through
``user_expressions``; each returns a :class:`Reply` whose repr is JSON, read back from the
expression's ``text/plain`` in the same round trip. Names arrive already checked by
``files.safe_name`` on the host; here every path is resolved (symlinks included) and
refused if it leaves the root, as ``files.resolve_inside`` does on the host.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
import uuid
from typing import IO, Any


class Reply:
    """A result whose repr is JSON: ``{"ok": value}`` or ``{"error": kind, "message": ...}``."""

    def __init__(self, value: Any) -> None:
        self.text = json.dumps(value)

    def __repr__(self) -> str:
        return self.text


class TransferError(Exception):
    """A refused or failed transfer; ``kind`` is ``unsafe``, ``not_found``, ``too_large`` or ``checksum``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class KernelFileServer:
    """Chunked, sha256-checked reads and writes under one root directory."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._writes: dict[str, tuple[IO[bytes], Any, str, str]] = {}
        self._reads: dict[str, tuple[IO[bytes], Any]] = {}

    def _resolve(self, name: str) -> str:
        target = os.path.realpath(os.path.join(self.root, name))
        if target != self.root and not target.startswith(self.root + os.sep):
            raise TransferError("unsafe", f"file name {name!r} resolves outside the session directory")
        return target

    def _call(self, action: Any, *args: Any) -> Reply:
        try:
            return Reply({"ok": action(*args)})
        except TransferError as exc:
            return Reply({"error": exc.kind, "message": str(exc)})
        except OSError as exc:
            return Reply({"error": "os", "message": f"{type(exc).__name__}: {exc}"})

    # -- upload: begin, put..., commit (or abort) ------------------------------------

    def begin(self, name: str) -> Reply:
        """Open a temporary file beside ``name``; return a handle for :meth:`put`."""
        return self._call(self._begin, name)

    def _begin(self, name: str) -> str:
        target = self._resolve(name)
        if os.path.isdir(target):
            raise TransferError("unsafe", f"{name!r} is a directory")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        handle = uuid.uuid4().hex
        tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{handle[:8]}.upload")
        self._writes[handle] = (open(tmp, "wb"), hashlib.sha256(), tmp, target)  # noqa: SIM115
        return handle

    def put(self, handle: str, data: str) -> Reply:
        """Append a base64 chunk."""
        return self._call(self._put, handle, data)

    def _put(self, handle: str, data: str) -> int:
        f, digest, _, _ = self._writes[handle]
        chunk = base64.b64decode(data)
        f.write(chunk)
        digest.update(chunk)
        return len(chunk)

    def commit(self, handle: str, sha256: str, size: int) -> Reply:
        """Check size and sha256, then move the file into place (replacing, never
        writing through a link planted at the name)."""
        return self._call(self._commit, handle, sha256, size)

    def _commit(self, handle: str, sha256: str, size: int) -> dict[str, Any]:
        f, digest, tmp, target = self._writes.pop(handle)
        written = f.tell()
        f.close()
        if digest.hexdigest() != sha256 or written != size:
            os.unlink(tmp)
            raise TransferError("checksum",
                                f"upload arrived corrupted ({written} of {size} bytes, sha256 mismatch)")
        os.replace(tmp, target)
        rel = os.path.relpath(target, self.root).replace(os.sep, "/")
        return {"name": rel, "size": written, "sha256": sha256}

    def abort(self, handle: str) -> Reply:
        """Drop an unfinished upload."""
        return self._call(self._abort, handle)

    def _abort(self, handle: str) -> None:
        entry = self._writes.pop(handle, None)
        if entry is not None:
            entry[0].close()
            os.unlink(entry[2])

    # -- download: open, read... -------------------------------------------------------

    def open(self, name: str, max_bytes: int) -> Reply:
        """Open ``name`` for reading; return ``{"handle", "size"}``."""
        return self._call(self._open, name, max_bytes)

    def _open(self, name: str, max_bytes: int) -> dict[str, Any]:
        target = self._resolve(name)
        if not os.path.isfile(target):
            raise TransferError("not_found", f"no file named {name!r} in the session directory")
        size = os.path.getsize(target)
        if size > max_bytes:
            raise TransferError("too_large", f"{name!r} is {size:,} bytes; limit is {max_bytes:,}")
        handle = uuid.uuid4().hex
        self._reads[handle] = (open(target, "rb"), hashlib.sha256())  # noqa: SIM115
        return {"handle": handle, "size": size}

    def read(self, handle: str, length: int) -> Reply:
        """The next chunk (base64); at the end, the sha256 of everything sent."""
        return self._call(self._read, handle, length)

    def _read(self, handle: str, length: int) -> dict[str, Any]:
        f, digest = self._reads[handle]
        chunk = f.read(length)
        digest.update(chunk)
        if len(chunk) < length:
            f.close()
            del self._reads[handle]
            return {"data": base64.b64encode(chunk).decode(), "eof": True, "sha256": digest.hexdigest()}
        return {"data": base64.b64encode(chunk).decode(), "eof": False}

    # -- listing -----------------------------------------------------------------------

    def listing(self, limit: int = 10_000) -> Reply:
        """Regular files under the root (recursive; hidden files and symlinks skipped)."""
        return self._call(self._listing, limit)

    def _listing(self, limit: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fname in sorted(filenames):
                path = os.path.join(dirpath, fname)
                if fname.startswith(".") or os.path.islink(path) or not os.path.isfile(path):
                    continue
                rel = os.path.relpath(path, self.root).replace(os.sep, "/")
                found.append({"name": rel, "size": os.path.getsize(path)})
                if len(found) >= limit:
                    return found
        return found


def throttle_flushes(streams: tuple[Any, ...], *, burst: int = 500, per_second: float = 500.0) -> None:
    """Let user code flush ``streams`` (``print(..., flush=True)``) at most ``burst`` times
    at once and ``per_second`` after that; a flush over the budget is skipped, and its data
    leaves with the next one (ipykernel also flushes on a 0.2 s timer).

    Each flush is one IOPub message. A gateway reads IOPub through a ZMQ socket with the
    default high-water mark (1000 messages), so a kernel printing tens of thousands of
    flushed lines faster than the gateway re-sends them would lose some. ipykernel's own
    flushes (before every reply and idle status) are never skipped.
    """
    for stream in streams:
        stream.flush = _budgeted_flush(stream.flush, burst, per_second)


def _budgeted_flush(real: Any, burst: int, per_second: float) -> Any:
    state = {"tokens": float(burst), "at": time.monotonic()}

    def flush() -> None:
        now = time.monotonic()
        tokens = min(float(burst), state["tokens"] + (now - state["at"]) * per_second)
        state["at"] = now
        # (by module, not file name: ipykernel compiles cells to files under ipykernel_PID/)
        if tokens >= 1.0 or sys._getframe(1).f_globals.get("__name__", "").startswith("ipykernel"):
            state["tokens"] = max(0.0, tokens - 1.0)
            real()
        else:
            state["tokens"] = tokens

    return flush
