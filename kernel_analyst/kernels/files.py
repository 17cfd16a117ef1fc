"""Files of a session: safe names, uploads, downloads, listings."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .exceptions import FileTooLargeError, UnsafeFileNameError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileInfo:
    """A file in a session's working directory."""

    name: str
    """Path relative to the working directory, with ``/`` separators."""
    size: int
    """Size in bytes."""
    sha256: str = ""
    """Hex digest (computed for uploads; empty in plain listings)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileInfo:
        """Rebuild from :meth:`to_dict` output."""
        return cls(str(data["name"]), int(data["size"]), str(data.get("sha256", "")))


def safe_name(name: str) -> str:
    """Validate a relative file name; return it normalised, or raise UnsafeFileNameError."""
    if not isinstance(name, str) or not name.strip():
        raise UnsafeFileNameError("file name is empty; give a relative name such as 'data.csv'")
    if "\x00" in name:
        raise UnsafeFileNameError(f"file name {name!r} contains a NUL byte")
    if "\\" in name:
        raise UnsafeFileNameError(f"file name {name!r} contains a backslash; use '/'")
    path = PurePosixPath(name)
    if path.is_absolute():
        raise UnsafeFileNameError(f"file name {name!r} is absolute; give a name relative to the session")
    if any(part in ("..", "") for part in path.parts) or name.endswith("/"):
        raise UnsafeFileNameError(f"file name {name!r} leaves the session directory ('..')")
    return str(path)


def resolve_inside(root: Path, name: str) -> Path:
    """``root / name`` after checks, refusing anything that resolves outside ``root``
    (including through symlinks the kernel may have planted)."""
    rel = safe_name(name)
    root_real = root.resolve()
    target = (root_real / rel).resolve()
    if target != root_real and root_real not in target.parents:
        raise UnsafeFileNameError(f"file name {name!r} resolves outside the session directory")
    return target


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def store(root: Path, source: str | os.PathLike[str] | bytes, name: str | None,
          max_bytes: int) -> FileInfo:
    """Copy a host file (or bytes) into ``root`` under a safe name; return its info."""
    if isinstance(source, bytes):
        if name is None:
            raise UnsafeFileNameError("upload of bytes needs name=")
        if len(source) > max_bytes:
            raise FileTooLargeError(f"{name!r} is {len(source):,} bytes; limit is {max_bytes:,}")
        target = resolve_inside(root, name)
        _make_parents(root, target)
        _write_new(target, lambda f: f.write(source))
    else:
        src = Path(source)
        if not src.is_file():
            raise FileNotFoundError(f"no such file to upload: {src}")
        size = src.stat().st_size
        if size > max_bytes:
            raise FileTooLargeError(f"{src.name!r} is {size:,} bytes; limit is {max_bytes:,}")
        target = resolve_inside(root, name if name is not None else src.name)
        _make_parents(root, target)
        with open(src, "rb") as fin:
            _write_new(target, lambda f: shutil.copyfileobj(fin, f, _CHUNK))
    rel = target.relative_to(root.resolve()).as_posix()
    return FileInfo(rel, target.stat().st_size, sha256_file(target))


def _make_parents(root: Path, target: Path) -> None:
    """Make the directories between ``root`` and ``target``, never ``root`` itself: a
    session directory removed while an upload waited (the session was deleted) stays
    removed instead of coming back with the file in it."""
    root_real = root.resolve()
    try:
        fd = os.open(root_real, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise FileNotFoundError(f"the session directory {root} is gone (the session was deleted)") from None
    try:
        for part in target.parent.relative_to(root_real).parts:
            try:
                os.mkdir(part, dir_fd=fd)  # fails in a directory removed meanwhile
            except FileExistsError:
                pass
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def _write_new(target: Path, write: Any) -> None:
    # Replace, never write through: a symlink planted at the name is replaced, not followed.
    tmp = target.with_name(f".{target.name}.upload")
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, target)


def read(root: Path, name: str, max_bytes: int) -> bytes:
    """The bytes of a file in ``root`` (refusing unsafe names and files over the limit)."""
    target = resolve_inside(root, name)
    if not target.is_file():
        raise FileNotFoundError(f"no file named {name!r} in the session directory")
    size = target.stat().st_size
    if size > max_bytes:
        raise FileTooLargeError(f"{name!r} is {size:,} bytes; limit is {max_bytes:,}")
    return target.read_bytes()


def listing(root: Path, *, limit: int = 10_000) -> list[FileInfo]:
    """Regular files under ``root`` (recursively, hidden ones skipped), sorted by name."""
    found: list[FileInfo] = []
    root_real = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root_real, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in sorted(filenames):
            if fname.startswith("."):
                continue
            path = Path(dirpath) / fname
            if path.is_symlink() or not path.is_file():
                continue
            found.append(FileInfo(path.relative_to(root_real).as_posix(), path.stat().st_size))
            if len(found) >= limit:
                return found
    return found


def disk_usage(root: Path) -> int:
    """Bytes used by regular files under ``root`` (symlinks not followed)."""
    total = 0
    for dirpath, _, filenames in os.walk(root, followlinks=False):
        for fname in filenames:
            with_path = os.path.join(dirpath, fname)
            try:
                st = os.lstat(with_path)
            except OSError:
                continue
            total += st.st_blocks * 512
    return total
