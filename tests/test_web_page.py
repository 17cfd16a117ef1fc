"""The web page in real headless Chromium (Debian's package, driven by Playwright):
drag-and-drop upload, the EDA playbook streaming in, notebook download, screenshots
checked for the expected elements; and the injection fixture rendered with no script
run and no attribute injected (it is only ever rendered, never executed)."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import pytest
from PIL import Image

from .conftest import NOTEBOOKS_REAL, SEABORN
from .server_fixtures import RunningServer, create_session, server  # noqa: F401

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
INJECTION = NOTEBOOKS_REAL / "nbconvert" / "notebook_inject_DO_NOT_EXECUTE.ipynb"
RECORD_ALERTS = "window.__alerts = []; window.alert = (m) => window.__alerts.push(String(m));"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="Debian's chromium is not installed (make sysdeps)")


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


class Watch:
    """Dialogs, console errors and page errors of one page."""

    def __init__(self, page: Any) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)

    async def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()


def _busy_pixels(png: bytes) -> int:
    """How many distinct colours a screenshot has (a blank one has one or two)."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=1 << 20) or [])


async def _open_page(browser: Any, server: RunningServer, fragment: str = "") -> tuple[Any, Any, Watch]:  # noqa: F811
    context = await browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    page = await context.new_page()
    watch = Watch(page)
    await page.add_init_script(RECORD_ALERTS)  # a payload that ran would call alert()
    await page.goto(f"{server.url}/{fragment}")
    await page.fill("#token", server.tokens["alice"])
    await page.click("#save-token")
    return context, page, watch


async def _drop_file(page: Any, name: str, text: str) -> None:
    await page.evaluate("""([name, text]) => {
        const data = new DataTransfer();
        data.items.add(new File([text], name, {type: "text/csv"}));
        const zone = document.getElementById("dropzone");
        for (const type of ["dragenter", "dragover", "drop"]) {
            zone.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
        }
    }""", [name, text])


async def test_eda_in_the_page(browser: Any, server: RunningServer, tmp_path: Path) -> None:  # noqa: F811
    context, page, watch = await _open_page(browser, server)
    try:
        assert await page.is_disabled("#run-eda")
        await _drop_file(page, "tips.csv", (SEABORN / "tips.csv").read_text())
        await page.wait_for_selector("#files li:has-text('tips.csv')", timeout=30_000)
        await page.click("#run-eda")
        await page.wait_for_selector("#status.done", timeout=120_000)
        assert "tips.csv" in await page.inner_text("#status")
        assert await page.locator(".cell.code").count() >= 8
        assert await page.locator(".cell.markdown").count() >= 3
        assert await page.locator(".cell .output-html table").count() >= 1
        assert await page.locator(".cell img.output-image").count() >= 2
        assert await page.locator(".cell.status-error").count() == 0
        assert await page.is_disabled("#ask"), "ask needs a model; this server has none"

        shot = await page.screenshot(full_page=True, path=str(tmp_path / "eda.png"))
        assert _busy_pixels(shot) > 200
        plot = await page.locator(".cell img.output-image").first.screenshot()
        assert _busy_pixels(plot) > 20, "the first figure looks blank"
        header = await page.locator("header").screenshot()
        assert _busy_pixels(header) > 5

        async with page.expect_download() as info:
            await page.click("#download-notebook")
        download = await info.value
        saved = tmp_path / "eda.ipynb"
        await download.save_as(str(saved))
        nb = nbformat.read(saved, as_version=4)
        nbformat.validate(nb)
        assert any("read_csv" in c.source for c in nb.cells if c.cell_type == "code")

        await page.click("#view-notebook")
        frame_element = page.locator("#notebook-frame")
        await frame_element.wait_for(state="visible")
        assert await frame_element.get_attribute("sandbox") == ""
        assert watch.dialogs == [] and watch.errors == []
        assert await page.evaluate("window.__alerts") == []
    finally:
        await context.close()


async def test_live_html_output_is_sanitised(browser: Any, server: RunningServer) -> None:  # noqa: F811
    context, page, watch = await _open_page(browser, server)
    try:
        await page.click("#code-panel summary")
        await page.fill("#code", "from IPython.display import HTML, display\n"
                                 "display(HTML('<b id=\"ok\">bold</b><img src=x onerror=\"alert(1)\">"
                                 "<script>alert(2)</script><a href=\"javascript:alert(3)\">link</a>'))")
        await page.click("#run-code")
        await page.wait_for_selector(".cell .output-html b", timeout=60_000)
        html = await page.inner_html("#cells .outputs")
        assert "<b>bold</b>" in html
        assert "onerror" not in html and "<script" not in html and "javascript:" not in html
        assert await page.evaluate("window.__alerts") == []
        assert watch.dialogs == []
    finally:
        await context.close()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


_ALLOWED_ATTRS = {"class", "title", "href", "colspan", "rowspan", "align", "border", "start", "src", "alt",
                  "width", "height", "charset", "http-equiv", "content", "name", "lang", "rel"}


@pytest.fixture
async def injected_session(server: RunningServer) -> AsyncIterator[str]:  # noqa: F811
    """A closed session whose notebook on disk is the injection fixture (copied, never run)."""
    async with server.client("alice") as client:
        sid = await create_session(client, "injection")
        record = server.service.get("alice", sid)
        server.call(server.service.close(record, "idle"))
        shutil.copyfile(INJECTION, record.notebook_path)
        yield sid
        await client.delete(f"/sessions/{sid}")


async def test_injection_fixture_html_is_inert(server: RunningServer, injected_session: str) -> None:  # noqa: F811
    async with server.client("alice") as client:
        response = await client.get(f"/sessions/{injected_session}/notebook.html")
        downloaded = json.loads((await client.get(f"/sessions/{injected_session}/notebook")).text)
    assert response.status_code == 200
    assert "script-src" not in response.headers["content-security-policy"]
    parser = _Tags()
    parser.feed(response.text)
    names = {tag for tag, _ in parser.tags}
    assert "script" not in names and "iframe" not in names and "object" not in names
    for tag, attrs in parser.tags:
        assert set(attrs) <= _ALLOWED_ATTRS, (tag, attrs)
        if tag == "img":
            assert (attrs["src"] or "").startswith(("data:image/png;base64,", "data:image/svg+xml;base64,"))
            assert set(attrs) <= {"class", "alt", "src", "width", "height"}
    assert "TITLE&lt;/title&gt;&lt;script&gt;" in response.text
    assert downloaded["metadata"]["title"].startswith("TITLE</title>")


async def test_injection_fixture_renders_safely_in_chromium(browser: Any, server: RunningServer,  # noqa: F811
                                                           injected_session: str, tmp_path: Path) -> None:
    # Straight to the rendered notebook, as a browser opening the HTML download would.
    context = await browser.new_context(extra_http_headers=server.headers("alice"))
    try:
        page = await context.new_page()
        watch = Watch(page)
        await page.add_init_script(RECORD_ALERTS)
        await page.goto(f"{server.url}/sessions/{injected_session}/notebook.html")
        await page.wait_for_selector("main.notebook")
        assert await page.evaluate("document.scripts.length") == 0
        assert await page.evaluate("window.__alerts") == [] and watch.dialogs == []
        title = await page.title()
        assert title.startswith("TITLE</title><script>alert('title')</script> (kernel-analyst session")
        injected = await page.evaluate("""() => [...document.querySelectorAll('*')].flatMap(
            el => [...el.attributes].map(a => a.name)).filter(n => n.startsWith('on') || n === 'style')""")
        assert injected == []
        assert await page.locator("text=<script>alert('markdown cell')</script>").count() == 1
        shot = await page.screenshot(full_page=True, path=str(tmp_path / "injection.png"))
        assert _busy_pixels(shot) > 20
    finally:
        await context.close()

    # And inside the page's sandboxed notebook viewer.
    context, page, watch = await _open_page(browser, server, f"#session={injected_session}")
    try:
        await page.click("#view-notebook")
        frame_element = page.locator("#notebook-frame")
        await frame_element.wait_for(state="visible")
        frame = page.frame_locator("#notebook-frame")
        await frame.locator("main.notebook").wait_for()
        assert await frame.locator("script").count() == 0
        assert await frame.locator(".cell").count() == 15
        assert watch.dialogs == [] and await page.evaluate("window.__alerts") == []
    finally:
        await context.close()
