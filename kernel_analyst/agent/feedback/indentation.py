"""Code indented where Python expects no indent: mended before it runs.

A small model writes a block whose first line starts at the margin and whose next lines are
indented as if they were inside it::

    df = df[df.origin == 'europe']
        print(len(df[df.mpg > 30]))

Python stops at once (``IndentationError: unexpected indent``), nothing runs, and the model
sent the same shape four times in one question of the mpg conversation (two of them after a
rollback had taken the failing turns out of its messages). The intent is plain, so the
block is mended: each line indented past what the line before it opens is brought back to
the indentation of that line, with the lines under it, until the block parses. The mended
code is what runs and what the audit notebook keeps, and the model is told its block was
mended. Code that does not parse for another reason, or that no such mending makes
parse, is left as it is (its error and hint follow as usual).
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

_MAX_MENDS = 50
"""Lines mended in one block at most (each mend parses the block again)."""


@dataclass(frozen=True)
class Mended:
    """A block whose indentation was mended."""

    code: str
    """The code that runs."""
    lines: tuple[int, ...]
    """The 1-based lines that were indented where no indent was expected."""

    def named(self) -> str:
        """The lines, as a reader says them: ``line 2``, ``lines 2 and 5``."""
        numbers = [str(line) for line in self.lines]
        if len(numbers) == 1:
            return f"line {numbers[0]}"
        return f"lines {', '.join(numbers[:-1])} and {numbers[-1]}"


def mended_indentation(code: str) -> Mended | None:
    """``code`` with its unexpected indents taken out, when that makes it parse (None when the
    code parses already, fails for another reason, or still fails)."""
    lines = code.split("\n")
    mended: list[int] = []
    for _ in range(_MAX_MENDS):
        error = _indentation_error("\n".join(lines))
        if error is None:
            return Mended("\n".join(lines), tuple(mended)) if mended else None
        if error.msg != "unexpected indent" or error.lineno is None or not 1 < error.lineno <= len(lines):
            return None
        at = error.lineno - 1
        above = _statement_above(lines, at)
        if above is None:
            return None
        excess = _indent(lines[at]) - _indent(lines[above])
        if excess <= 0 or lines[above].rstrip().endswith(":"):
            return None
        _dedent_block(lines, at, excess)
        mended.append(error.lineno)
    return None


def _indentation_error(code: str) -> SyntaxError | None:
    """The unexpected-indent error ``code`` raises when parsed (None when it parses; any other
    syntax error is returned as it is, and the caller gives up on it)."""
    try:
        ast.parse(code)
    except SyntaxError as error:  # IndentationError is a SyntaxError
        return error
    return None


def _statement_above(lines: list[str], at: int) -> int | None:
    """The index of the first line of the last statement before line ``at`` (a statement that
    goes on over lines inside brackets starts where its first token is)."""
    starts = _statement_starts("\n".join(lines[:at]) + "\n")
    return max(starts) if starts else None


def _statement_starts(code: str) -> set[int]:
    """The 0-based lines where the statements of ``code`` start (empty when it does not
    tokenize)."""
    starts: set[int] = set()
    at_start = True
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                at_start = True
            elif token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER) and at_start:
                starts.add(token.start[0] - 1)
                at_start = False
    except (tokenize.TokenError, SyntaxError):
        return set()
    return starts


def _indent(line: str) -> int:
    """The width of a line's leading whitespace (a tab counts as one)."""
    return len(line) - len(line.lstrip(" \t"))


def _dedent_block(lines: list[str], at: int, excess: int) -> None:
    """Take ``excess`` columns of indentation off line ``at`` and the lines after it that are
    indented as far or further (blank lines and comments go along)."""
    depth = _indent(lines[at])
    for index in range(at, len(lines)):
        line = lines[index]
        if line.strip() and not line.lstrip().startswith("#") and _indent(line) < depth:
            break
        lines[index] = line[min(excess, _indent(line)):]


__all__ = ["Mended", "mended_indentation"]
