"""A stock JupyterLab on the agent's conversation: the same live kernel, one trail, and
back to the agent.

One ``jupyter lab --gateway-url`` (jupyter_server 2 and JupyterLab 4, unmodified, the
service's token as its gateway token) serves the module, at a service whose model is
scripted:

- through jupyter_server's own REST and channels websocket: it offers the tenant's
  conversations (by label) and no other tenant's, opens a session on one, ``df.shape``
  answers from the agent's ``df``, the cells are in the conversation's notebook as the
  person's, and the agent's next question is told of them;
- in headless Chromium: a notebook started from the conversation's launcher card runs a
  cell on the agent's ``df``, shows a plot, and stops a long cell with the interrupt
  button; the service's own page then shows those cells, marked "by hand".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage

from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call

from .jupyter_fixtures import LabProcess, execute_request, kernel_socket
from .server_fixtures import RunningServer, create_session, parse_sse, start_server
from .web_fixtures import CHROMIUM, browser, needs_chromium, open_page, shoot  # noqa: F401

AGENT_DF = "import pandas as pd\ndf = pd.DataFrame({'fare': [7.25, 71.3, 8.05], 'survived': [0, 1, 1]})"
NOTES: list[str] = []  # what the model was told before each question


def _reply(call: ModelCall) -> Any:
    """Question 1 loads the table; any other is answered at once. Each question's note is kept."""
    last = call.last_message
    if isinstance(last, HumanMessage):
        NOTES.append(str(last.content))
        if "Load" in str(last.content):
            return tool_call(AGENT_DF, text="Loading the passengers.")
    return "Done."


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("lab-service"), model=ScriptedChatModel(function=_reply),
                           pool_size=0)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def lab(service: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabProcess]:
    running = LabProcess(tmp_path_factory.mktemp("lab"), service.url, service.tokens["alice"])
    yield running
    running.stop()


async def _ask(client: httpx.AsyncClient, sid: str, question: str) -> list[tuple[str, Any]]:
    response = await client.post(f"/sessions/{sid}/ask", json={"question": question, "files": []})
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1] == ("done", events[-1][1]) and events[-1][1]["status"] == "ok", events[-1]
    return events


def _lab_client(lab: LabProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=lab.url, headers=lab.headers, timeout=90)


async def test_jupyter_server_with_gateway_url_attaches_to_the_conversation(
        service: RunningServer, lab: LabProcess) -> None:
    # Clients are opened per step: one left idle through a step may meet the server's
    # keep-alive timeout just as it is reused.
    async with service.client("alice") as alice, service.client("bob") as bob:
        sid = await create_session(alice, label="titanic")
        hidden = await create_session(bob, label="bob's secret")
        await _ask(alice, sid, "Load the passengers.")
    async with _lab_client(lab) as jupyter:
        specs = (await jupyter.get("/api/kernelspecs")).json()["kernelspecs"]
        names = {name: spec["spec"]["display_name"] for name, spec in specs.items()}
        assert names[f"ka-{sid}"] == "titanic (kernel-analyst)"
        assert f"ka-{hidden}" not in names and "bob's secret (kernel-analyst)" not in names.values()
        started = await jupyter.post("/api/sessions", json={
            "path": "handoff.ipynb", "type": "notebook", "name": "", "kernel": {"name": f"ka-{sid}"}})
        assert started.status_code == 201, started.text
        kid = started.json()["kernel"]["id"]
        assert kid in [k["id"] for k in (await jupyter.get("/api/kernels")).json()]
        # jupyter_server's own channels websocket, relayed to the service's.
        async with kernel_socket(lab.url, kid, lab.token) as sock:
            shape = await sock.request(execute_request("df.shape"))
            assert shape.reply["content"]["status"] == "ok" and shape.text == "(3, 2)"  # type: ignore[index]
            model = await sock.request(execute_request("model = df.fare.mean()"))
            assert model.reply["content"]["status"] == "ok"  # type: ignore[index]
    async with _lab_client(lab) as jupyter:
        # Closing the notebook's session in Lab lets go of the kernel; the conversation goes on.
        assert (await jupyter.delete(f"/api/sessions/{started.json()['id']}")).status_code == 204
    async with service.client("alice") as alice, service.client("bob") as bob:
        nb = json.loads((await alice.get(f"/sessions/{sid}/notebook")).text)
        hand = [c for c in nb["cells"] if c["metadata"].get("kernel_analyst", {}).get("by") == "person"]
        assert [c["source"] for c in hand] == ["df.shape", "model = df.fare.mean()"]
        assert hand[0]["outputs"][0]["data"]["text/plain"] == "(3, 2)"
        assert (await alice.get(f"/sessions/{sid}")).json()["state"] == "open"
        NOTES.clear()
        await _ask(alice, sid, "What did I compute by hand?")
        assert "2 cells run by hand since your last answer: created model" in NOTES[0]
        assert "model: numpy.float64" in NOTES[0]  # the variable itself, in the note's listing
        await bob.delete(f"/sessions/{hidden}")


PLOT = "import matplotlib.pyplot as plt; plt.plot(df.fare, marker='o'); plt.title('fares'); plt.show()"
LONG = "import time; print('sleeping', flush=True); time.sleep(120)"


async def _run_cell(page: Any, code: str) -> Any:
    """Type ``code`` into the notebook's last cell as a person would, run it with
    Shift+Enter; the cell it ran in."""
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    cell = cells.nth(await cells.count() - 1)  # fixed now: running it adds a cell after it
    editor = cell.locator(".cm-content")
    await editor.click()
    await page.keyboard.type(code)
    await page.wait_for_function("([code]) => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]"
                                 ".at(-1).querySelector('.cm-content').innerText === code", arg=[code])
    await page.keyboard.press("Shift+Enter")
    return cell


@needs_chromium
async def test_jupyterlab_in_chromium_runs_plots_and_interrupts_on_the_conversation(
        service: RunningServer, lab: LabProcess, browser: Any, tmp_path: Path) -> None:  # noqa: F811
    async with service.client("alice") as alice:
        sid = await create_session(alice, label="fares")
        ran = await alice.post(f"/sessions/{sid}/execute", json={"code": AGENT_DF})
        assert ran.json()["status"] == "ok"
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    try:
        await page.goto(f"{lab.url}/lab?token={lab.token}")
        await page.locator(".jp-LauncherCard[title='fares (kernel-analyst)']").first.click(timeout=90_000)
        kernel_name = page.locator(".jp-Toolbar-kernelName", has_text="fares (kernel-analyst)")
        await kernel_name.wait_for(timeout=90_000)
        await page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=90_000)

        shape = await _run_cell(page, "df.shape")
        await shape.locator(".jp-OutputArea-output", has_text="(3, 2)").wait_for(timeout=60_000)
        plot = await _run_cell(page, PLOT)
        await plot.locator(".jp-RenderedImage img").wait_for(timeout=60_000)
        long = await _run_cell(page, LONG)
        await long.locator(".jp-OutputArea-output", has_text="sleeping").wait_for(timeout=60_000)
        await page.locator("[data-command='notebook:interrupt-kernel']").first.click()
        await long.locator(".jp-OutputArea-output", has_text="KeyboardInterrupt").wait_for(timeout=60_000)
        await shoot(page, tmp_path, "jupyterlab-on-a-conversation")
    finally:
        await context.close()

    # The service's page shows the person's cells in the conversation, marked.
    context, mine, _ = await open_page(browser, service, f"#session={sid}")
    try:
        marked = mine.locator("#cells .cell.code.by-person")
        await marked.nth(2).wait_for(timeout=60_000)
        assert await marked.count() == 3
        assert await mine.locator("#cells .cell.code").count() == 4  # the agent's first
        assert await marked.nth(1).locator("img").count() == 1  # the plot, in the trail
        assert "KeyboardInterrupt" in await marked.nth(2).inner_text()
        await shoot(mine, tmp_path, "web-page-cells-by-hand")
    finally:
        await context.close()
