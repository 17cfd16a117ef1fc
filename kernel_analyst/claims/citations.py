"""An answer with its sources: each number linked to the cell it came from.

The anchor is nbformat's cell id in the form nbconvert's HTML gives every cell
(``id="cell-id=<id>"``), and the web page gives its cells too, so one link works in the
exported HTML, on the page and in any viewer that follows nbconvert: ``#cell-id=<id>``.

- a grounded number becomes ``[38.4%](#cell-id=1a2b3c "cell [3] stdout: 0.3838383838383838")``;
- a derived number links to its first operand's cell, its title the arithmetic;
- an unsupported number is marked ``<mark title="...">41.2%</mark>`` (highlighted by
  every browser, JupyterLab and nbconvert).

The model's own text is kept, except that anything shaped like an HTML tag is escaped, so
raw HTML in an answer still shows as text. A closing line gives the summary.
"""

from __future__ import annotations

import re

from .grounding import Claim, ClaimStatus, Grounding

_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_LINK = re.compile(r"\[[^\]\n]*\]\([^)\n]*\)")
UNSUPPORTED_TITLE = "unsupported: no cell of this conversation produced this number"


def cell_anchor(cell_id: str) -> str:
    """The link target of a cell: ``#cell-id=<id>``."""
    return f"#cell-id={cell_id}"


def cite_markdown(grounding: Grounding, *, summary: bool = True, unsupported_href: str | None = None) -> str:
    """The answer as markdown with each number cited (see the module docstring), and the
    summary line after it when ``summary``. With ``unsupported_href``, an unsupported
    number is a link there (with the same title) instead of raw ``<mark>`` HTML, for a
    renderer that shows raw HTML as text and turns that link into a mark itself."""
    text = grounding.text
    links = [(m.start(), m.end()) for m in _LINK.finditer(text)]
    pieces: list[str] = []
    last = 0
    for claim in grounding.claims:
        if claim.start < last or any(s <= claim.start < e for s, e in links):
            continue  # a number inside a link the answer made: left as it is
        pieces.append(_escape(text[last : claim.start]))
        pieces.append(_cited(claim, grounding, unsupported_href))
        last = claim.end
    pieces.append(_escape(text[last:]))
    body = "".join(pieces)
    if summary and grounding.claims:
        body += f"\n\n*{_escape(grounding.summary())}.*"
    return body


def _escape(text: str) -> str:
    return _TAG.sub("&lt;", text)


def _cited(claim: Claim, grounding: Grounding, unsupported_href: str | None = None) -> str:
    shown = claim.text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("$", "\\$")
    if claim.status is ClaimStatus.UNSUPPORTED:
        if unsupported_href is not None:
            return _href(shown, unsupported_href, UNSUPPORTED_TITLE)
        return f'<mark title="{UNSUPPORTED_TITLE}">{_escape(claim.text)}</mark>'
    if claim.source is not None:
        title = f"{claim.source.describe()} ({claim.source.form})"
        return _link(shown, claim.source.cell_id, title)
    if claim.derivation is not None:
        first = grounding.claims[claim.derivation.operands[0]].source
        title = f"derived: {claim.derivation.expression} ({claim.derivation.op})"
        return _link(shown, first.cell_id if first else "", title)
    return shown


def _link(shown: str, cell_id: str, title: str) -> str:
    return _href(shown, cell_anchor(cell_id), title) if cell_id else shown


def _href(shown: str, href: str, title: str) -> str:
    safe = title.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'[{shown}]({href} "{safe}")'


__all__ = ["UNSUPPORTED_TITLE", "cell_anchor", "cite_markdown"]
