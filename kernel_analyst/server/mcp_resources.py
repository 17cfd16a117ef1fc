"""MCP resources: each conversation's audit notebook, figures and files, tenant by tenant.

URIs (stable for as long as the conversation exists; ``{sid}`` is the session id):

- ``kernel-analyst://sessions/{sid}/notebook``: the audit notebook,
  ``application/x-ipynb+json`` (a dormant conversation's too; it is not woken);
- ``kernel-analyst://sessions/{sid}/figures/{cell}-{n}.png``: the ``n``-th PNG figure
  (from 1) of the cell at position ``cell`` in the notebook (0-based, markdown cells
  included: the digest's numbering), byte for byte as the notebook holds it;
- ``kernel-analyst://sessions/{sid}/files/{path}``: a file of the working directory
  (``application/octet-stream``; ``resources/list`` gives each file's guessed type).

Reading is the SDK's (``MCPServer`` resource templates, with its path checks on the
parameters); listing is ours (:func:`listing`, answering ``resources/list`` in a
middleware: the SDK lists only resources registered in advance, and ours are the
tenant's conversations as they are now). Another tenant's session reads as not found.

**Subscriptions.** On the 2026-07-28 protocol a client subscribes with
``subscriptions/listen`` (``Client.listen(resource_subscriptions=[uri])`` in the
Python SDK), served by the SDK; each cell appended to a notebook publishes
``notifications/resources/updated`` for its notebook URI (``SessionService.cell_listeners``).
A listen that names another tenant's session is refused as not found.

**Figures in ``execute``.** Each figure of the cell comes back as a ``resource_link`` to
its figure URI; beside the first figures, a downscaled copy (at most 480 px a side, 64
colours: 8-15 KB for a line chart) is sent inline as long as the copies together stay
under ``ServerConfig.mcp_inline_image_bytes`` (``--inline-image-kb``, 32 KB; 0: links
only, for hosts that read resources).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import mimetypes
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ContentBlock, ImageContent, ListResourcesResult, Resource, ResourceLink

from ..frontend.errors import classify
from ..kernels import files as _files
from .auth import tenant_of_request
from .records import SessionRecord
from .routes import open_inside
from .service import SessionService

SCHEME = "kernel-analyst"
NOTEBOOK_MIME = "application/x-ipynb+json"
INLINE_MAX_SIDE = 480
"""An inline copy of a figure is at most this many pixels a side."""
INLINE_COLOURS = 64
"""... and has a palette of this many colours."""
_SESSION_URI = re.compile(r"^kernel-analyst://sessions/([^/]+)/")
_CHUNK = 1 << 20


def notebook_uri(sid: str) -> str:
    """The URI of a conversation's audit notebook."""
    return f"{SCHEME}://sessions/{sid}/notebook"


def figure_uri(sid: str, cell: int, n: int) -> str:
    """The URI of the ``n``-th figure (from 1) of the cell at position ``cell``."""
    return f"{SCHEME}://sessions/{sid}/figures/{cell}-{n}.png"


def file_uri(sid: str, name: str) -> str:
    """The URI of a file in a conversation's working directory."""
    return f"{SCHEME}://sessions/{sid}/files/{quote(name, safe='/')}"


def cell_figures(cell: dict[str, Any]) -> list[bytes]:
    """The PNG figures of a notebook cell, in output order (undecodable ones skipped)."""
    found = []
    for out in cell.get("outputs") or []:
        data = out.get("data") if isinstance(out, dict) else None
        png = data.get("image/png") if isinstance(data, dict) else None
        if png is None:
            continue
        with contextlib.suppress(ValueError):
            found.append(base64.b64decode("".join(png) if isinstance(png, list) else str(png)))
    return found


# -- figures in an execute result -----------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """A figure of a recorded cell and its resource URI."""

    uri: str
    """Where it is read back (``resources/read``)."""
    png: bytes
    """Its bytes, as the notebook holds them."""


def figures_of(record: SessionRecord, cells: list[dict[str, Any]], cell_id: str | None) -> list[Figure]:
    """The figures of the recorded cell ``cell_id`` (searched from the notebook's end)."""
    if not cell_id:
        return []
    for index in range(len(cells) - 1, -1, -1):
        if cells[index].get("id") == cell_id:
            return [Figure(figure_uri(record.id, index, n), png)
                    for n, png in enumerate(cell_figures(cells[index]), start=1)]
    return []


def figure_content(figures: list[Figure], *,
                   inline_bytes: int) -> tuple[list[ContentBlock], list[dict[str, Any]]]:
    """Content blocks for ``figures``: a link each, and downscaled copies inline while
    they fit in ``inline_bytes`` together; and their summary for the structured result."""
    blocks: list[ContentBlock] = []
    summary = []
    budget = inline_bytes
    for number, figure in enumerate(figures, start=1):
        blocks.append(ResourceLink(uri=figure.uri, name=f"figure {number}", mime_type="image/png",
                                   size=len(figure.png)))
        small = downscaled(figure.png) if budget > 0 else None
        inline = small is not None and len(small) <= budget
        if small is not None and inline:
            budget -= len(small)
            blocks.append(ImageContent(data=base64.b64encode(small).decode("ascii"), mime_type="image/png"))
        summary.append({"uri": figure.uri, "bytes": len(figure.png), "inline_bytes": len(small or b"")
                        if inline else 0})
    return blocks, summary


def downscaled(png: bytes, *, max_side: int = INLINE_MAX_SIDE) -> bytes | None:
    """A PNG of at most ``max_side`` pixels a side (the figure itself when it is that
    small already); None when it cannot be read."""
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)  # a figure, not a bomb
            with Image.open(io.BytesIO(png)) as image:
                if max(image.size) <= max_side:
                    return png
                small = image.convert("RGB")
                small.thumbnail((max_side, max_side))
                # Resampling makes many new colours; a palette of 64 keeps a chart legible at a
                # third of the bytes (a plain resize comes out bigger than matplotlib's own PNG).
                out = io.BytesIO()
                small.quantize(colors=INLINE_COLOURS).save(out, "PNG", optimize=True)
                return out.getvalue()
    except (OSError, ValueError, Image.DecompressionBombWarning, Image.DecompressionBombError):
        return None


# -- reading and listing --------------------------------------------------------------------


@contextlib.contextmanager
def _as_resource_error() -> Iterator[None]:
    """The front ends' one mapping, as the SDK's resource errors: not found (404s) as
    ResourceNotFoundError, other expected failures as ResourceError with their message."""
    try:
        yield
    except (ResourceError, MCPError):
        raise
    except Exception as exc:
        failure = classify(exc)
        if not failure.expected:
            raise
        if failure.http_status in (404, 410):
            raise ResourceNotFoundError(failure.message) from exc
        raise ResourceError(failure.message) from exc


class Resources:
    """The tenant's conversations as MCP resources (see the module)."""

    def __init__(self, get_service: Callable[[], SessionService]) -> None:
        self._get_service = get_service

    async def _record(self, ctx: Context[Any, Any], sid: str) -> SessionRecord:
        request = ctx.request_context.request if ctx is not None else None
        return await self._get_service().get(tenant_of_request(request), sid)

    async def notebook(self, session_id: str, ctx: Context[Any, Any]) -> str:
        """The audit notebook as .ipynb JSON."""
        import json

        with _as_resource_error():
            record = await self._record(ctx, session_id)
            notebook = await asyncio.to_thread(self._get_service().notebook, record)
            return json.dumps(notebook, ensure_ascii=False)

    async def figure(self, session_id: str, cell: str, n: str, ctx: Context[Any, Any]) -> bytes:
        """A figure's PNG bytes, exactly as the notebook holds them."""
        with _as_resource_error():
            record = await self._record(ctx, session_id)
            notebook = await asyncio.to_thread(self._get_service().notebook, record)
            cells = notebook.get("cells", [])
            index, number = int(cell) if cell.isdigit() else -1, int(n) if n.isdigit() else 0
            found = cell_figures(cells[index]) if 0 <= index < len(cells) else []
            if not 1 <= number <= len(found):
                raise FileNotFoundError(f"no figure {cell}-{n} in session {session_id}")
            return found[number - 1]

    async def file(self, session_id: str, path: str, ctx: Context[Any, Any]) -> bytes:
        """A file of the working directory (at most the server's upload limit)."""
        service = self._get_service()
        with _as_resource_error():
            record = await self._record(ctx, session_id)
            fd, size = await asyncio.to_thread(open_inside, record.workdir, path)
            try:
                if size > service.config.max_upload_bytes:
                    limit = service.config.max_upload_bytes
                    raise ResourceError(f"{path!r} is {size:,} bytes, over the {limit:,} a resource may "
                                        "have here; download it over HTTP")
                return await asyncio.to_thread(_read_all, fd)
            finally:
                os.close(fd)

    async def listing(self, tenant: str) -> list[Resource]:
        """Every conversation's notebook, figures and files, for ``tenant``."""
        service = self._get_service()
        found: list[Resource] = []
        for record in await service.sessions_of(tenant):
            found.extend(await asyncio.to_thread(_session_resources, service, record))
        return found

    def register(self, server: MCPServer[Any]) -> None:
        """Add the templates (reading) and the middleware (listing, subscription checks)."""
        base = f"{SCHEME}://sessions/{{session_id}}"
        server.resource(f"{base}/notebook", name="notebook", mime_type=NOTEBOOK_MIME,
                        description="A conversation's audit notebook (.ipynb).")(self.notebook)
        server.resource(f"{base}/figures/{{cell}}-{{n}}.png", name="figure", mime_type="image/png",
                        description="The n-th figure (from 1) of the cell at a position of the notebook "
                                    "(0-based).")(self.figure)
        server.resource(f"{base}/files/{{+path}}", name="file", mime_type="application/octet-stream",
                        description="A file in a conversation's working directory.")(self.file)
        server.middleware.append(self._middleware)

    async def _middleware(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method == "resources/list":
            return ListResourcesResult(resources=await self.listing(tenant_of_request(ctx.request)))
        if ctx.method == "subscriptions/listen":
            await self._check_subscriptions(ctx)
        return await call_next(ctx)

    async def _check_subscriptions(self, ctx: Any) -> None:
        """Refuse a listen that names another tenant's (or no) session, as not found."""
        notifications = (ctx.params or {}).get("notifications") or {}
        uris = notifications.get("resourceSubscriptions") or [] if isinstance(notifications, dict) else []
        tenant = tenant_of_request(ctx.request)
        for uri in uris if isinstance(uris, list) else []:
            match = _SESSION_URI.match(str(uri))
            if match is None:
                continue
            try:
                await self._get_service().get(tenant, match.group(1))
            except Exception as exc:
                raise MCPError(INVALID_PARAMS, f"cannot subscribe to {uri}: {classify(exc).message}") from exc


def _session_resources(service: SessionService, record: SessionRecord) -> list[Resource]:
    """One conversation's resources (in a thread: a dormant notebook is read from disk)."""
    label = f" ({record.label})" if record.label else ""
    found = [Resource(uri=notebook_uri(record.id), name=f"notebook {record.id}{label}",
                      mime_type=NOTEBOOK_MIME, description=f"The audit notebook of {record.id}{label}")]
    try:
        cells = service.notebook(record).get("cells", [])
    except Exception:  # a notebook that went away: the session's files may still be listed
        cells = []
    for index, cell in enumerate(cells):
        for n, png in enumerate(cell_figures(cell) if isinstance(cell, dict) else [], start=1):
            found.append(Resource(uri=figure_uri(record.id, index, n), mime_type="image/png", size=len(png),
                                  name=f"figure {index}-{n} of {record.id}"))
    infos = _files.listing(record.workdir) if record.workdir.is_dir() else []
    for info in infos:
        mime = mimetypes.guess_type(info.name)[0] or "application/octet-stream"
        found.append(Resource(uri=file_uri(record.id, info.name), name=f"{info.name} ({record.id})",
                              mime_type=mime, size=info.size))
    return found


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


__all__ = ["INLINE_MAX_SIDE", "NOTEBOOK_MIME", "SCHEME", "Figure", "Resources", "cell_figures",
           "downscaled", "figure_content", "figure_uri", "figures_of", "file_uri", "notebook_uri"]
