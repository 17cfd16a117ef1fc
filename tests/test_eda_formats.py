"""Every supported format, plain and compressed, detected from its bytes; corrupt files of
each kind get a clear error, and the CLI writes nothing for them (no kernel needed)."""

from __future__ import annotations

import bz2
import gzip
import importlib
import io
import json
import lzma
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kernel_analyst import cli
from kernel_analyst.eda import JsonPlan, ReaderMissingError, UnreadableFileError, detect

from .conftest import ROOT

DATA = ROOT / "tests" / "data"


def _table() -> pd.DataFrame:
    return pd.DataFrame({"city": ["Oslo", "Lima", "Pune", "Oslo"], "visits": [3, 8, 1, 5],
                         "share": [0.25, 0.5, 0.125, 0.125]})


def _load(path: Path, **kwargs: Any) -> tuple[Any, pd.DataFrame]:
    plan = detect(path, **kwargs)
    namespace: dict[str, Any] = {"pd": pd}
    exec(plan.code(path=str(path)), namespace)  # the loading cell, as the kernel runs it
    return plan, namespace["df"]


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def _parquet(df: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    df.to_parquet(buffer)
    return buffer.getvalue()


def _xlsx(df: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        pd.DataFrame({"note": ["made-up data"]}).head(0).to_excel(writer, sheet_name="Empty", index=False)
        df.to_excel(writer, sheet_name="Data", index=False)
        df.head(2).to_excel(writer, sheet_name="Other", index=False)
    return buffer.getvalue()


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))  # type: ignore[no-any-return]


def _zip(name: str) -> Callable[[bytes], bytes]:
    def pack(data: bytes) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr(name, data)
            archive.writestr("__MACOSX/._" + name, b"resource fork")  # ignored
        return buffer.getvalue()
    return pack


PLAIN: dict[str, Callable[[pd.DataFrame], bytes]] = {
    "t.csv": _csv,
    "t.tsv": lambda df: df.to_csv(index=False, sep="\t").encode(),
    "t.parquet": _parquet,
    "t.xlsx": _xlsx,
    "t.json": lambda df: json.dumps(_records(df)).encode(),
    "t.jsonl": lambda df: "\n".join(json.dumps(r) for r in _records(df)).encode() + b"\n",
}
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}
EXPECTED_FORMAT = {"t.csv": "text", "t.tsv": "text", "t.parquet": "parquet", "t.xlsx": "xlsx",
                   "t.json": "json", "t.jsonl": "jsonl"}


@pytest.mark.parametrize("name", sorted(PLAIN))
@pytest.mark.parametrize("packing", ["", ".gz", ".bz2", ".xz", ".zip"])
def test_every_format_plain_and_compressed_reads_back(tmp_path: Path, name: str, packing: str) -> None:
    df = _table()
    data = PLAIN[name](df)
    data = _zip(name)(data) if packing == ".zip" else COMPRESS[packing](data) if packing else data
    path = tmp_path / f"{name}{packing}"
    path.write_bytes(data)
    plan, loaded = _load(path)
    assert plan.format == EXPECTED_FORMAT[name]
    assert plan.compression == ({".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zip": "zip"}.get(packing))
    pd.testing.assert_frame_equal(loaded.reset_index(drop=True), df, check_dtype=False)
    if packing:
        assert any("Stored:" in note for note in plan.notes), plan.notes


def test_the_bytes_decide_not_the_name(tmp_path: Path) -> None:
    (tmp_path / "really-gzip.csv").write_bytes(gzip.compress(_csv(_table())))
    plan, df = _load(tmp_path / "really-gzip.csv")
    assert plan.compression == "gzip" and "gzip.open('really-gzip.csv')" in plan.code()
    (tmp_path / "workbook.dat").write_bytes(_xlsx(_table()))
    plan, df = _load(tmp_path / "workbook.dat")
    assert plan.format == "xlsx" and df.shape == (4, 3)


def test_excel_lists_every_sheet_and_takes_the_first_with_data_or_the_chosen_one(tmp_path: Path) -> None:
    path = tmp_path / "book.xlsx"
    path.write_bytes(_xlsx(_table()))
    plan, df = _load(path)
    assert plan.sheet == "Data" and [s[0] for s in plan.sheets] == ["Empty", "Data", "Other"]
    assert "`Empty`" in plan.notes[0] and "`Other`" in plan.notes[0]
    assert "sheet_names" in plan.code()
    plan, df = _load(path, sheet="Other")
    assert plan.sheet == "Other" and len(df) == 2
    with pytest.raises(UnreadableFileError, match=r"no sheet 'Nope'.*Empty"):
        detect(path, sheet="Nope")
    with pytest.raises(UnreadableFileError, match="not an Excel workbook"):
        detect(_write(tmp_path / "x.csv", b"a\n1\n"), sheet="Data")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_old_excel_xls(tmp_path: Path) -> None:
    plan, df = _load(DATA / "sales.xls")
    assert plan.format == "xls" and plan.sheet == "Sales"
    assert list(df.columns) == ["region", "units", "price", "sold_on"] and len(df) == 5
    assert str(df["sold_on"].dtype).startswith("datetime64")


def _ods(rows: list[list[Any]]) -> bytes:
    """A minimal OpenDocument spreadsheet, written by hand (no writer package needed)."""
    def cell(v: Any) -> str:
        if isinstance(v, (int, float)):
            return (f'<table:table-cell office:value-type="float" office:value="{v}">'
                    f"<text:p>{v}</text:p></table:table-cell>")
        return f'<table:table-cell office:value-type="string"><text:p>{v}</text:p></table:table-cell>'
    body = "".join("<table:table-row>" + "".join(map(cell, r)) + "</table:table-row>" for r in rows)
    content = ('<?xml version="1.0" encoding="UTF-8"?><office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
               f'<office:body><office:spreadsheet><table:table table:name="Data">{body}</table:table>'
               "</office:spreadsheet></office:body></office:document-content>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", content)
        archive.writestr("META-INF/manifest.xml", MANIFEST)
    return buffer.getvalue()


MANIFEST = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
            'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
            '<manifest:file-entry manifest:full-path="/" '
            'manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
            '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
            "</manifest:manifest>")


def test_opendocument_spreadsheet(tmp_path: Path) -> None:
    plan, df = _load(_write(tmp_path / "t.ods", _ods([["city", "visits"], ["Oslo", 3], ["Lima", 8]])))
    assert plan.format == "ods" and df["visits"].tolist() == [3, 8]


def test_excel_title_rows_above_the_header_are_skipped(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        _table().to_excel(writer, sheet_name="Data", index=False, startrow=2)
        writer.sheets["Data"]["A1"] = "Visits by city, 2024"
    path = _write(tmp_path / "titled.xlsx", buffer.getvalue())
    plan, df = _load(path)
    assert plan.skiprows == 2 and list(df.columns) == ["city", "visits", "share"]


def test_json_layouts(tmp_path: Path) -> None:
    nested = {"meta": {"source": "test"}, "data": [{"id": 1, "user": {"name": "a", "age": 30},
                                                    "when": "2024-01-02"},
                                                   {"id": 2, "user": {"name": "b", "age": 41},
                                                    "when": "2024-02-03"}]}
    plan, df = _load(_write(tmp_path / "nested.json", json.dumps(nested).encode()))
    assert isinstance(plan, JsonPlan) and plan.record_path == "data" and plan.nested
    assert {"user.name", "user.age"} <= set(df.columns)
    assert str(df["when"].dtype).startswith("datetime64")
    columns = {"a": [1, 2, 3], "b": ["x", "y", "z"]}
    plan, df = _load(_write(tmp_path / "columns.json", json.dumps(columns).encode()))
    assert plan.layout == "columns" and df.shape == (3, 2)
    rows = [["a", "b"], [1, "x"], [2, "y"]]
    plan, df = _load(_write(tmp_path / "rows.json", json.dumps(rows).encode()))
    assert plan.layout == "rows" and list(df.columns) == ["a", "b"]


CORRUPT: dict[str, bytes] = {
    "cut.csv.gz": gzip.compress(b"a,b\n" + b"1,2\n" * 5000)[:-40],
    "bad.zip": b"PK\x03\x04" + bytes(300),
    "bad.xlsx": _zip("xl/workbook.xml")(b"<not really a workbook"),
    "bad.xls": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
    "cut.parquet": _parquet(_table())[:-30],
    "bad.json": b'[{"a": 1}, {"a": 2',
    "bad.jsonl": b'{"a": 1}\n{"a": \n',
    "bad.bz2": b"BZh91AY&SY" + bytes(80),
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_files_get_a_clear_error(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path / name, CORRUPT[name])
    with pytest.raises(UnreadableFileError) as info:
        detect(path)
    message = str(info.value)
    assert name in message and "Traceback" not in message
    assert any(word in message for word in ("corrupt", "cannot", "not valid", "not a", "cut short")), message


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_the_cli_writes_nothing_for_a_corrupt_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  name: str) -> None:
    path = _write(tmp_path / name, CORRUPT[name])
    out_nb, out_html = tmp_path / "out" / "r.ipynb", tmp_path / "out" / "r.html"
    code = cli.main(["eda", str(path), "-o", str(out_nb), "--html", str(out_html)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and name in err, err
    assert not (tmp_path / "out").exists()


def test_a_directory_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UnreadableFileError, match="is a directory"):
        detect(tmp_path)
    assert cli.main(["eda", str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().err


def test_archives_with_several_or_no_tables(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.csv", "x\n1\n")
        archive.writestr("b.csv", "x\n2\n")
    with pytest.raises(UnreadableFileError, match=r"holds 2 files.*a\.csv, b\.csv"):
        detect(_write(tmp_path / "two.zip", buffer.getvalue()))
    with pytest.raises(UnreadableFileError, match="empty once decompressed"):
        detect(_write(tmp_path / "empty.csv.gz", gzip.compress(b"")))


def test_a_missing_reader_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_pyarrow(name: str, package: str | None = None) -> Any:
        if name == "pyarrow":
            raise ImportError("No module named 'pyarrow'")
        return real(name, package)

    path = _write(tmp_path / "t.parquet", _parquet(_table()))
    monkeypatch.setattr(importlib, "import_module", without_pyarrow)
    with pytest.raises(ReaderMissingError, match=r"pip install 'kernel-analyst\[parquet\]'"):
        detect(path)


def test_eda_package_does_not_import_langchain() -> None:
    code = ("import sys, kernel_analyst.eda, kernel_analyst.kernels.verify\n"
            "from kernel_analyst.eda import run_playbook, detect, write_html\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('langchain', 'kernel_analyst.agent')))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
