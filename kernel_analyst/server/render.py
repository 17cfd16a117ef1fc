"""Safe HTML for notebooks and outputs: nothing from a notebook can run or add attributes.

Everything taken from a notebook is escaped, except HTML outputs and rendered markdown,
which go through an allow-list sanitiser (nh3) that keeps tables and text formatting
and drops scripts, styles, event handlers and every attribute not listed. Images are
decoded and re-encoded as base64 before they go into a ``data:`` URL, and their size
comes from metadata only when it is a plain integer. JavaScript and widget outputs are
never rendered, only named. Pages also carry a Content-Security-Policy that forbids
scripts, as a second wall.

An error shows its one-line summary first, then the traceback trimmed as the agent sees
it (library frames folded, no host path outside the session), with the full text in a
``<details>`` one click away.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from typing import Any

import nh3
from markdown_it import MarkdownIt

from ..claims import Grounding, cite_markdown
from ..frontend.tracebacks import ErrorView
from ..kernels.execution import strip_ansi
from ..kernels.trail import cell_meta

NOTEBOOK_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
                "form-action 'none'")
"""Policy for a rendered notebook: no script, no fetch, images only from data: URLs."""

_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "div",
    "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre",
    "s", "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead",
    "tr", "u", "ul", "mark",
}
_ATTRIBUTES = {
    "*": {"class", "title"},
    "a": {"href"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align"},
    "table": {"border"},
    "ol": {"start"},
}
_MIME_ORDER = (
    "text/html", "image/svg+xml", "image/png", "image/jpeg", "image/gif", "text/markdown",
    "text/latex", "text/plain",
)
_NOT_SHOWN = {
    "application/javascript": "JavaScript output (not run here)",
    "application/vnd.jupyter.widget-view+json": "interactive widget (not shown here)",
}

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def sanitize_html(fragment: str) -> str:
    """Keep tables and text formatting; drop scripts, styles, handlers, unknown attributes."""
    return nh3.clean(
        fragment, tags=_TAGS, attributes=_ATTRIBUTES, clean_content_tags={"script", "style"},
        url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow",
    )


def render_markdown(text: str) -> str:
    """Markdown to safe HTML (raw HTML in the source is shown as text)."""
    return sanitize_html(_markdown.render(text))


_CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""nbformat 4.5's cell id pattern."""

UNSUPPORTED_HREF = "#ka-unsupported"
"""Where an unsupported number of a cited answer links to before it becomes a ``<mark>``."""
_UNSUPPORTED_LINK = re.compile(r'<a href="' + re.escape(UNSUPPORTED_HREF) + r'" title="([^"]*)">(.*?)</a>')


def render_cited(grounding: Grounding) -> str:
    """An answer to safe HTML with its numbers cited: links to their cells
    (``#cell-id=<id>``, titled with the source value), unsupported ones marked."""
    return _with_marks(cite_markdown(grounding, unsupported_href=UNSUPPORTED_HREF))


def _with_marks(markdown: str) -> str:
    rendered = _markdown.render(markdown)
    return sanitize_html(_UNSUPPORTED_LINK.sub(r'<mark title="\1">\2</mark>', rendered))


def render_markdown_cell(cell: dict[str, Any]) -> str:
    """A markdown cell to safe HTML; an answer cell that recorded its claims shows its
    cited numbers as links and marks (its source holds ``<mark>`` HTML, which
    :func:`render_markdown` shows as text)."""
    source = _join(cell.get("source", ""))
    claims = cell_meta(cell).get("claims")
    if isinstance(claims, dict):
        try:
            grounding = Grounding.from_dict(claims)
        except (KeyError, TypeError, ValueError):
            return render_markdown(source)
        cited = cite_markdown(grounding)
        if cited in source:
            linked = cite_markdown(grounding, unsupported_href=UNSUPPORTED_HREF)
            return _with_marks(source.replace(cited, linked, 1))
    return render_markdown(source)


def _join(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""


def _pre(text: str, cls: str) -> str:
    return f'<pre class="{cls}">{html.escape(text)}</pre>'


def _image(mime: str, data: Any, metadata: dict[str, Any]) -> str:
    raw = _join(data)
    if mime == "image/svg+xml":
        payload = raw.encode("utf-8", "replace")  # an <img> never runs an SVG's scripts
    else:
        try:
            payload = base64.b64decode("".join(raw.split()), validate=True)
        except (binascii.Error, ValueError):
            return '<p class="note">[image with invalid data not shown]</p>'
    if not payload:
        return '<p class="note">[empty image]</p>'
    size = ""
    for key in ("width", "height"):
        value = metadata.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 100_000:
            size += f' {key}="{value}"'
    encoded = base64.b64encode(payload).decode("ascii")
    return f'<img class="output-image" alt="figure" src="data:{mime};base64,{encoded}"{size}>'


def _rich(data: dict[str, Any], metadata: dict[str, Any]) -> str:
    for mime in _MIME_ORDER:
        if mime not in data:
            continue
        value = data[mime]
        if mime == "text/html":
            return f'<div class="output-html">{sanitize_html(_join(value))}</div>'
        if mime.startswith("image/"):
            meta = metadata.get(mime, metadata)
            return _image(mime, value, meta if isinstance(meta, dict) else {})
        if mime == "text/markdown":
            return f'<div class="output-markdown">{render_markdown(_join(value))}</div>'
        return _pre(_join(value), "output-text")
    names = ", ".join(_NOT_SHOWN.get(m, m) for m in sorted(data))
    return f'<p class="note">[{html.escape(names or "empty output")}]</p>'


def render_error(output: dict[str, Any], *, workdir: str | None = None) -> str:
    """An ``error`` output: the summary line, the trimmed traceback, the full one folded."""
    view = ErrorView.from_output(output, workdir=workdir)
    kind = "interrupted" if view.interrupted else "failed"
    summary = f'<p class="error-summary">{html.escape(view.summary)}</p>'
    parts = [f'<div class="output-error {kind}">', summary]
    if view.trimmed_text and not view.interrupted:
        parts.append(_pre(view.trimmed_text, "traceback"))
    if view.full.strip():
        note = view.folded_note()
        label = f"Full traceback ({note})" if note else "Full traceback"
        parts.append(f'<details class="traceback-full"><summary>{html.escape(label)}</summary>'
                     f'{_pre(view.full, "traceback")}</details>')
    parts.append("</div>")
    return "".join(parts)


def render_output(output: dict[str, Any], *, workdir: str | None = None) -> str:
    """One nbformat output as a safe HTML fragment (``workdir``: the session's working
    directory, so traceback paths inside it show as relative)."""
    kind = output.get("output_type")
    if kind == "stream":
        name = "stderr" if output.get("name") == "stderr" else "stdout"
        return _pre(strip_ansi(_join(output.get("text", ""))), f"output-stream {name}")
    if kind == "error":
        return render_error(output, workdir=workdir)
    if kind in ("display_data", "execute_result"):
        data = output.get("data")
        metadata = output.get("metadata")
        return _rich(data if isinstance(data, dict) else {}, metadata if isinstance(metadata, dict) else {})
    return f'<p class="note">[{html.escape(str(kind))} output not shown]</p>'


def render_outputs(cell: dict[str, Any], *, workdir: str | None = None) -> str:
    """A code cell's outputs as one safe HTML fragment."""
    outputs = cell.get("outputs")
    if not isinstance(outputs, list):
        return ""
    return "".join(render_output(o, workdir=workdir) for o in outputs if isinstance(o, dict))


def render_cell(cell: dict[str, Any], *, workdir: str | None = None) -> str:
    """One notebook cell as a safe HTML fragment."""
    kind = cell.get("cell_type")
    source = _join(cell.get("source", ""))
    if kind == "markdown":
        return f'<section class="cell markdown">{render_markdown_cell(cell)}</section>'
    if kind != "code":
        return f'<section class="cell raw">{_pre(source, "raw")}</section>'
    count = cell.get("execution_count")
    prompt = f"[{count}]" if isinstance(count, int) else "[ ]"
    status = cell_status(cell) or "unknown"
    rendered = render_outputs(cell, workdir=workdir)
    cell_id = cell.get("id")  # nbformat's pattern only: an anchor, nothing a notebook can smuggle in
    anchor = f' id="cell-id={cell_id}"' if isinstance(cell_id, str) and _CELL_ID.fullmatch(cell_id) else ""
    return (f'<section class="cell code status-{status}"{anchor}>'
            f'<div class="prompt">{html.escape(prompt)}</div>'
            f'{_pre(source, "source")}<div class="outputs">{rendered}</div></section>')


def cell_status(cell: dict[str, Any]) -> str | None:
    """The recorded status of a code cell (``ok``, ``error``, ``timeout``, ``died``), or None."""
    ka = cell_meta(cell)
    status = ka.get("status")
    return status if status in ("ok", "error", "timeout", "died") else None


def cell_view(cell: dict[str, Any], index: int, *, workdir: str | None = None) -> dict[str, Any]:
    """One notebook cell for the page: its kind, source, counter, status, duration and its
    outputs (or markdown) as safe HTML. Nothing else of the notebook is passed on."""
    kind = cell.get("cell_type")
    source = _join(cell.get("source", ""))
    ka = cell_meta(cell)
    if kind != "code":
        shown = render_markdown_cell(cell) if kind == "markdown" else _pre(source, "raw")
        role = ka.get("role")
        return {"index": index, "cell_type": "markdown" if kind == "markdown" else "raw", "source": source,
                "html": shown, "role": role if isinstance(role, str) else None}
    count = cell.get("execution_count")
    duration = ka.get("duration_s")
    error = next((o for o in cell.get("outputs") or [] if isinstance(o, dict)
                  and o.get("output_type") == "error"), None)
    cell_id = cell.get("id")
    return {
        "index": index, "cell_type": "code", "source": source,
        "id": cell_id if isinstance(cell_id, str) and _CELL_ID.fullmatch(cell_id) else "",
        "execution_count": count if isinstance(count, int) and not isinstance(count, bool) else None,
        "status": cell_status(cell),
        "duration_s": float(duration) if isinstance(duration, (int, float)) else None,
        "error": {"ename": str(error.get("ename", "")), "evalue": str(error.get("evalue", ""))}
        if error else None,
        "html": render_outputs(cell, workdir=workdir),
        "undone": bool(ka.get("undone")),
        "by": "person" if ka.get("by") == "person" else None,
    }


NOTEBOOK_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem;color:#1d1d1f}
.cell{margin:0 0 1rem;border-left:3px solid #ccd;padding:.25rem .75rem}
.cell.status-error,.cell.status-died,.cell.status-timeout{border-left-color:#c33}
.prompt{color:#667;font:12px monospace}
pre{white-space:pre-wrap;word-break:break-word;margin:.25rem 0;font:13px/1.35 ui-monospace,monospace}
pre.source{background:#f5f6f8;padding:.5rem}
pre.stderr{background:#fff1f1;color:#811}
.output-error{background:#fff1f1;color:#811;padding:.25rem .5rem}
.error-summary{font-weight:600;margin:.1rem 0}
details.traceback-full summary{cursor:pointer;color:#667;font-size:13px}
.output-image{max-width:100%;height:auto}
.output-html table{border-collapse:collapse;font-size:13px}
.output-html th,.output-html td{border:1px solid #dde;padding:2px 6px;text-align:right}
.note{color:#667;font-style:italic}
"""


def render_notebook(notebook: dict[str, Any], *, title: str) -> str:
    """A whole notebook as a standalone, script-free HTML document (its own ``title``
    metadata, if any, leads the page title)."""
    meta = notebook.get("metadata")
    own_title = meta.get("title") if isinstance(meta, dict) else None
    if isinstance(own_title, str) and own_title.strip():
        title = f"{own_title} ({title})"
    cells = notebook.get("cells")
    body = "".join(render_cell(c) for c in cells if isinstance(c, dict)) if isinstance(cells, list) else ""
    safe_title = html.escape(title)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{NOTEBOOK_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{safe_title}</title><style>{NOTEBOOK_STYLE}</style></head>"
        f'<body><h1 class="notebook-title">{safe_title}</h1>'
        f'<main class="notebook">{body}</main></body></html>\n'
    )
