"""Decide how to read a data file, from its bytes: format, compression, read options.

:func:`detect` returns a plan whose :meth:`code` is the loading cell: one plain pandas
call a reader can rerun, with each choice stated in a comment or in the plan's
``notes`` (shown above the cell). Formats: delimited text (CSV, TSV, semicolons,
pipes ...), Excel (``.xlsx`` with openpyxl, ``.xls`` with xlrd), Parquet (pyarrow), JSON
and JSON lines; any of them gzip-, bz2- or xz-compressed, or alone in a ZIP archive.
"""

from __future__ import annotations

from pathlib import Path

from ._delimited import LoadPlan, RaggedRows, detect_delimited
from ._formats import ExcelPlan, JsonPlan, ParquetPlan, detect_excel, detect_json, detect_parquet
from ._shape import TableShape
from ._source import sniff
from .exceptions import UnreadableFileError

__all__ = ["ExcelPlan", "JsonPlan", "LoadPlan", "ParquetPlan", "Plan", "RaggedRows", "TableShape", "detect"]

Plan = LoadPlan | ExcelPlan | ParquetPlan | JsonPlan
"""A loading plan of any format; all have ``file``, ``format``, ``notes``, ``dates``,
``utc_dates``, ``shape`` (:class:`TableShape`: the columns and dtypes the code makes, and the
rows where known cheaply), ``describe()``, ``code()`` (``compact=True``: without comments,
for a model's note) and ``to_dict()``."""


def detect(path: str | Path, *, name: str | None = None, sheet: str | None = None) -> Plan:
    """Decide how to read the table in the file at ``path``.

    ``name`` is the file name the loading cell uses (default: the file's own); ``sheet``
    picks an Excel sheet by name or 0-based position (default: the first with data).
    Raises :class:`UnreadableFileError` (a directory, an empty or corrupt file, a format
    that is not a table) or its subclass :class:`ReaderMissingError` (the format's reader
    is not installed); each message says what to do.
    """
    source, kind = sniff(Path(path))
    file = name or source.path.name
    if sheet is not None and kind not in ("xlsx", "xls", "ods"):
        raise UnreadableFileError(f"{source.path.name}: a sheet was chosen ({sheet!r}), but this is not an "
                                  "Excel workbook")
    if kind in ("xlsx", "xls", "ods"):
        return detect_excel(source, file, kind, sheet)
    if kind == "parquet":
        return detect_parquet(source, file)
    if kind in ("json", "jsonl"):
        return detect_json(source, file, kind)
    return detect_delimited(source, file)
