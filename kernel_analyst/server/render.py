"""Safe HTML for notebooks and outputs: nothing from a notebook can run or add attributes.

Everything taken from a notebook is escaped, except HTML outputs and rendered markdown,
which go through an allow-list sanitiser (nh3) that keeps tables and text formatting
and drops scripts, styles, event handlers and every attribute not listed. Images are
decoded and re-encoded as base64 before they go into a ``data:`` URL, and their size
comes from metadata only when it is a plain integer. JavaScript and widget outputs are
never rendered, only named. Pages also carry a Content-Security-Policy that forbids
scripts, as a second wall.
"""

from __future__ import annotations

import base64
import binascii
import html
from typing import Any

import nh3
from markdown_it import MarkdownIt

from ..kernels.execution import strip_ansi

NOTEBOOK_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
                "form-action 'none'")
"""Policy for a rendered notebook: no script, no fetch, images only from data: URLs."""

_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "div",
    "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre",
    "s", "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead",
    "tr", "u", "ul",
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


def render_output(output: dict[str, Any]) -> str:
    """One nbformat output as a safe HTML fragment."""
    kind = output.get("output_type")
    if kind == "stream":
        name = "stderr" if output.get("name") == "stderr" else "stdout"
        return _pre(strip_ansi(_join(output.get("text", ""))), f"output-stream {name}")
    if kind == "error":
        lines = output.get("traceback")
        text = "\n".join(strip_ansi(str(x)) for x in lines) if isinstance(lines, list) and lines else (
            f"{output.get('ename', '')}: {output.get('evalue', '')}")
        return _pre(text, "output-error")
    if kind in ("display_data", "execute_result"):
        data = output.get("data")
        metadata = output.get("metadata")
        return _rich(data if isinstance(data, dict) else {}, metadata if isinstance(metadata, dict) else {})
    return f'<p class="note">[{html.escape(str(kind))} output not shown]</p>'


def render_cell(cell: dict[str, Any]) -> str:
    """One notebook cell as a safe HTML fragment."""
    kind = cell.get("cell_type")
    source = _join(cell.get("source", ""))
    if kind == "markdown":
        return f'<section class="cell markdown">{render_markdown(source)}</section>'
    if kind != "code":
        return f'<section class="cell raw">{_pre(source, "raw")}</section>'
    count = cell.get("execution_count")
    prompt = f"[{count}]" if isinstance(count, int) else "[ ]"
    status = _cell_status(cell)
    outputs = cell.get("outputs")
    rendered = "".join(render_output(o) for o in outputs if isinstance(o, dict)) if isinstance(
        outputs, list) else ""
    return (f'<section class="cell code {status}"><div class="prompt">{html.escape(prompt)}</div>'
            f'{_pre(source, "source")}<div class="outputs">{rendered}</div></section>')


def _cell_status(cell: dict[str, Any]) -> str:
    meta = cell.get("metadata")
    ka = meta.get("kernel_analyst") if isinstance(meta, dict) else None
    status = ka.get("status") if isinstance(ka, dict) else None
    return f"status-{status}" if status in ("ok", "error", "timeout", "died") else "status-unknown"


NOTEBOOK_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem;color:#1d1d1f}
.cell{margin:0 0 1rem;border-left:3px solid #ccd;padding:.25rem .75rem}
.cell.status-error,.cell.status-died,.cell.status-timeout{border-left-color:#c33}
.prompt{color:#667;font:12px monospace}
pre{white-space:pre-wrap;word-break:break-word;margin:.25rem 0;font:13px/1.35 ui-monospace,monospace}
pre.source{background:#f5f6f8;padding:.5rem}
pre.stderr,pre.output-error{background:#fff1f1;color:#811}
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
