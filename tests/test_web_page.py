"""The web page in real headless Chromium (Debian's package, driven by Playwright):
drag-and-drop upload, the EDA playbook streaming in with its progress, notebook download,
screenshots checked for the expected elements; and the injection fixture rendered with no
script run and no attribute injected (it is only ever rendered, never executed)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_analyst.eda import STEPS

from .conftest import NOTEBOOKS_REAL, SEABORN
from .server_fixtures import RunningServer, create_session, server  # noqa: F401
from .web_fixtures import (  # noqa: F401
    RECORD_ALERTS,
    Watch,
    browser,
    busy_pixels,
    clean_sessions,
    drop_files,
    needs_chromium,
    open_page,
    run_cell,
    shoot,
)

INJECTION = NOTEBOOKS_REAL / "nbconvert" / "notebook_inject_DO_NOT_EXECUTE.ipynb"

pytestmark = [needs_chromium, pytest.mark.usefixtures("clean_sessions")]


async def test_eda_in_the_page(browser: Any, server: RunningServer, tmp_path: Path) -> None:  # noqa: F811
    context, page, watch = await open_page(browser, server)
    try:
        await drop_files(page, {"tips.csv": (SEABORN / "tips.csv").read_text()})
        await page.wait_for_selector("#files li:has-text('tips.csv') button.eda:enabled", timeout=30_000)
        await page.click("#files li:has-text('tips.csv') button.eda")
        await page.wait_for_selector("#progress.running:has-text('Step ')", timeout=60_000)
        progress = await page.inner_text("#progress")
        total = len(STEPS) + 1  # setup, loading, every step but target (no target given)
        assert progress.startswith("Step ") and f" of {total}: " in progress, progress
        await page.wait_for_selector("#status.done:has-text('EDA of tips.csv')", timeout=120_000)
        assert f"{total} cells, all ran without error" in await page.inner_text("#status")
        assert (await page.inner_text("#progress")).startswith(f"Step {total} of {total}: Column profiles")
        assert await page.locator(".cell.code").count() == total
        assert await page.locator(".cell.code.status-ok").count() == total
        assert await page.locator(".cell.markdown").count() >= 3
        # Findings first, as in the saved report: the summary sits right under the title.
        second = page.locator("#cells > .cell").nth(1)
        assert "Summary of findings" in await second.inner_text()
        assert await page.locator(".cell .output-html table").count() >= 1
        assert await page.locator(".cell img.output-image").count() >= 2
        prompts = await page.locator(".cell.code .prompt").all_inner_texts()
        assert prompts == [f"[{n}]" for n in range(1, total + 1)], prompts
        ask_mode = "input[name=mode][value=ask]"
        assert await page.is_disabled(ask_mode), "ask needs a model; this server has none"
        # The input sits after the last result; scrolled half-way up, the EDA's progress and
        # the input both stay in view.
        await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        last_cell = await page.locator(".cell").last.bounding_box()
        composer = await page.locator("#composer").bounding_box()
        assert last_cell and composer and composer["y"] >= last_cell["y"] + last_cell["height"] - 1
        await page.evaluate("window.scrollTo(0, document.body.scrollHeight / 2)")
        for element in ("#progress", "#composer"):
            box = await page.locator(element).bounding_box()
            assert box and box["y"] >= 0 and box["y"] + box["height"] <= 900, (element, box)
        viewport = await shoot(page, tmp_path, "eda-scrolled")
        assert busy_pixels(viewport) > 200

        shot = await shoot(page, tmp_path, "eda", full_page=True)
        assert busy_pixels(shot) > 200
        plot = await page.locator(".cell img.output-image").first.screenshot()
        assert busy_pixels(plot) > 20, "the first figure looks blank"
        header = await page.locator("header").screenshot()
        assert busy_pixels(header) > 5

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
    context, page, watch = await open_page(browser, server)
    try:
        await run_cell(page, "from IPython.display import HTML, display\n"
                             "display(HTML('<b id=\"ok\">bold</b><img src=x onerror=\"alert(1)\">"
                             "<script>alert(2)</script><a href=\"javascript:alert(3)\">link</a>'))")
        await page.wait_for_selector(".cell .output-html b", timeout=60_000)
        html = await page.inner_html("#cells .outputs")
        assert "<b>bold</b>" in html
        assert "onerror" not in html and "<script" not in html and "javascript:" not in html
        assert await page.evaluate("window.__alerts") == []
        assert watch.dialogs == [] and watch.errors == []
    finally:
        await context.close()


async def test_a_kernel_death_says_why(browser: Any, server: RunningServer, tmp_path: Path) -> None:  # noqa: F811
    context, page, watch = await open_page(browser, server)
    try:
        cell = await run_cell(page, "import os\nos._exit(3)")
        assert "status-died" in (await cell.get_attribute("class") or "")
        await page.wait_for_selector("#status:has-text('kernel died')", timeout=30_000)
        status = await page.inner_text("#status")
        assert "the kernel process exited with code 3" in status, status
        png = await shoot(page.locator("main"), tmp_path, "kernel-death-status")
        assert busy_pixels(png) > 2
        assert watch.errors == []
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
    """A dormant session whose notebook on disk is the injection fixture (copied, never run)."""
    async with server.client("alice") as client:
        sid = await create_session(client, "injection")
        record = server.call(server.service.get("alice", sid))
        assert server.call(server.service.sleep(record, "idle"))
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
        if "id" in attrs:  # a code cell's anchor, and nothing else
            assert tag == "section" and re.fullmatch(r"cell-id=[A-Za-z0-9_-]{1,64}", attrs["id"] or ""), attrs
            attrs = {k: v for k, v in attrs.items() if k != "id"}
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
        shot = await shoot(page, tmp_path, "injection", full_page=True)
        assert busy_pixels(shot) > 20
    finally:
        await context.close()

    # And inside the page's sandboxed notebook viewer.
    context, page, watch = await open_page(browser, server, f"#session={injected_session}")
    try:
        # Reopened from the list: its cells render safely in the page itself, read-only.
        await page.wait_for_selector("#status.dormant:has-text('dormant')")
        assert await page.locator("#cells .cell").count() == 15
        assert await page.evaluate("document.querySelectorAll('#cells script, #cells iframe').length") == 0
        injected = await page.evaluate("""() => [...document.querySelectorAll('#cells *')].flatMap(
            el => [...el.attributes].map(a => a.name)).filter(n => n.startsWith('on') || n === 'style')""")
        assert injected == []
        await shoot(page, tmp_path, "injection-reopened", full_page=True)
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
