"""An answer's citations in the audit notebook, rendered by nbconvert and opened in Chromium."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import nbformat
from nbconvert import HTMLExporter

from kernel_analyst import Analyst, SessionManager
from kernel_analyst.agent.testing import ScriptedChatModel

from .conftest import SEABORN
from .web_fixtures import browser, needs_chromium  # noqa: F401

pytestmark = needs_chromium

SURVIVAL = "import pandas as pd\ndf = pd.read_csv('titanic.csv')\nprint(df['survived'].mean())"


async def test_the_answer_cell_links_each_number_to_its_cell(browser: Any, manager: SessionManager,  # noqa: F811
                                                              tmp_path: Path) -> None:
    answer_text = "38.4% of the passengers survived; 577 of them were men."  # 577: no cell computed it
    # the made-up 577 goes back twice; the third answer is given, marked
    model = ScriptedChatModel(script=[f"```python\n{SURVIVAL}\n```", answer_text, answer_text, answer_text])
    cid = f"claims-html-{uuid.uuid4().hex[:8]}"
    analyst = Analyst(model, manager, protocol="code", profile_files=False)  # the model's cell is cell 1
    answer = await analyst.ask(cid, "How many survived?", files=[SEABORN / "titanic.csv"])
    assert answer.claims is not None
    assert answer.claims.summary() == "2 numbers: 1 from cell 1; 1 unsupported: 577"
    notebook = await (await manager.session(cid)).export(tmp_path / "audit.ipynb")
    await manager.close(cid)
    cell_id = next(c.id for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code")
    html, _ = HTMLExporter().from_filename(str(notebook))
    page_file = tmp_path / "audit.html"
    page_file.write_text(html, encoding="utf-8")

    context = await browser.new_context(viewport={"width": 1100, "height": 700})
    page = await context.new_page()
    await page.goto(page_file.as_uri())
    link = page.locator(f'a[href="#cell-id={cell_id}"]')
    assert await link.inner_text() == "38.4%"
    assert "cell [1] stdout: 0.3838383838383838" in (await link.get_attribute("title") or "")
    mark = page.locator("mark")
    assert await mark.inner_text() == "577" and "unsupported" in (await mark.get_attribute("title") or "")
    assert "2 numbers: 1 from cell 1; 1 unsupported: 577" in await page.locator("em").last.inner_text()
    target = page.locator(f'[id="cell-id={cell_id}"]')
    assert await target.count() == 1, "nbconvert gives the cell the anchor the link points to"
    shot = tmp_path / "claims-answer.png"
    await page.locator("mark").scroll_into_view_if_needed()
    await page.screenshot(path=str(shot))
    await link.click()
    scrolled = "e => { const r = e.getBoundingClientRect(); return r.top >= -1 && r.top < 200; }"
    assert await target.evaluate(scrolled), "the link scrolls to its cell"
    keep = os.environ.get("KA_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    await context.close()
