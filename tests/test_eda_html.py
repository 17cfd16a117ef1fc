"""The HTML report in real headless Chromium: summary first, a working table of contents,
code folded until clicked, figures that fit and are sharp (100 dpi), hostile names escaped.
Screenshots land in the test's tmp dir, and in $KA_SCREENSHOT_DIR when set (to look at)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from kernel_analyst import cli

from .conftest import SEABORN, TEST_ISOLATION
from .test_eda_report import generated
from .web_fixtures import RECORD_ALERTS, browser, needs_chromium  # noqa: F401

pytestmark = needs_chromium


async def _report(data: Path, out: Path, *extra: str) -> tuple[Path, Path]:
    notebook, page = out / f"{data.stem}.ipynb", out / f"{data.stem}.html"
    argv = ["eda", str(data), "-o", str(notebook), "--html", str(page), "--isolation", TEST_ISOLATION, *extra]
    code = await asyncio.to_thread(cli.main, argv)  # the CLI runs its own event loop
    assert code == 0
    return notebook, page


def _keep(shot: Path) -> None:
    target = os.environ.get("KA_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


async def _open(browser: Any, page_file: Path) -> tuple[Any, Any, list[str]]:  # noqa: F811
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    await page.add_init_script(RECORD_ALERTS)
    await page.goto(page_file.as_uri())
    return context, page, errors


def _figures(notebook: Path) -> list[Image.Image]:
    cells = json.loads(notebook.read_text())["cells"]
    pngs = [o["data"]["image/png"] for c in cells if c["cell_type"] == "code" for o in c["outputs"]
            if "image/png" in o.get("data", {})]
    return [Image.open(io.BytesIO(base64.b64decode("".join(p)))) for p in pngs]


@pytest.mark.parametrize(("data", "extra"), [
    (SEABORN / "penguins.csv", ("--target", "species")),
    (SEABORN / "taxis.csv", ()),
    (None, ()),  # the generated table with one crafted column per alert
], ids=["penguins-target", "taxis", "generated"])
async def test_html_report_reads_well(browser: Any, tmp_path: Path, data: Path | None,  # noqa: F811
                                      extra: tuple[str, ...]) -> None:
    source = data or generated(tmp_path / "held_out.csv")
    notebook, page_file = await _report(source, tmp_path / "out", *extra)
    figures = _figures(notebook)
    assert len(figures) >= 4
    for figure in figures:
        assert figure.info["dpi"][0] == pytest.approx(100, abs=0.5) and figure.width >= 500

    context, page, errors = await _open(browser, page_file)
    try:
        code_blocks = page.locator("details.code")
        code_cells = sum(c["cell_type"] == "code" for c in json.loads(notebook.read_text())["cells"])
        assert await code_blocks.count() == code_cells
        assert await page.locator("details.code[open]").count() == 0
        assert not await page.locator("details.code pre").first.is_visible()
        order = await page.evaluate("""() => {
            const summary = document.querySelector('section.summary');
            const code = document.querySelector('details.code');
            return summary.compareDocumentPosition(code) & Node.DOCUMENT_POSITION_FOLLOWING;
        }""")
        assert order, "the summary must come before any code"
        links = await page.locator("nav.toc a").evaluate_all(
            "links => links.map(a => [a.textContent, !!document.querySelector(a.getAttribute('href'))])")
        assert len(links) >= 12 and all(found for _, found in links), links
        assert [text for text, _ in links][1] == "Summary of findings"
        overflow = await page.evaluate("""() => {
            const main = document.querySelector('main').getBoundingClientRect();
            return [...document.querySelectorAll('main img')].filter(
                img => img.naturalWidth === 0 || img.getBoundingClientRect().right > main.right + 1).length;
        }""")
        assert overflow == 0, "an image is broken or wider than the page"
        top = tmp_path / f"eda-{source.stem}-top.png"
        await page.screenshot(path=str(top))
        full = tmp_path / f"eda-{source.stem}-full.png"
        await page.screenshot(path=str(full), full_page=True)
        await page.locator("details.code > summary").nth(1).click()
        assert await page.locator("details.code pre").nth(1).is_visible()
        assert "read_" in await page.locator("details.code pre").nth(1).inner_text()
        opened = tmp_path / f"eda-{source.stem}-code-open.png"
        await page.locator("details.code").nth(1).screenshot(path=str(opened))
        for shot in (top, full, opened):
            _keep(shot)
            assert len(Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50
        assert errors == [] and await page.evaluate("window.__alerts") == []
    finally:
        await context.close()


async def test_hostile_names_and_values_stay_text(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    data = tmp_path / "hostile.csv"
    data.write_text('"<img src=x onerror=alert(1)>",note\n1,"<script>alert(2)</script>"\n2,b\n3,b\n')
    _, page_file = await _report(data, tmp_path / "out", "--steps", "alerts,categories")
    context, page, errors = await _open(browser, page_file)
    try:
        assert await page.locator("main img[src='x']").count() == 0
        assert await page.locator("main script").count() == 0
        assert "<img src=x onerror=alert(1)>" in await page.locator("main").inner_text()
        assert await page.evaluate("window.__alerts") == [] and errors == []
    finally:
        await context.close()
