"""Errors of the EDA package.

::

    Exception
     └── EdaError
          └── UnreadableFileError (also ValueError)   the file is not a table we can read
               └── ReaderMissingError                  a reader package (openpyxl, pyarrow,
                                                      xlrd) is not installed

Messages say what the file is and what to do; callers show them as they are.
"""

from __future__ import annotations

__all__ = ["EdaError", "ReaderMissingError", "UnreadableFileError"]


class EdaError(Exception):
    """Base class of the EDA package's errors."""


class UnreadableFileError(EdaError, ValueError):
    """The file cannot be read as a table; the message says why and what to do."""


class ReaderMissingError(UnreadableFileError):
    """The file's format needs an optional package that is not installed."""
