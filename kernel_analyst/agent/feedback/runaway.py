"""A reply that runs away: seen while it streams, so it is cut before the token limit.

A greedy small model that starts repeating itself goes on until the context is full (845
tokens in six minutes was seen, still going). :func:`runaway` looks at the reply so far and
says what it keeps doing, or None:

- **the same line again and again**: one line (of three characters or more) five times or
  more among the last twelve;
- **the same text again and again**: a stretch of 8 to 200 characters repeated four times
  in a row at the end;
- **a code block that keeps growing**: an unclosed fence with more lines than any step
  needs (:data:`MAX_BLOCK_LINES`).

The loop cuts the stream (closing it: a model server stops generating when its client goes)
and the judge tells the model in one line (:func:`~kernel_analyst.agent.feedback.replies.cut_short`).
"""

from __future__ import annotations

import re

MAX_BLOCK_LINES = 120
"""Lines of one code block beyond which it is taken for a runaway."""
_RECENT = 12
_SAME_LINE = 5
_TAIL = 1000
_REPEATED = re.compile(r"(.{8,200}?)\1{3,}\Z", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*```", re.MULTILINE)


def runaway(text: str) -> str | None:
    """What the reply so far keeps doing, or None while it looks like a reply."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    recent = lines[-_RECENT:]
    for line in set(recent):
        if len(line) >= 3 and recent.count(line) >= _SAME_LINE:
            return "the same line again and again"
    if _REPEATED.search(text[-_TAIL:].rstrip()):
        return "the same text again and again"
    fences = list(_FENCE.finditer(text))
    if len(fences) % 2 == 1 and text[fences[-1].end():].count("\n") > MAX_BLOCK_LINES:
        return "a code block that kept growing"
    return None


__all__ = ["MAX_BLOCK_LINES", "runaway"]
