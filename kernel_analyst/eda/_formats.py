"""Loading plans for the binary and structured formats: Excel, Parquet, JSON.

Each detector opens the file on the host with the same reader the loading cell will use,
so a corrupt file fails here, with a clear message, before any kernel work; each plan
renders one plain pandas call (inside the lines that decompress, when needed). The
readers are optional extras: python-calamine for every Excel format (the engine pandas
recommends since xlrd's deprecation; it reads ``.xlsx``, ``.xls`` and ``.ods`` alike, so one
package instead of openpyxl + xlrd + odfpy) and pyarrow for Parquet.
"""

from __future__ import annotations

import importlib
import io
import json
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

from . import _values
from ._delimited import header_index, modal_width
from ._shape import TableShape
from ._source import STREAM_ERRORS, Source, reading_code
from .exceptions import ReaderMissingError, UnreadableFileError

_EXTRAS = {"python_calamine": "excel", "pyarrow": "parquet"}
_SAMPLE_RECORDS = 2000
_HEADER_ROWS = 30
_DATE_SAMPLE = 500


def _require(module: str, what: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        extra = _EXTRAS[module]
        raise ReaderMissingError(f"reading {what} needs {module}, which is not installed: "
                                 f"pip install 'kernel-analyst[{extra}]' (or pip install {module})") from exc


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# -- Excel --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _StoredTable:
    """What every reading plan of a non-text format records beside its own choices."""

    compression: str | None = None
    """``gzip``, ``bz2``, ``xz`` or ``zip`` when the file is compressed."""
    member: str | None = None
    """The file's name inside a ZIP archive."""
    notes: tuple[str, ...] = ()
    """Why each choice was made, for the reader."""
    dates: dict[str, str] = field(default_factory=dict)
    """Text columns converted to dates after reading: column -> format (Excel and
    Parquet store real dates, so theirs is empty)."""
    utc_dates: dict[str, str] = field(default_factory=dict)
    """Unused outside CSV (kept so every plan has the same date fields)."""
    shape: TableShape | None = None
    """The columns and dtypes the loading code makes (from a sample read the same way)
    and the row count where the file records it; None where they could not be read."""


@dataclass(frozen=True)
class ExcelPlan(_StoredTable):
    """How to read one sheet of an Excel workbook."""

    file: str
    """The file's name in the session."""
    kind: str
    """``xlsx``, ``xls`` or ``ods``, from the file's bytes."""
    sheet: str
    """The sheet profiled."""
    sheets: tuple[tuple[str, int, int], ...]
    """Every sheet: (name, rows, columns) as the workbook records them."""
    skiprows: int = 0
    """Rows above the header row (titles, notes)."""

    @property
    def format(self) -> str:
        """``xlsx``, ``xls`` or ``ods``."""
        return self.kind

    def describe(self) -> str:
        """One line on how the file is read, for the summary."""
        return (f"spreadsheet (.{self.kind}), {len(self.sheets)} sheet(s); sheet {self.sheet!r} profiled"
                + (f", {self.skiprows} row(s) above the header skipped" if self.skiprows else ""))

    def code(self, var: str = "df", path: str | None = None, *, compact: bool = False) -> str:
        """The loading cell: list the sheets, read one; ``compact``: only the read, one line."""
        skip = f", skiprows={self.skiprows}" if self.skiprows else ""
        if compact:
            call = [f"{var} = pd.read_excel({{src}}, sheet_name={self.sheet!r}{skip}, engine='calamine')"]
        else:
            call = ["with pd.ExcelFile({src}, engine='calamine') as book:",
                    "    print(f\"{len(book.sheet_names)} sheet(s): {book.sheet_names}\")",
                    f"    {var} = pd.read_excel(book, sheet_name={self.sheet!r}{skip})  # the sheet profiled"]
        return "\n".join(reading_code(path or self.file, self.compression, self.member, call, seekable=True,
                                       compact=compact))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "format": self.format}


def detect_excel(source: Source, name: str, kind: str, sheet: str | None) -> ExcelPlan:
    """Plan reading ``sheet`` (default: the first sheet with data) of a workbook."""
    _require("python_calamine", f"a .{kind} spreadsheet")
    calamine = importlib.import_module("python_calamine")
    data = _bytes(source)
    try:
        book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
        sheets = [(n, sheet_of.height, sheet_of.width)
                  for n in book.sheet_names for sheet_of in [book.get_sheet_by_name(n)]]
        chosen = _choose_sheet(source, sheets, sheet)
        top = book.get_sheet_by_name(chosen).to_python(skip_empty_area=False, nrows=_HEADER_ROWS)
    except UnreadableFileError:
        raise
    except Exception as exc:  # calamine raises its own error types for a damaged workbook
        raise UnreadableFileError(f"{source.path.name}: the spreadsheet cannot be read "
                                  f"({_first_line(exc)}); nothing was profiled") from exc
    rows = [["" if v is None or v == "" else str(v) for v in row] for row in top]
    skiprows = header_index(rows, modal_width([[c for c in r if c] for r in rows])) if rows else 0
    listed = "; ".join(f"`{n}` ({r:,} x {c:,})" for n, r, c in sheets)
    notes = [f"Spreadsheet (.{kind}, read with calamine); sheets: {listed}.",
             f"Profiled sheet: `{chosen}`" + (" (given with --sheet)." if sheet else " (the first with data; "
                                               "choose another with --sheet).")]
    if source.compression:
        notes.insert(0, f"Stored: {source.describe()}.")
    if skiprows:
        notes.append(f"Skipped {skiprows} row(s) above the header (titles or notes).")
    height = next(rows for n, rows, _ in sheets if n == chosen)
    return ExcelPlan(name, kind, chosen, tuple(sheets), skiprows, compression=source.compression,
                     member=source.member, notes=tuple(notes),
                     shape=_excel_shape(data, chosen, skiprows, max(height - skiprows - 1, 0)))


def _excel_shape(data: bytes, sheet: str, skiprows: int, rows: int) -> TableShape | None:
    """The columns of the first rows of the sheet, read as the loading cell reads it."""
    import pandas as pd

    try:
        sample = pd.read_excel(io.BytesIO(data), sheet_name=sheet, skiprows=skiprows, nrows=_SAMPLE_RECORDS,
                               engine="calamine")
    except Exception:  # the workbook opened above; a sample that fails leaves the shape unknown
        return None
    return TableShape.of_frame(sample, rows)


def _bytes(source: Source) -> bytes:
    try:
        with source.open() as f:
            return f.read()
    except STREAM_ERRORS as exc:
        raise UnreadableFileError(f"{source.path.name}: cannot be decompressed ({exc})") from exc


def _choose_sheet(source: Source, sheets: list[tuple[str, int, int]], sheet: str | None) -> str:
    names = [n for n, _, _ in sheets]
    if sheet is not None:
        if sheet in names:
            return sheet
        if sheet.isdigit() and int(sheet) < len(names):
            return names[int(sheet)]
        raise UnreadableFileError(f"{source.path.name}: no sheet {sheet!r}; the sheets are {names}")
    with_data = [n for n, rows, cols in sheets if rows > 1 or cols > 1]
    if not with_data:
        raise UnreadableFileError(f"{source.path.name}: every sheet of the workbook is empty ({names})")
    return with_data[0]


# -- Parquet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParquetPlan(_StoredTable):
    """How to read a Parquet file."""

    file: str
    """The file's name in the session."""
    rows: int
    """Rows, from the file's footer."""
    columns: int
    """Columns, from the file's footer."""

    @property
    def format(self) -> str:
        """``parquet``."""
        return "parquet"

    def describe(self) -> str:
        """One line on how the file is read, for the summary."""
        return f"Parquet, {self.rows:,} rows x {self.columns:,} columns in the footer"

    def code(self, var: str = "df", path: str | None = None, *, compact: bool = False) -> str:
        """The loading cell: one ``pd.read_parquet`` call (``compact``: without the comment)."""
        comment = "" if compact else "  # column types come from the file"
        call = [f"{var} = pd.read_parquet({{src}}, engine='pyarrow'){comment}"]
        return "\n".join(reading_code(path or self.file, self.compression, self.member, call, seekable=True,
                                       compact=compact))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "format": self.format}


def detect_parquet(source: Source, name: str) -> ParquetPlan:
    """Plan reading a Parquet file; its footer is read (and checked) on the host."""
    _require("pyarrow", "a Parquet file")
    import pyarrow.parquet as pq

    try:
        with source.open() as f:
            meta = pq.ParquetFile(io.BytesIO(f.read()) if source.compression else f).metadata
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for damaged files
        raise UnreadableFileError(f"{source.path.name}: the Parquet file cannot be read "
                                  f"({_first_line(exc)}); nothing was profiled") from exc
    notes = [f"Parquet file: {meta.num_rows:,} rows x {meta.num_columns:,} columns in "
             f"{meta.num_row_groups} row group(s), written by {meta.created_by or 'an unknown writer'}; "
             "column types come from the file."]
    if source.compression:
        notes.insert(0, f"Stored: {source.describe()}.")
    return ParquetPlan(name, meta.num_rows, meta.num_columns, compression=source.compression,
                       member=source.member, notes=tuple(notes),
                       shape=_parquet_shape(meta.schema.to_arrow_schema(), meta.num_rows))


def _parquet_shape(arrow_schema: Any, rows: int) -> TableShape | None:
    """The columns of a Parquet file with the dtypes ``pd.read_parquet`` gives them (an
    empty table of the file's schema, converted the same way)."""
    try:
        return TableShape.of_frame(arrow_schema.empty_table().to_pandas(), rows)
    except Exception:  # an Arrow type pandas cannot take: the shape stays unknown
        return None


def _without_comment(line: str) -> str:
    """A line of generated code without its trailing ``  # comment`` (our own comments
    follow two spaces and a hash, outside any string)."""
    code, sep, _ = line.partition("  # ")
    return code.rstrip() if sep and code.count("'") % 2 == 0 and code.count('"') % 2 == 0 else line


# -- JSON -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonPlan(_StoredTable):
    """How to read a JSON document or JSON lines into a table."""

    file: str
    """The file's name in the session."""
    lines: bool
    """JSON lines (one object per line) rather than one document."""
    layout: str
    """``records`` (a list of objects), ``columns`` (an object of columns) or ``rows`` (lists)."""
    record_path: str | None = None
    """The key holding the list of records (``{"data": [...]}``), if any."""
    nested: bool = False
    """Records hold objects: flattened into ``a.b`` columns with ``pd.json_normalize``."""

    @property
    def format(self) -> str:
        """``json`` or ``jsonl``."""
        return "jsonl" if self.lines else "json"

    def describe(self) -> str:
        """One line on how the file is read, for the summary."""
        where = f" under key {self.record_path!r}" if self.record_path else ""
        return (f"{'JSON lines' if self.lines else 'JSON'} ({self.layout}{where}"
                + (", nested objects flattened" if self.nested else "") + ")")

    def code(self, var: str = "df", path: str | None = None, *, compact: bool = False) -> str:
        """The loading cell: parse, then make a table; text dates converted when every value
        parses (``compact``: the same code without its comments)."""
        if self.lines and not self.nested:
            call = [f"{var} = pd.read_json({{src}}, lines=True, dtype=False)"
                    "  # JSON types kept; dates below"]
            lines = reading_code(path or self.file, self.compression, self.member, call, compact=compact)
        else:
            lines = [*self._parse_lines(path or self.file), self._table_line(var)]
        lines += self._date_lines(var)
        return "\n".join(_without_comment(line) for line in lines) if compact else "\n".join(lines)

    def _parse_lines(self, file: str) -> list[str]:
        parse = ("records = [json.loads(line) for line in f if line.strip()]" if self.lines
                 else "records = json.load(f)")
        if self.compression is None:
            return ["import json", "", f"with open({file!r}, 'rb') as f:", f"    {parse}"]
        opened = reading_code(file, self.compression, self.member, [parse])
        return ["import json", *opened]

    def _table_line(self, var: str) -> str:
        data = f"records[{self.record_path!r}]" if self.record_path else "records"
        if self.layout == "records":
            comment = "  # nested objects become `a.b` columns" if self.nested else ""
            return f"{var} = pd.json_normalize({data}){comment}"
        if self.layout == "rows":
            return f"{var} = pd.DataFrame({data}[1:], columns={data}[0])  # the first row names the columns"
        return f"{var} = pd.DataFrame({data})  # an object of columns"

    def _date_lines(self, var: str) -> list[str]:
        if not self.dates:
            return []
        return [f"for col, fmt in {self.dates!r}.items():  # text columns that look like dates in a sample",
                "    parsed = pd.to_datetime(" f"{var}[col], format=fmt, errors='coerce')",
                f"    if parsed.notna().sum() == {var}[col].notna().sum():  # only when every value parses",
                f"        {var}[col] = parsed"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "format": self.format}


def detect_json(source: Source, name: str, kind: str) -> JsonPlan:
    """Plan reading JSON (``kind`` ``json``) or JSON lines (``jsonl``)."""
    lines = kind == "jsonl"
    try:
        sample = _jsonl_sample(source) if lines else _json_document(source)
    except (json.JSONDecodeError, UnicodeDecodeError, *STREAM_ERRORS) as exc:
        raise UnreadableFileError(f"{source.path.name}: not valid JSON{' lines' if lines else ''} "
                                  f"({_first_line(exc)}); nothing was profiled") from exc
    layout, record_path, records = _layout(source, sample)
    nested = layout == "records" and any(isinstance(v, dict) for r in records[:_SAMPLE_RECORDS]
                                         if isinstance(r, dict) for v in r.values())
    notes = [f"{'JSON lines' if lines else 'JSON document'}: " + _layout_note(layout, record_path, nested)]
    if source.compression:
        notes.insert(0, f"Stored: {source.describe()}.")
    frame = _json_frame(records, layout)
    dates = _json_dates(frame)
    if dates:
        listed = ", ".join(f"`{c}` ({f})" for c, f in dates.items())
        notes.append(f"Text columns that look like dates: {listed}; converted only when every value parses.")
    rows = None if lines else _json_rows(sample, layout, record_path, records)
    return JsonPlan(name, lines, layout, record_path, nested, compression=source.compression,
                    member=source.member, notes=tuple(notes), dates=dates,
                    shape=_json_shape(frame, dates, rows))


def _json_rows(doc: Any, layout: str, record_path: str | None, records: list[Any]) -> int | None:
    """Rows of a whole JSON document (JSON lines are only sampled: None)."""
    if layout == "records":
        return len(doc[record_path] if record_path else doc)
    if layout == "rows":
        return max(len(doc) - 1, 0)
    return len(records) if len(records) < _SAMPLE_RECORDS else None


def _json_shape(frame: Any, dates: dict[str, str], rows: int | None) -> TableShape:
    columns = [(str(c), "datetime64[ns]" if str(c) in dates else str(dtype))
               for c, dtype in frame.dtypes.items()]
    return TableShape(tuple(columns), rows)


def _json_document(source: Source) -> Any:
    with source.open() as f:
        return json.load(f)


def _jsonl_sample(source: Source) -> list[Any]:
    with source.open() as f:
        rows = [json.loads(line) for line in islice((ln for ln in f if ln.strip()), _SAMPLE_RECORDS)]
    if not all(isinstance(r, dict) for r in rows):
        raise UnreadableFileError(f"{source.path.name}: JSON lines whose lines are not all objects")
    return rows


def _layout(source: Source, doc: Any) -> tuple[str, str | None, list[Any]]:
    if isinstance(doc, list) and doc and all(isinstance(r, dict) for r in doc[:_SAMPLE_RECORDS]):
        return "records", None, doc
    if isinstance(doc, list) and len(doc) > 1 and all(isinstance(r, list) for r in doc[:_SAMPLE_RECORDS]):
        return "rows", None, [dict(zip(map(str, doc[0]), r, strict=False)) for r in doc[1:_SAMPLE_RECORDS]]
    if isinstance(doc, dict):
        lists = {k: v for k, v in doc.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
        if lists:
            key = max(lists, key=lambda k: len(lists[k]))
            return "records", key, lists[key]
        if doc and all(isinstance(v, (list, dict)) for v in doc.values()):
            return "columns", None, _column_records(doc)
    raise UnreadableFileError(f"{source.path.name}: a JSON document that is not a table (expected a list "
                              "of objects, an object holding one, or an object of columns)")


def _column_records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    columns = {k: (list(v.values()) if isinstance(v, dict) else v) for k, v in doc.items()}
    length = min(len(v) for v in columns.values())
    return [{k: v[i] for k, v in columns.items()} for i in range(min(length, _SAMPLE_RECORDS))]


def _layout_note(layout: str, record_path: str | None, nested: bool) -> str:
    where = f"the records under key `{record_path}`" if record_path else {
        "records": "a list of records", "columns": "an object of columns",
        "rows": "a list of rows, the first naming the columns"}[layout]
    flat = " Nested objects are flattened into `a.b` columns (pd.json_normalize)." if nested else ""
    return f"{where}; JSON types are kept as they are.{flat}"


def _json_frame(records: list[Any], layout: str) -> Any:
    """A sample of the table the loading code makes."""
    import pandas as pd

    return pd.json_normalize(records[:_SAMPLE_RECORDS]) if layout == "records" else pd.DataFrame(records)


def _json_dates(frame: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for col in frame.columns:
        values = frame[col].dropna()
        if values.empty or not all(isinstance(v, str) for v in values):
            continue
        guess = _values.date_format([str(v) for v in values.unique()[:_DATE_SAMPLE]])
        if guess is not None and not guess.utc:
            found[str(col)] = guess.format
    return found
