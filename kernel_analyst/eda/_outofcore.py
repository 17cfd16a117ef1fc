"""Files bigger than a kernel's memory: when to profile out of core, and how DuckDB reads them.

The pandas playbook loads the whole table; a file whose bytes exceed a safe share of the
kernel's memory limit (:data:`LARGE_SHARE`: a data frame takes several times its CSV size,
and profiling copies columns) is profiled by DuckDB inside the same kernel instead: every
statistic is a SQL aggregate over the file, streamed in bounded memory (DuckDB's own
``memory_limit``, set below the kernel's limit, spilling to the working directory), so
nothing holds the table. DuckDB was chosen because it reads CSV, Parquet and JSON in
parallel with that bounded memory, has exact aggregates (``count(DISTINCT)``, ``corr``,
``quantile_cont``) beside approximate ones (``approx_count_distinct``, ``approx_quantile``),
and returns results as pandas frames, so the report's plots stay matplotlib.

:func:`choose_engine` decides on the host; :func:`load_code` writes the loading cell: one
``CREATE VIEW data AS SELECT ... FROM read_csv(...)`` whose every option comes from the
same :class:`~kernel_analyst.eda.loader.Plan` the pandas loading cell would use.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._cells_large import LOAD_PASS
from ._delimited import LoadPlan
from ._formats import ExcelPlan, JsonPlan, ParquetPlan

ENGINES: tuple[str, ...] = ("auto", "pandas", "duckdb")
"""Values of ``PlaybookOptions.engine``: ``auto`` picks DuckDB for files over the threshold."""

LARGE_SHARE = 0.125
"""Files over this share of the kernel's memory limit are profiled out of core: pandas
holds a CSV in 2-8 times its size (text columns are Python strings), and the playbook's
steps copy columns on top of that."""

DUCKDB_SHARE = 0.5
"""DuckDB's ``memory_limit`` as a share of the kernel's: the rest is the Python process,
pandas frames of aggregates and the sample, matplotlib, and DuckDB's own allocations
outside its buffer pool."""

_COMPRESSED_FACTOR = 5
"""A compressed file's text is taken to be this many times its size (gzip on CSV)."""
# pandas' default missing-value spellings (pandas.io.parsers' STR_NA_VALUES): DuckDB is
# told the same ones, so a column has the same missing cells under both engines.
PANDAS_NA = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
             "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")
_ENCODINGS = {"utf-8": "utf-8", "utf-8-sig": "utf-8", "ascii": "utf-8", "latin-1": "latin-1",
              "iso-8859-1": "latin-1", "utf-16": "utf-16", "utf-16-le": "utf-16", "utf-16-be": "utf-16"}


@dataclass(frozen=True)
class EngineChoice:
    """Which engine profiles a file, and why."""

    engine: str
    """``pandas`` or ``duckdb``."""
    reason: str
    """One sentence for the loading notes."""
    duckdb_memory_mb: int | None = None
    """DuckDB's ``memory_limit`` in MiB (None: DuckDB's default, 80% of the machine)."""


def over_pandas_share(size: int, memory_mb: int | None) -> bool:
    """True when ``size`` bytes of table are more than pandas should load in a kernel of
    ``memory_mb`` (:data:`LARGE_SHARE` of it); never without a memory limit."""
    return bool(memory_mb) and size > LARGE_SHARE * (memory_mb or 0) * 2**20


def text_bytes(path: Path, plan: Any) -> int:
    """About how many bytes of table the file holds (compressed files count several times)."""
    size = path.stat().st_size
    return size * _COMPRESSED_FACTOR if getattr(plan, "compression", None) else size


def choose_engine(plan: Any, *, path: Path, memory_mb: int | None, engine: str = "auto",
                  threshold_bytes: int | None = None) -> EngineChoice:
    """The engine for ``plan`` (read from ``path``) in a kernel limited to ``memory_mb``.

    ``engine`` forces one (``pandas`` / ``duckdb``); ``auto`` uses DuckDB when the file is
    over ``threshold_bytes`` (default :data:`LARGE_SHARE` of ``memory_mb``, or of 8 GiB
    when the kernel has no limit) and DuckDB can read it the way the plan says.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    duck_mb = max(64, int(memory_mb * DUCKDB_SHARE)) if memory_mb else None
    size = text_bytes(path, plan)
    limit = threshold_bytes if threshold_bytes is not None else int(LARGE_SHARE * (memory_mb or 8192) * 2**20)
    if engine == "pandas" or (engine == "auto" and size <= limit):
        return EngineChoice("pandas", "")
    why_not = unsupported(plan)
    if why_not is not None:
        if engine == "duckdb":
            raise ValueError(f"{plan.file}: the out-of-core engine cannot read it: {why_not}")
        return EngineChoice("pandas", f"The file is large ({size / 2**20:,.0f} MiB) but is loaded with "
                                      f"pandas: DuckDB cannot read it as planned ({why_not}).")
    kernel = f"the kernel's {memory_mb:,} MiB memory limit" if memory_mb else "this machine (no kernel limit)"
    reason = (f"**Out of core:** the file ({size / 2**20:,.0f} MiB of text) is over {limit / 2**20:,.0f} MiB "
              f"({LARGE_SHARE:.1%} of {kernel}), so it is not loaded into pandas: DuckDB reads it in "
              "bounded memory" + (f" (at most {duck_mb:,} MiB)" if duck_mb else "")
              + " and every statistic below is a query over the whole file, unless it says otherwise.")
    if engine == "duckdb" and size <= limit:
        reason = ("**Out of core** (asked for): DuckDB reads the file in bounded memory"
                  + (f" (at most {duck_mb:,} MiB)" if duck_mb else "") + "; it is not loaded into pandas.")
    return EngineChoice("duckdb", reason, duck_mb)


def unsupported(plan: Any) -> str | None:
    """Why DuckDB cannot read the file exactly as the plan says (None when it can)."""
    if isinstance(plan, ExcelPlan):
        return "a spreadsheet (read whole by its reader)"
    if isinstance(plan, ParquetPlan):
        return None if plan.compression is None else "a Parquet file inside an archive"
    if isinstance(plan, JsonPlan):
        return None
    if not isinstance(plan, LoadPlan):
        return "an unknown format"
    if plan.encoding.lower() not in _ENCODINGS:
        return f"encoding {plan.encoding} (DuckDB reads UTF-8, UTF-16 and Latin-1)"
    if plan.thousands:
        return "numbers with a thousands separator"
    if plan.skipinitialspace:
        return "spaces after the delimiter"
    return None


# -- the loading cell ------------------------------------------------------------------------


def load_code(plan: Any, choice: EngineChoice, names: list[str] | None = None) -> str:
    """The out-of-core loading cell: DuckDB's settings, then the view ``data`` over the file.

    ``names`` are the columns as pandas names them (delimited text), so both engines
    report the same names."""
    lines = ["con = duckdb.connect()  # in memory; nothing is loaded: each query streams the file"]
    if choice.duckdb_memory_mb:
        lines.append(f"con.execute(\"SET memory_limit = '{choice.duckdb_memory_mb}MB'\")  "
                     f"# {DUCKDB_SHARE:.0%} of the kernel's memory limit")
    lines += ["con.execute(\"SET temp_directory = '.duckdb-spill'\")  # large aggregates spill here",
              "con.execute(\"SET preserve_insertion_order = true\")  # results in file order"]
    file, opened = _readable_file(plan)
    lines += opened
    lines.append(f"source_bytes = os.path.getsize({file!r})")
    lines.append(f"source = {_source(plan, file, names)!r}")
    lines.append(f"select = {_select(plan, names)!r}")
    lines.append(f"file_name = {plan.file!r}")
    lines.append(LOAD_PASS)
    return "\n".join(lines)


def _readable_file(plan: Any) -> tuple[str, list[str]]:
    """The file DuckDB reads, and the lines that make it readable (bz2/xz/ZIP: decompressed
    to a hidden file in the working directory first; gzip DuckDB reads itself)."""
    compression = getattr(plan, "compression", None)
    if compression in (None, "gzip"):
        return plan.file, []
    target = f".{Path(plan.file).name}.decompressed"
    if compression == "zip":
        opener = f"zipfile.ZipFile({plan.file!r}).open({plan.member!r})"
        module = "zipfile"
    else:
        module = {"bz2": "bz2", "xz": "lzma"}[compression]
        opener = f"{module}.open({plan.file!r})"
    return target, [f"import {module}, shutil",
                    f"with {opener} as packed, open({target!r}, 'wb') as unpacked:  "
                    f"# DuckDB reads no {compression}: decompressed once, streamed",
                    "    shutil.copyfileobj(packed, unpacked, 1 << 20)"]


def _source(plan: Any, file: str, names: list[str] | None) -> str:
    if isinstance(plan, ParquetPlan):
        return f"read_parquet({_lit(file)})"
    if isinstance(plan, JsonPlan):
        fmt = "newline_delimited" if plan.lines else "array"
        return f"read_json({_lit(file)}, format='{fmt}', types={{}})"
    return _csv_source(plan, file, names)


def _csv_source(plan: LoadPlan, file: str, names: list[str] | None) -> str:
    na = sorted({*PANDAS_NA, *(m for markers in plan.na_values.values() for m in markers)})
    text = {c: "VARCHAR" for c in (*plan.text_columns, *plan.dates, *plan.utc_dates)}
    options = [_lit(file), f"delim={_lit(plan.sep)}", f"encoding='{_ENCODINGS[plan.encoding.lower()]}'",
               "quote='\"'", "escape='\"'", f"nullstr=[{', '.join(_lit(v) for v in na)}]",
               "auto_type_candidates=['BOOLEAN', 'BIGINT', 'DOUBLE', 'VARCHAR']",
               "types={" + ", ".join(f"{_lit(c)}: '{t}'" for c, t in text.items()) + "}"]
    skip = plan.skiprows + (plan.header_lines if plan.header is not None else 0)
    options.append("header=false")
    if skip:
        options.append(f"skip={skip}")
    all_names = list(plan.names) if plan.names is not None else names
    if all_names:
        options.append("names=[" + ", ".join(_lit(n) for n in all_names) + "]")
    if plan.decimal != ".":
        options.append(f"decimal_separator={_lit(plan.decimal)}")
    if plan.comment:
        options.append(f"comment={_lit(plan.comment)}")
    if plan.ragged is not None:
        options.append("null_padding=true")  # shorter rows: missing cells, as pandas reads them
    if plan.compression == "gzip":
        options.append("compression='gzip'")
    return "read_csv(" + ", ".join(options) + ")"


def _select(plan: Any, names: list[str] | None) -> str:
    """The view's columns: ``*``, with dates parsed the way the plan found them (and without
    the row-number column pandas would make the index)."""
    dates = {**getattr(plan, "dates", {}), **getattr(plan, "utc_dates", {})}
    utc = set(getattr(plan, "utc_dates", {}))
    star = "*"
    if getattr(plan, "index_col", None) == 0 and names:
        star = f"* EXCLUDE ({_ident(names[0])})"
    if not dates:
        return star
    parts = []
    for col, fmt in dates.items():
        ident = _ident(col)
        if fmt == "ISO8601":
            # Year and month alone ("1996-04") is ISO 8601 to pandas, not to DuckDB's cast; and
            # DuckDB 2.0 pushes a lone TRY_CAST into the CSV reader as a strict cast, which
            # fails the whole read on such a value: the COALESCE keeps the cast in the view.
            expr = (f"timezone('UTC', TRY_CAST({ident} AS TIMESTAMPTZ))" if col in utc
                    else f"COALESCE(TRY_CAST({ident} AS TIMESTAMP), try_strptime({ident}, '%Y-%m'))")
        else:
            expr = f"try_strptime({ident}, {_lit(fmt)})"
        parts.append(f"{expr} AS {ident}")
    return f"{star} REPLACE (" + ", ".join(parts) + ")"


def _lit(value: str) -> str:
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def _ident(name: str) -> str:
    """A SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def pandas_names(plan: LoadPlan, source: Any) -> list[str] | None:
    """The columns as pandas names them, every field included (a row-number column that
    pandas would make the index is dropped by the view instead)."""
    import pandas as pd

    if plan.names is not None:
        return None
    kwargs = {**plan.read_csv_kwargs(), "nrows": 0}
    kwargs.pop("index_col", None)
    try:
        with source.open() as f:
            frame = pd.read_csv(f, **kwargs)
    except Exception:  # the sample was read before with these options; DuckDB's names then
        return None
    return [str(c) for c in frame.columns]


__all__ = ["DUCKDB_SHARE", "ENGINES", "LARGE_SHARE", "EngineChoice", "choose_engine", "load_code",
           "over_pandas_share", "pandas_names", "text_bytes", "unsupported"]
