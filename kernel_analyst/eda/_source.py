"""What a data file is, from its bytes: compression, archive member, table format.

:func:`sniff` looks at magic numbers, not at the file's name, so ``data.csv`` that is
really gzip-compressed, or an ``.xlsx`` renamed ``.dat``, is read correctly. A
:class:`Source` opens the decompressed bytes for the detectors, and renders the lines that
open the same bytes in the loading cell.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from .exceptions import UnreadableFileError

Compression = Literal["gzip", "bz2", "xz", "zip"]
Format = Literal["text", "parquet", "xlsx", "xls", "ods", "json", "jsonl"]

HEAD_BYTES = 64_000
_COMPRESSION_MAGIC: tuple[tuple[bytes, Compression], ...] = (
    (b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"))
_FOREIGN_MAGIC = ((b"%PDF", "a PDF document"), (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
                  (b"SQLite format 3", "an SQLite database"), (b"7z\xbc\xaf", "a 7-Zip archive"),
                  (b"Rar!", "a RAR archive"))
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ARCHIVE_NOISE = ("__MACOSX/", ".DS_Store")
# What each decompressor raises on corrupt or cut-short input.
STREAM_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, ValueError)


@dataclass(frozen=True)
class Source:
    """A file on the host and how to reach its table's bytes."""

    path: Path
    """The file on the host."""
    compression: Compression | None = None
    """How the bytes are compressed (None: as they are)."""
    member: str | None = None
    """The file inside a ZIP archive."""

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        """The decompressed bytes, as a binary file."""
        if self.compression == "zip":
            with zipfile.ZipFile(self.path) as archive, archive.open(str(self.member)) as f:
                yield f
            return
        openers: dict[str | None, Callable[[Path, str], IO[bytes]]] = {
            "gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open, None: open}  # type: ignore[dict-item]
        with openers[self.compression](self.path, "rb") as f:
            yield f

    def head(self, size: int = HEAD_BYTES) -> bytes:
        """The first ``size`` decompressed bytes (a clear error when the stream is corrupt)."""
        try:
            with self.open() as f:
                return f.read(size)
        except STREAM_ERRORS as exc:
            raise UnreadableFileError(f"{self.path.name}: {self.describe()} but cannot be "
                                      f"decompressed ({exc})") from exc

    def describe(self) -> str:
        """How the table is stored, for the notes above the loading cell."""
        if self.compression == "zip":
            return f"a ZIP archive holding `{self.member}`"
        if self.compression:
            return f"{self.compression}-compressed (detected from the bytes)"
        return "not compressed"

    def check_stream(self) -> None:
        """Decompress the whole stream once: corrupt or truncated archives fail here, on the host."""
        if self.compression is None:
            return
        try:
            with self.open() as f:
                while f.read(1 << 20):
                    pass
        except STREAM_ERRORS as exc:
            raise UnreadableFileError(f"{self.path.name}: the {self.compression} data is corrupt or cut "
                                      f"short ({exc}); nothing was profiled") from exc


def sniff(path: Path) -> tuple[Source, Format]:
    """Where the table's bytes are and what format they are in.

    Raises :class:`UnreadableFileError` for directories, empty files, archives with no
    or several tables, and formats that are not tables (PDF, images, databases).
    """
    if path.is_dir():
        raise UnreadableFileError(f"{path}: is a directory; give one data file (CSV, Excel, Parquet, "
                                  "JSON), not a folder")
    if not path.is_file():
        raise UnreadableFileError(f"{path}: no such file")
    with open(path, "rb") as f:
        raw = f.read(HEAD_BYTES)
    if not raw:
        raise UnreadableFileError(f"{path.name}: the file is empty")
    compression = next((kind for magic, kind in _COMPRESSION_MAGIC if raw.startswith(magic)), None)
    if compression == "zip":
        return _zip_source(path)
    source = Source(path, compression)
    head = source.head() if compression else raw
    if not head:
        raise UnreadableFileError(f"{path.name}: the file is empty once decompressed")
    return source, _format(path, source, head)


def _zip_source(path: Path) -> tuple[Source, Format]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except STREAM_ERRORS as exc:
        raise UnreadableFileError(f"{path.name}: a ZIP archive that cannot be opened ({exc})") from exc
    if (kind := _workbook_kind(names)) is not None:
        return Source(path), kind
    tables = [n for n in names if not n.endswith("/") and not n.startswith(_ARCHIVE_NOISE)
              and not n.rsplit("/", 1)[-1].startswith(".")]
    if not tables:
        raise UnreadableFileError(f"{path.name}: the ZIP archive holds no file")
    if len(tables) > 1:
        shown = ", ".join(tables[:5]) + (" ..." if len(tables) > 5 else "")
        raise UnreadableFileError(f"{path.name}: the ZIP archive holds {len(tables)} files ({shown}); "
                                  "extract the table you want and profile that file")
    source = Source(path, "zip", tables[0])
    return source, _format(path, source, source.head())


def _workbook_kind(names: list[str]) -> Format | None:
    if "xl/workbook.xml" in names:
        return "xlsx"
    if "content.xml" in names and "mimetype" in names:
        return "ods"
    return None


def _format(path: Path, source: Source, head: bytes) -> Format:
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(_OLE2):
        return "xls"
    if head.startswith(b"PK\x03\x04") and (kind := _compressed_workbook(source)) is not None:
        return kind
    if head.startswith((b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")):
        raise UnreadableFileError(f"{path.name}: an archive inside an archive; extract the table first")
    for magic, what in _FOREIGN_MAGIC:
        if head.startswith(magic):
            raise UnreadableFileError(f"{path.name}: this is {what}, not a table")
    return _json_kind(head) or "text"


def _compressed_workbook(source: Source) -> Format | None:
    """An .xlsx / .ods inside gzip or a ZIP archive (a workbook is itself a ZIP archive)."""
    try:
        with source.open() as f, zipfile.ZipFile(io.BytesIO(f.read())) as inner:
            return _workbook_kind(inner.namelist())
    except STREAM_ERRORS:
        return None


def _json_kind(head: bytes) -> Literal["json", "jsonl"] | None:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        return "json"
    if not text.startswith("{"):
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        json.loads(lines[0])
    except ValueError:
        return "json"  # one document spread over many lines
    return "jsonl" if len(lines) > 1 and lines[1].lstrip().startswith("{") else "json"


_MODULES = {"gzip": "gzip", "bz2": "bz2", "xz": "lzma", "zip": "zipfile"}


def reading_code(file: str, compression: str | None, member: str | None, call: list[str], *,
                 seekable: bool = False, compact: bool = False) -> list[str]:
    """The loading cell's lines: ``call`` (a reader call whose first argument is ``{src}``),
    preceded by the lines that open a compressed file. ``seekable``: the reader needs
    random access (Parquet, Excel), so the decompressed bytes go into memory first;
    ``compact``: without the comments (for a model's note)."""
    if compression is None:
        return [line.replace("{src}", repr(file)) for line in call]
    module = _MODULES[compression]
    lines = [f"import {module}"] + (["import io"] if seekable else [])
    if compression == "zip":
        lines.append(f"with zipfile.ZipFile({file!r}) as archive, archive.open({member!r}) as f:"
                     + ("" if compact else "  # a ZIP archive holding one table"))
    else:
        lines.append(f"with {module}.open({file!r}) as f:"
                     + ("" if compact else f"  # {compression}-compressed (detected from the bytes)"))
    if seekable:
        note = "" if compact else "  # the reader needs random access"
        lines.append(f"    data = io.BytesIO(f.read()){note}")
        return lines + [line.replace("{src}", "data") for line in call]
    return lines + ["    " + line.replace("{src}", "f") for line in call]
