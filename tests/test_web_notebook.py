"""The page as a notebook, in real Chromium against a real server and real kernels: the
token is checked when it is set, a failed cell says so with its error first and a trimmed
traceback (the whole one a click away), Stop interrupts a running cell, several files go
up at once, the variables panel follows the kernel, a session reopens after a reload, and
an EDA of a file that is not a table is reported as failed. Every test saves screenshots.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
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


async def _variables(page: Any) -> dict[str, tuple[str, str]]:
    rows = await page.locator("#variables tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    return {name: (kind, shape) for name, kind, shape in rows}


async def test_the_token_is_checked_when_it_is_set(browser: Any, server: RunningServer,  # noqa: F811
                                                   tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server, sign_in=False)
    try:
        await page.fill("#token", "not-a-token-of-this-server-0123456789")
        await page.click("#save-token")
        await page.wait_for_selector("#status.error")
        status = await page.inner_text("#status")
        assert status.startswith("Token rejected") and "Token set" not in status, status
        assert await page.evaluate("sessionStorage.getItem('ka-token')") is None
        assert await page.is_disabled("#run") and await page.is_disabled("#new-session")
        assert await page.inner_text("#sessions") == "Sign in with your token to see your sessions."
        shot = await shoot(page, tmp_path, "token-rejected")
        assert busy_pixels(shot) > 50

        await page.fill("#token", server.tokens["bob"])
        await page.click("#save-token")
        await page.wait_for_selector("#status.done:has-text('Token accepted')")
        assert await page.is_enabled("#run") and await page.is_enabled("#new-session")
        # The browser logs the rejected request itself; nothing else went wrong.
        assert [e for e in watch.errors if "status of 401" not in e] == [] and watch.dialogs == []
    finally:
        await context.close()


async def test_a_failed_cell_leads_with_its_error(browser: Any, server: RunningServer,  # noqa: F811
                                                 tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server)
    try:
        first = await run_cell(page, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf.shape")
        assert await first.get_attribute("class") == "cell code status-ok"
        assert (await first.locator(".prompt").inner_text()) == "[1]"
        assert (await first.locator(".cell-status").inner_text()).startswith("ok · ")
        assert "(2, 1)" in await first.locator(".outputs").inner_text()

        failed = await run_cell(page, "print('before the error')\ndf['nope']")
        assert "status-failed" in (await failed.get_attribute("class") or "")
        assert (await failed.locator(".cell-status").inner_text()).startswith("failed · ")
        status = await page.inner_text("#status")
        assert status == "Cell [2] failed: KeyError: 'nope'", status
        assert "finished" not in status and await page.locator("#status.error").count() == 1

        error = failed.locator(".output-error")
        assert await error.locator(":scope > *").first.get_attribute("class") == "error-summary"
        assert await error.locator(".error-summary").inner_text() == "KeyError: 'nope'"
        trimmed = await error.locator(":scope > pre.traceback").inner_text()
        assert "Cell In[2], line 2" in trimmed and "----> 2 df['nope']" in trimmed
        assert trimmed.count("\n") < 16, trimmed
        for host_path in ("site-packages", sys.prefix, str(ROOT), "/usr/lib/python"):
            assert host_path not in trimmed, (host_path, trimmed)
        full = error.locator("details.traceback-full pre")
        assert not await full.is_visible()
        assert "library frame" in await error.locator("details summary").inner_text()
        await shoot(page, tmp_path, "failed-cell")

        await error.locator("details summary").click()
        assert await full.is_visible()
        whole = await full.inner_text()
        assert "site-packages" in whole and "The above exception was the direct cause" in whole
        assert whole.count("\n") > trimmed.count("\n") + 10
        await failed.scroll_into_view_if_needed()
        await shoot(page, tmp_path, "failed-cell-full-traceback")
        assert watch.errors == [] and watch.dialogs == []
    finally:
        await context.close()


async def test_stop_interrupts_the_running_cell(browser: Any, server: RunningServer,  # noqa: F811
                                                tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server)
    try:
        await run_cell(page, "kept = 'still here'")
        assert await page.is_disabled("#stop")
        looping = await run_cell(page, "print('looping', flush=True)\nwhile True:\n    pass", wait=False)
        await looping.locator(".outputs:has-text('looping')").wait_for()  # the kernel is in the loop
        assert "status-running" in (await looping.get_attribute("class") or "")
        assert await page.is_enabled("#stop") and await page.is_disabled("#run")
        await shoot(page, tmp_path, "stop-running")

        await page.click("#stop")
        await page.wait_for_selector("#cells .cell.code.status-interrupted", timeout=30_000)
        await page.wait_for_selector("body[data-busy=no]", state="attached")  # the run has settled
        assert await looping.locator(".cell-status").inner_text() != ""
        assert (await page.inner_text("#status")).startswith("Cell [2] was stopped (interrupted)")
        assert await looping.locator(".output-error .error-summary").inner_text() == (
            "interrupted (KeyboardInterrupt)")
        assert await page.is_disabled("#stop") and await page.is_enabled("#run")
        await shoot(page, tmp_path, "stop-stopped")

        after = await run_cell(page, "kept")  # the session and its variables survive
        assert "'still here'" in await after.locator(".outputs").inner_text()
        assert watch.errors == [] and watch.dialogs == []
    finally:
        await context.close()


async def test_several_files_and_the_variables_panel(browser: Any, server: RunningServer,  # noqa: F811
                                                     tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server)
    try:
        files = {"one.csv": b"x,y\n1,2\n3,4\n", "two.csv": b"x,y,z\n5,6,7\n", "notes.txt": b"hello\n"}
        # Every status the page shows, with the files it lists at that moment.
        await page.evaluate("""() => { window.__statuses = [];
            new MutationObserver(() => window.__statuses.push([document.getElementById('status').textContent,
                document.querySelectorAll('#files a.download').length]))
              .observe(document.getElementById('status'), {childList: true}); }""")
        await page.set_input_files("#file-input", files=[
            {"name": name, "mimeType": "text/plain", "buffer": data} for name, data in files.items()])
        await page.wait_for_function("n => document.querySelectorAll('#files a.download').length === n",
                                     arg=3)
        listed = await page.locator("#files a.download").all_inner_texts()
        assert sorted(listed) == sorted(files), listed
        statuses = await page.evaluate("window.__statuses")
        # No status runs ahead of what it announces: "Uploaded" comes with the three files.
        assert statuses[-1] == ["Uploaded one.csv, two.csv, notes.txt.", 3], statuses
        assert all(count == 0 for text, count in statuses[:-1]), statuses
        session = await page.inner_text(".session.current .session-open")
        assert session == "one.csv, two.csv, notes.txt"

        await run_cell(page, "import pandas as pd\none = pd.read_csv('one.csv')\n"
                             "two = pd.read_csv('two.csv')\nrows = len(one) + len(two)\n"
                             "with open('made.txt', 'w') as f:\n    f.write('new')")
        await page.wait_for_selector("#variables tbody tr:has-text('rows')")
        shown = await _variables(page)
        assert shown["one"] == ("DataFrame", "2 × 2") and shown["two"] == ("DataFrame", "1 × 3")
        assert await page.get_attribute("#variables tbody tr:has-text('one') td:nth-child(2)", "title") == (
            "pandas.DataFrame")
        assert shown["rows"][0] == "int"
        assert await page.locator("#no-variables").is_hidden()
        await page.wait_for_selector("#files a.download:text-is('made.txt')")  # files made by code appear

        async with page.expect_download() as info:
            await page.click("#files a.download:text-is('two.csv')")
        download = await info.value
        assert download.suggested_filename == "two.csv"
        saved = tmp_path / "two.csv"
        await download.save_as(str(saved))
        assert saved.read_bytes() == files["two.csv"]
        await shoot(page, tmp_path, "files-and-variables")
        assert watch.errors == [] and watch.dialogs == []
    finally:
        await context.close()


async def test_a_session_reopens_after_a_reload(browser: Any, server: RunningServer,  # noqa: F811
                                                tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server, tenant="carol")
    try:
        await run_cell(page, "x = 41")
        await run_cell(page, "print(x + 1)")
        await run_cell(page, "1 / 0")
        sid = await page.evaluate("document.body.dataset.session")
        before = await page.locator("#cells .cell").evaluate_all(
            "cells => cells.map(c => [c.className, c.querySelector('.prompt').textContent])")

        await page.reload()
        await page.wait_for_selector("#status.done:has-text('Reopened: 3 cells')")
        after = await page.locator("#cells .cell").evaluate_all(
            "cells => cells.map(c => [c.className, c.querySelector('.prompt').textContent])")
        assert after == before == [["cell code status-ok", "[1]"], ["cell code status-ok", "[2]"],
                                   ["cell code status-failed", "[3]"]]
        assert "42" in await page.locator("#cells .cell").nth(1).inner_text()
        assert "ZeroDivisionError: division by zero" in await page.locator("#cells .cell").nth(2).inner_text()
        durations = await page.locator("#cells .cell-status").all_inner_texts()
        assert all(" · " in d and d.endswith(" s") for d in durations), durations
        assert await page.get_attribute(".session.current", "data-id") == sid
        meta = await page.inner_text(".session.current .meta")
        assert "created " in meta and "used " in meta and meta.endswith("open"), meta
        await page.wait_for_selector("#variables tbody tr:has-text('x')")
        await shoot(page, tmp_path, "reopened-after-reload")

        await page.click("#new-session")
        assert await page.locator("#cells .cell").count() == 0
        # The New button re-renders the session list when its refresh returns, no session current;
        # a click in the moment the list is rebuilt may be lost with the button it was aimed at
        # (a fresh-clone run saw the reopen never come): the click waits for the new list.
        await page.wait_for_selector(".session.current", state="detached")
        await page.click(f".session[data-id='{sid}'] .session-open")
        await page.wait_for_selector("#status.done:has-text('Reopened: 3 cells')")
        cell = await run_cell(page, "x")  # it goes on where it was
        assert (await cell.locator(".prompt").inner_text()) == "[4]"
        assert "41" in await cell.locator(".outputs").inner_text()
        assert watch.errors == [] and watch.dialogs == []
    finally:
        await context.close()


def _xlsx_like() -> bytes:
    """A zip with a workbook's first member name: what an .xlsx looks like to a CSV reader."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as book:
        book.writestr("[Content_Types].xml", "<Types/>")
        book.writestr("xl/workbook.xml", "<workbook/>")
    return buffer.getvalue()


async def test_an_eda_that_cannot_read_its_file_is_failed(browser: Any, server: RunningServer,  # noqa: F811
                                                          tmp_path: Path) -> None:
    context, page, watch = await open_page(browser, server, tenant="bob")
    try:
        await page.set_input_files("#file-input", files=[
            {"name": "book.xlsx", "mimeType": "application/octet-stream", "buffer": _xlsx_like()}])
        await page.click("#files li:has-text('book.xlsx') button.eda")
        await page.wait_for_selector("#status.error:has-text('EDA of book.xlsx failed')", timeout=60_000)
        status = await page.inner_text("#status")
        assert "all ran without error" not in status and "0 cells" not in status, status
        assert await page.locator("#cells .cell.markdown:has-text('Could not read')").count() == 1
        await shoot(page, tmp_path, "eda-failed")
        assert watch.errors == [] and watch.dialogs == []
    finally:
        await context.close()


TWELVE_ROWS = b"x\n" + b"".join(b"%d\n" % i for i in range(12))


def _count_rows(call: Any) -> Any:
    """A scripted model: run one cell, then answer with what it printed."""
    from langchain_core.messages import ToolMessage

    from kernel_analyst.agent.testing import tool_call

    if isinstance(call.last_message, ToolMessage) or call.tool_outputs:
        # the row count came from the cell; "40 columns" from nowhere (sent back once, kept)
        return f"The table has **{call.tool_outputs[0].split()[0]}** rows and 40 columns."
    return tool_call("import pandas as pd\nprint(len(pd.read_csv('one.csv')))", text="Counting rows.")


async def _upload_and_ask(page: Any, question: str) -> None:
    """Upload the twelve-row table, switch to Ask, and ask ``question``."""
    await page.set_input_files("#file-input", files=[
        {"name": "one.csv", "mimeType": "text/csv", "buffer": TWELVE_ROWS}])
    await page.wait_for_selector("#files a.download:text-is('one.csv')")
    await page.check("input[name=mode][value=ask]")
    assert await page.inner_text("#run") == "Ask"
    await page.fill("#input", question)
    await page.press("#input", "Shift+Enter")


async def test_the_reply_shows_as_it_is_written(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from kernel_analyst.agent.testing import ScriptedChatModel

    from .server_fixtures import start_server

    model = ScriptedChatModel(function=_count_rows, chunk_delay_s=0.4)  # a word every 0.4 s
    running = start_server(tmp_path / "sessions", model=model, pool_size=0)
    try:
        context, page, watch = await open_page(browser, running)
        await _upload_and_ask(page, "How many rows?")
        # the answer's first words are on the page while the model is still writing it
        draft = page.locator("#cells .cell.draft .draft-text")
        await draft.filter(has_text="The table has").wait_for(timeout=60_000)
        written = await draft.last.inner_text()
        assert written.startswith("The table has") and "columns." not in written, written
        assert await page.locator("#status.done").count() == 0, "the answer is not in yet"
        await shoot(page, tmp_path, "ask-draft")
        await page.wait_for_selector("#status.done:has-text('Answered after 1 step')", timeout=60_000)
        assert await page.locator("#cells .cell.draft").count() == 0, "the answer took the draft's place"
        answer = page.locator("#cells .cell.answer")
        assert (await answer.inner_text()).startswith("The table has 12 rows and 40 columns.")
        assert watch.errors == [] and watch.dialogs == []
        await context.close()
    finally:
        running.stop()


async def test_asking_in_the_page(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from kernel_analyst.agent.testing import ScriptedChatModel

    from .server_fixtures import start_server

    running = start_server(tmp_path / "sessions", model=ScriptedChatModel(function=_count_rows), pool_size=0)
    try:
        context, page, watch = await open_page(browser, running)
        await _upload_and_ask(page, "How many rows?")
        await page.wait_for_selector("#status.done:has-text('Answered after 1 step')", timeout=60_000)
        cells = page.locator("#cells .cell")
        assert "How many rows?" in await cells.first.inner_text()
        # the uploaded table was loaded for the model before it was asked (the loader's cell [1])
        cells_of_code = page.locator("#cells .cell.code")
        assert await cells_of_code.count() == 2
        loader = await cells_of_code.first.inner_text()
        assert "pd.read_csv(" in loader and "'one.csv'" in loader and "12 rows" in loader
        code = cells_of_code.last
        assert "status-ok" in (await code.get_attribute("class") or "")
        assert await code.locator(".prompt").inner_text() == "[2]"
        assert "12" in await code.locator(".outputs").inner_text()
        answer = page.locator("#cells .cell.answer")
        assert (await answer.inner_text()).startswith("The table has 12 rows and 40 columns.")
        assert "2 numbers: 1 from cell 2; 1 unsupported: 40" in await answer.inner_text()
        # the number links to the cell that computed it; the unsupported one is marked
        link = answer.locator('a[href^="#cell-id="]')
        assert await link.inner_text() == "12"
        assert "cell [2] stdout: 12" in (await link.get_attribute("title") or "")
        assert await code.get_attribute("id") == (await link.get_attribute("href") or "")[1:]
        mark = answer.locator("mark")
        assert await mark.inner_text() == "40" and "unsupported" in (await mark.get_attribute("title") or "")
        hash_before = await page.evaluate("location.hash")
        await link.click()
        await page.wait_for_selector("#cells .cell.code.cited")
        assert await page.evaluate("location.hash") == hash_before, "the address keeps its session"
        await shoot(page, tmp_path, "ask")
        assert watch.errors == [] and watch.dialogs == []
        await context.close()
    finally:
        running.stop()
