"""The one clock of the records: UTC, ISO-8601."""

from __future__ import annotations

import datetime as dt


def utcnow() -> str:
    """The current UTC time, ISO-8601 with milliseconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
