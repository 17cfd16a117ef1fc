"""The HTML report: a notebook rendered to read, not to edit.

One self-contained page: a table of contents, the summary first (as the notebook has it),
every figure and table, and each code cell folded away in a ``<details>`` element that
opens on a click. Markdown is rendered by markdown-it-py with raw HTML off; text outputs
are escaped; ``text/html`` outputs (pandas tables) are the kernel's own rendering and are
kept as they are, so render only notebooks you trust (the playbook's own are).
"""

from __future__ import annotations

import html
import importlib
import json
import re
from pathlib import Path
from typing import Any

from .exceptions import EdaError

__all__ = ["notebook_html", "write_html"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); }
.layout { display: grid; grid-template-columns: 240px minmax(0, 1fr); max-width: 1320px; margin: 0 auto; }
nav.toc { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow: auto;
          padding: 24px 16px; border-right: 1px solid var(--line); font-size: 14px; }
nav.toc h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted);
             margin: 0 0 8px; }
nav.toc ol { list-style: none; padding: 0; margin: 0; }
nav.toc a { display: block; padding: 3px 8px; border-radius: 6px; color: var(--ink); text-decoration: none; }
nav.toc a:hover { background: var(--soft); color: var(--accent); }
main { padding: 24px 40px 80px; min-width: 0; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 36px 0 8px; padding-top: 12px; border-top: 1px solid var(--line); }
h3 { font-size: 17px; }
code { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--soft);
       padding: 1px 4px; border-radius: 4px; }
pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; margin: 0;
      white-space: pre-wrap; word-break: break-word; }
.summary { background: #fffbe6; border: 1px solid #eed888; border-radius: 10px; padding: 4px 20px 12px; }
.summary h2 { border: 0; margin-top: 12px; }
details.code { margin: 10px 0 6px; }
details.code > summary { cursor: pointer; color: var(--muted); font-size: 13px; user-select: none; }
details.code > summary:hover { color: var(--accent); }
details.code pre { background: var(--soft); border: 1px solid var(--line); border-radius: 8px; padding: 12px;
                   margin-top: 6px; overflow-x: auto; white-space: pre; }
.output { margin: 8px 0; }
.output pre { padding: 6px 0; }
.output.stderr pre, .output.error pre { background: #fff0f0; padding: 8px; border-radius: 6px; }
.output img { max-width: 100%; height: auto; display: block; }
.table-wrap { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td:first-child, th:first-child { text-align: left; }
.markdown table td, .markdown table th { text-align: left; }
tbody tr:hover { background: #f0f6ff; }
footer { color: var(--muted); font-size: 13px; margin-top: 40px; }
@media (max-width: 900px) { .layout { grid-template-columns: 1fr; }
  nav.toc { position: static; max-height: none; border-right: 0; border-bottom: 1px solid var(--line); }
  main { padding: 16px; } }
"""


def write_html(notebook: str | Path, target: str | Path) -> Path:
    """Render the notebook file at ``notebook`` to ``target``; return the path written."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    page = notebook_html(nb)
    out = Path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def notebook_html(nb: dict[str, Any]) -> str:
    """One self-contained HTML page for the notebook ``nb`` (a dict in nbformat v4 shape)."""
    render = _markdown_renderer()
    toc: list[tuple[str, str]] = []
    body: list[str] = []
    title = "Report"
    for cell in nb.get("cells", []):
        source = _text(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            if not body:
                title = _title(source) or title
            body.append(_markdown_cell(source, render, toc, summary=_is_summary(cell)))
        elif cell.get("cell_type") == "code":
            body.append(_code_cell(source, cell.get("outputs", []), render))
    nav = "".join(f'<li><a href="#{anchor}">{html.escape(text)}</a></li>' for anchor, text in toc)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{_CSS}{_pygments_css()}</style></head><body>"
            f'<div class="layout"><nav class="toc"><h2>Contents</h2><ol>{nav}</ol></nav>'
            f'<main>{"".join(body)}<footer>Code cells are folded: click “Code” to see how each result '
            f"was computed. The notebook (.ipynb) holds the same cells and re-runs.</footer></main></div>"
            "</body></html>\n")


def _markdown_renderer() -> Any:
    try:
        markdown_it = importlib.import_module("markdown_it")
    except ImportError as exc:
        raise EdaError("the HTML report needs markdown-it-py: pip install 'kernel-analyst[html]'") from exc
    return markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table")


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _title(source: str) -> str | None:
    first = source.strip().splitlines()[0] if source.strip() else ""
    return re.sub(r"[`*#]", "", first).strip() or None


def _is_summary(cell: dict[str, Any]) -> bool:
    return bool(cell.get("metadata", {}).get("kernel_analyst", {}).get("step") == "summary")


def _markdown_cell(source: str, render: Any, toc: list[tuple[str, str]], *, summary: bool) -> str:
    rendered = render.render(source)

    def anchor(match: re.Match[str]) -> str:
        text = re.sub(r"<[^>]+>", "", match.group(2))
        slug = f"s{len(toc) + 1}-" + re.sub(r"[^a-z0-9]+", "-", html.unescape(text).lower()).strip("-")[:40]
        toc.append((slug, html.unescape(text.split(":")[0] if summary else text)))
        return f'<h{match.group(1)} id="{slug}">{match.group(2)}</h{match.group(1)}>'

    rendered = re.sub(r"<h([12])>(.*?)</h\1>", anchor, rendered, count=1)
    rendered = rendered.replace("<table>", '<div class="table-wrap"><table>')
    rendered = rendered.replace("</table>", "</table></div>")
    css = "markdown summary" if summary else "markdown"
    return f'<section class="{css}">{rendered}</section>'


def _code_cell(source: str, outputs: list[dict[str, Any]], render: Any) -> str:
    lines = source.count("\n") + 1
    code = (f'<details class="code"><summary>Code ({lines} line{"s" if lines != 1 else ""})</summary>'
            f"<pre>{_highlight(source)}</pre></details>")
    return code + "".join(_output(out, render) for out in outputs)


def _output(out: dict[str, Any], render: Any) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        name = "stderr" if out.get("name") == "stderr" else "stdout"
        return f'<div class="output {name}"><pre>{html.escape(_text(out.get("text", "")))}</pre></div>'
    if kind == "error":
        trace = _ANSI.sub("", "\n".join(out.get("traceback", [])))
        return f'<div class="output error"><pre>{html.escape(trace or out.get("evalue", ""))}</pre></div>'
    data = out.get("data", {})
    if "image/png" in data:
        png = "".join(_text(data["image/png"]).split())
        return f'<div class="output"><img alt="figure" src="data:image/png;base64,{png}"></div>'
    if "text/html" in data:
        return f'<div class="output table-wrap">{_text(data["text/html"])}</div>'
    if "text/markdown" in data:
        return f'<div class="output markdown">{render.render(_text(data["text/markdown"]))}</div>'
    if "text/plain" in data:
        return f'<div class="output"><pre>{html.escape(_text(data["text/plain"]))}</pre></div>'
    return ""


def _highlight(source: str) -> str:
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:  # pygments comes with IPython; plain text is fine without it
        return html.escape(source)
    return str(highlight(source, PythonLexer(), HtmlFormatter(nowrap=True)))


def _pygments_css() -> str:
    try:
        from pygments.formatters import HtmlFormatter
    except ImportError:
        return ""
    return str(HtmlFormatter(style="default").get_style_defs("details.code pre"))
