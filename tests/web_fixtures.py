"""Real headless Chromium (Debian's package, driven by Playwright) for the web page tests:
one browser per module, pages on the shared server, screenshots kept for people to look at.

Screenshots go to the test's tmp dir and are copied to ``$KA_SHOTS_DIR`` (default: a
``front-shots`` folder in the system's temp dir), so the latest run's pictures are in one
place.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from .server_fixtures import RunningServer

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RECORD_ALERTS = "window.__alerts = []; window.alert = (m) => window.__alerts.push(String(m));"
SHOTS_DIR = Path(os.environ.get("KA_SHOTS_DIR") or Path(tempfile.gettempdir()) / "front-shots")

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(),
                                    reason="Debian's chromium is not installed (make sysdeps)")


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    """One Chromium for the module."""
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


def busy_pixels(png: bytes) -> int:
    """How many distinct colours a screenshot has (a blank one has one or two)."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=1 << 20) or [])


async def shoot(target: Any, tmp_path: Path, name: str, *, full_page: bool = False) -> bytes:
    """Screenshot ``target`` (a page or a locator) into ``tmp_path`` and the shots folder."""
    path = tmp_path / f"{name}.png"
    options: dict[str, Any] = {"path": str(path)}
    if full_page:
        options["full_page"] = True
    png: bytes = await target.screenshot(**options)
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, SHOTS_DIR / path.name)
    return png


async def open_page(browser: Any, server: RunningServer, fragment: str = "", *, tenant: str = "alice",
                    sign_in: bool = True) -> tuple[Any, Any, Watch]:
    """A new browser context on the page, signed in as ``tenant`` (its token checked)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = await context.new_page()
    watch = Watch(page)
    await page.add_init_script(RECORD_ALERTS)  # a payload that ran would call alert()
    await page.goto(f"{server.url}/{fragment}")
    if sign_in:
        await page.fill("#token", server.tokens[tenant])
        await page.click("#save-token")
        await page.wait_for_selector("body[data-signed-in=yes]")
    return context, page, watch


async def run_cell(page: Any, code: str, *, wait: bool = True) -> Any:
    """Type ``code`` into the input and run it with Shift+Enter; return the new cell (with
    ``wait``, once the run has settled: the cell finished and the page no longer busy)."""
    before = await page.locator("#cells .cell.code").count()
    await page.fill("#input", code)
    await page.press("#input", "Shift+Enter")
    cell = page.locator("#cells .cell.code").nth(before)
    await cell.wait_for()
    if wait:
        await page.wait_for_function(
            "n => { const c = document.querySelectorAll('#cells .cell.code')[n];"
            " return c && !c.classList.contains('status-running'); }", arg=before, timeout=60_000)
        await page.wait_for_selector("body[data-busy=no]", state="attached", timeout=60_000)
    return cell


async def drop_files(page: Any, files: dict[str, str]) -> None:
    """Drop text files on the drop zone, as a user dragging them from a file manager."""
    await page.evaluate("""(files) => {
        const data = new DataTransfer();
        for (const [name, text] of Object.entries(files)) data.items.add(new File([text], name));
        const zone = document.getElementById("dropzone");
        for (const type of ["dragenter", "dragover", "drop"]) {
            zone.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
        }
    }""", files)


@pytest.fixture
async def clean_sessions(server: RunningServer) -> AsyncIterator[None]:
    """Delete the sessions a test's pages created (the shared server has small limits)."""
    before: dict[str, set[str]] = {}
    for tenant in server.tokens:
        async with server.client(tenant) as client:
            before[tenant] = {s["id"] for s in (await client.get("/sessions")).json()["sessions"]}
    yield
    for tenant, known in before.items():
        async with server.client(tenant) as client:
            for session in (await client.get("/sessions")).json()["sessions"]:
                if session["id"] not in known:
                    await client.delete(f"/sessions/{session['id']}")
