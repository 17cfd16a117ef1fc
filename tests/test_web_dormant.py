"""A dormant session in the page (real Chromium, real server and kernels): listed as
dormant with why, reopened with its cells, files and recorded variables without waking
it, and woken by the next cell, which finds its variables; the resume marker shows
where the notebook has it. Screenshots of both states are saved."""

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
    drop_files,
    needs_chromium,
    open_page,
    run_cell,
    shoot,
)

pytestmark = [needs_chromium, pytest.mark.usefixtures("clean_sessions")]


async def test_a_dormant_session_is_shown_and_wakes_on_use(browser: Any, server: RunningServer,  # noqa: F811
                                                          tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server)
    try:
        await drop_files(page, {"prices.csv": "item,price\napple,3\npear,4\n"})
        await page.wait_for_selector("#files li:has-text('prices.csv')")
        await run_cell(page, "import pandas as pd\nprices = pd.read_csv('prices.csv')\nanswer = 6 * 7")
        sid = await page.evaluate("document.body.dataset.session")
    finally:
        await context.close()
    # The service culls it as an idle session (its housekeeping pass, here called at once).
    record = server.call(server.service.get("alice", sid))
    assert server.call(server.service.sleep(record, "idle"))

    context, page, watch = await open_page(browser, server, f"#session={sid}")
    try:
        await page.wait_for_selector("#status.dormant")
        assert "wake it" in await page.inner_text("#status")
        listed = page.locator(f"#sessions li.session.dormant.current[data-id='{sid}']")
        assert "dormant (idle" in await listed.inner_text()
        assert "dormant (idle" in await page.inner_text("#session-name")
        await page.wait_for_selector("#variables tbody tr:has-text('answer')")  # as recorded
        names = await page.locator("#variables tbody tr td:first-child").all_inner_texts()
        assert {"prices", "answer"} <= set(names), names
        assert await page.locator("#files li:has-text('prices.csv')").count() == 1
        assert await page.locator("#cells .cell.code").count() == 1
        assert await page.is_enabled("#run") and await page.is_enabled("#input")
        assert server.call(_holds_kernel(server, sid)) is False, "showing it did not wake it"
        shot = await shoot(page, tmp_path, "dormant-session")
        assert busy_pixels(shot) > 50
        shutil.copyfile(tmp_path / "dormant-session.png", Path(tempfile.gettempdir()) / "dormant-page.png")

        cell = await run_cell(page, "answer + int(prices.price.sum())")
        assert "49" in await cell.locator(".outputs").inner_text()
        assert "status-ok" in (await cell.get_attribute("class") or "")
        marker = page.locator("#cells .cell.role-resumed")
        assert await marker.count() == 1 and "woken after" in await marker.inner_text()
        # The marker stands before the cell that woke the session, as in the notebook.
        order = await page.locator("#cells .cell").evaluate_all(
            "cells => cells.map(c => c.classList.contains('role-resumed') ? 'marker' : 'cell')")
        assert order[-2:] == ["marker", "cell"], order
        await page.wait_for_selector(f"#sessions li.session.open.current[data-id='{sid}']")
        assert "dormant" not in await page.inner_text("#session-name")
        shot = await shoot(page, tmp_path, "dormant-session-woken")
        assert busy_pixels(shot) > 50
        assert watch.errors == [] and watch.dialogs == []
    finally:
        await context.close()


async def _holds_kernel(server: RunningServer, sid: str) -> bool:  # noqa: F811
    return server.service.manager.get(sid) is not None
