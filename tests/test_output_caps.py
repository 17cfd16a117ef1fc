"""Any output is bounded before it leaves the kernel: results, displays and errors, not
only streams (so the host's memory stays bounded whatever a cell returns).

Measured as this process's peak resident memory (VmHWM, reset through
/proc/self/clear_refs) while the cells run, under every isolation level.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .test_sandbox_support import ALL_LEVELS, ManagerFactory, manager_factory, tracked

MB = 1024 * 1024
LIMIT = 100_000  # Limits.max_output_bytes here
RICH = 2_000_000  # Limits.max_rich_output_bytes here

HUGE = {
    "a 200 MB result": "'x' * 200_000_000",
    "a 200 MB HTML display": ("from IPython.display import HTML, display\n"
                              "display(HTML('<p>' + 'h' * 200_000_000 + '</p>'))"),
    "a 50 MB PNG": ("import os\nfrom IPython.display import Image, display\n"
                    "display(Image(data=b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(50_000_000), format='png'))"),
    "a 200 MB error message": "raise ValueError('e' * 200_000_000)",
}


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


@pytest.fixture
async def open_manager(tmp_path: Path) -> AsyncIterator[ManagerFactory]:
    async with manager_factory(tmp_path) as factory:
        yield factory


@pytest.mark.parametrize("level", ALL_LEVELS)
async def test_huge_results_displays_and_errors_are_capped_in_the_kernel(
        level: str, open_manager: ManagerFactory) -> None:
    m = await open_manager(level, max_output_bytes=LIMIT, max_rich_output_bytes=RICH,
                           memory_mb=2048, timeout_s=60.0)
    s = await tracked(m, "huge")
    await s.run("1")  # the kernel is warm; what follows is the outputs' cost only
    _reset_peak()
    base_kb = _status_kb("VmRSS")
    for name, code in HUGE.items():
        ex = await s.run(code)
        size = len(json.dumps(ex.outputs))
        assert size < LIMIT + RICH, (name, size)
        assert "[kernel-analyst]" in json.dumps(ex.outputs), (name, "the cut is said")
        assert ex.state == "kept", name
    grown_mb = (_status_kb("VmHWM") - base_kb) / 1024
    assert grown_mb < 60, f"the host's peak memory grew by {grown_mb:.0f} MB while receiving"
    result, html, png, error = await _last(s, len(HUGE))
    plain = result["data"]["text/plain"]
    assert plain.startswith("'xxx") and len(plain) <= LIMIT + 500
    assert "text/html" not in html["data"] and "text/html of" in html["data"]["text/plain"]
    assert "image/png" not in png["data"] and "image/png of" in png["data"]["text/plain"]
    assert error["ename"] == "ValueError" and len(error["evalue"]) <= LIMIT + 100
    assert sum(len(line) for line in error["traceback"]) <= LIMIT + 500
    s.check_audit()


async def _last(s: object, n: int) -> list[dict]:
    """The first output of each of the last ``n`` recorded cells."""
    session = s.session  # type: ignore[attr-defined]
    cells = [c for c in json.loads(session.notebook_path.read_text())["cells"] if c["cell_type"] == "code"]
    return [c["outputs"][0] for c in cells[-n:]]
