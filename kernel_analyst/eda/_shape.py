"""What reading a table will give, as the loader knows it before any kernel reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableShape:
    """The columns a loading plan's code makes, and the rows where they are known cheaply."""

    columns: tuple[tuple[str, str], ...]
    """``(name, dtype)`` of each column, as the loading code makes them (read from a
    sample of the file with the plan's own options)."""
    rows: int | None = None
    """Rows, where known without reading the whole table into pandas (a full scan of
    delimited text, a Parquet footer, a JSON document, a sheet's size); None otherwise."""

    @classmethod
    def of_frame(cls, frame: Any, rows: int | None = None) -> TableShape:
        """The columns and dtypes of a (sample) DataFrame; ``rows`` as known elsewhere."""
        return cls(tuple((str(name), str(dtype)) for name, dtype in frame.dtypes.items()), rows)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {"columns": [list(c) for c in self.columns], "rows": self.rows}
