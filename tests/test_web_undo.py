"""The web page's Undo button in real headless Chromium: a wrong inplace dropna is undone,
the cell stays in the notebook marked undone, and the variable is back."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .server_fixtures import RunningServer, server  # noqa: F401
from .web_fixtures import (  # noqa: F401
    browser,
    busy_pixels,
    clean_sessions,
    needs_chromium,
    open_page,
    run_cell,
    shoot,
)

pytestmark = [needs_chromium, pytest.mark.usefixtures("clean_sessions")]

MAKE = "import pandas as pd\ndf = pd.DataFrame({'a': [1.0, None, 3.0, 4.0], 'b': [None, 2.0, 3.0, 4.0]})"
WRONG = "df.dropna(inplace=True)\nlen(df)"


async def test_undo_button(browser: Any, server: RunningServer, tmp_path: Path) -> None:  # noqa: F811
    context, page, watch = await open_page(browser, server)
    try:
        assert await page.is_disabled("#undo"), "nothing to undo before a session exists"
        await run_cell(page, MAKE)
        wrong = await run_cell(page, WRONG)
        assert (await wrong.locator(".outputs").inner_text()).strip().endswith("2")
        await page.wait_for_selector("#variables td:text-is('2 × 2')", timeout=30_000)

        await page.click("#undo")
        await page.wait_for_selector("#status.done:has-text('Undid [2]')", timeout=60_000)
        status = await page.inner_text("#status")
        assert status == "Undid [2]: the variables are as they were before cell [2].", status
        undone = page.locator("#cells .cell.code.undone")
        assert await undone.count() == 1
        assert "df.dropna(inplace=True)" in await undone.locator("pre.source").inner_text()
        assert await undone.locator(".undone-badge").inner_text() == "undone"
        assert "Undid [2]" in await page.locator("#cells .cell.markdown").last.inner_text()
        await page.wait_for_selector("#variables td:text-is('4 × 2')", timeout=30_000)

        back = await run_cell(page, "len(df)")
        assert (await back.locator(".outputs").inner_text()).strip() == "4"
        assert await back.locator(".prompt").inner_text() == "[3]"
        png = await shoot(page, tmp_path, "undo-button")
        assert busy_pixels(png) > 200
        shutil.copyfile(tmp_path / "undo-button.png", Path(tempfile.gettempdir()) / "undo-button.png")

        # Undo again: [3], then [1] (the checkpoint before [2] was used), then nothing is left.
        await page.click("#undo")
        await page.wait_for_selector("#status.done:has-text('Undid [3]')", timeout=60_000)
        await page.click("#undo")
        await page.wait_for_selector("#status.done:has-text('Undid [1]')", timeout=60_000)
        await page.click("#undo")
        await page.wait_for_selector("#status.stopped:has-text('Nothing to undo')", timeout=60_000)
        # The last undo's 409 is the one error the browser logs (every failed fetch is logged).
        assert watch.errors == ["Failed to load resource: the server responded with a status of 409 "
                                "(Conflict)"]
        assert watch.dialogs == []
    finally:
        await context.close()
