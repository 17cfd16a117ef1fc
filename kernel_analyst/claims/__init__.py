"""Answers you can check: every number of an answer traced to the cell that produced it.

Pure (no LLM, no LangChain, no kernel): the agent, ``verify`` and the server all use it.

- :class:`SourceIndex` indexes the numbers a conversation's code cells produced (printed
  text, results and displays, the variables they made, their code), once per answer;
- :func:`ground` finds the numbers of an answer (:mod:`.match` documents every rule) and
  gives a :class:`Grounding`: each :class:`Claim` ``grounded`` (with its :class:`Source`),
  ``derived`` (a :class:`Derivation` of two grounded ones) or ``unsupported``;
- :func:`cite_markdown` writes the answer with each number linked to its cell;
- :func:`recheck` re-checks a recorded grounding against re-run cells (``verify``).
"""

from ._scan import parse_mantissa
from .citations import cell_anchor, cite_markdown
from .grounding import Claim, ClaimStatus, Derivation, Grounding, Ignored, Source
from .match import Mention, ground, read_mentions
from .recheck import AnswerCheck, MovedClaim, recheck
from .sources import CellRef, Part, SourceIndex, cell_parts

__all__ = [
    "AnswerCheck",
    "CellRef",
    "Claim",
    "ClaimStatus",
    "Derivation",
    "Grounding",
    "Ignored",
    "Mention",
    "MovedClaim",
    "Part",
    "Source",
    "SourceIndex",
    "cell_anchor",
    "cell_parts",
    "cite_markdown",
    "ground",
    "parse_mantissa",
    "read_mentions",
    "recheck",
]
