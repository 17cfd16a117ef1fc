"""Shared fixtures: real kernels, shared across tests where state does not matter."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_analyst.kernels import Limits, SessionManager

from .gateway_fixtures import backend_manager, gateway, gateway_manager  # noqa: F401
from .postgres_fixtures import postgres  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SEABORN = SHARED / "datasets" / "csv" / "seaborn"
MESSY = SHARED / "datasets" / "csv" / "messy"
NOTEBOOKS_REAL = SHARED / "notebooks-real"

# Tests run kernels under "process" isolation unless told otherwise: clean environment
# and resource limits, no bubblewrap needed. Sandbox tests ask for "sandbox" themselves.
TEST_ISOLATION = os.environ.get("KA_TEST_ISOLATION", "process")


def test_limits(**changes: object) -> Limits:
    """Limits for tests: short timeouts so failures show quickly."""
    base = Limits(isolation=TEST_ISOLATION, timeout_s=60.0, startup_timeout_s=60.0)  # type: ignore[arg-type]
    return base.with_(**changes)


test_limits.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test

LONG_MODULES = ("test_failures.py", "test_sandbox_limits.py", "test_runs_service.py", "test_cli.py",
                "test_server_durable.py", "test_playbook.py", "test_web_notebook.py", "test_recovery.py")
"""The modules that take 45 s or more of one worker (``--durations=0`` summed per module,
2026-11-28; 1,348 s in all), longest first. ``make pytest`` hands whole modules to two
workers (``--dist loadfile --no-loadscope-reorder``) in collection order, so these go first
and the short ones fill in at the end: a long module started last would leave the other
worker idle for its length. A module missing here only runs later; nothing else depends on
the order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long modules first (:data:`LONG_MODULES`), the rest in their usual order."""
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONG_MODULES.index(name) if name in LONG_MODULES else len(LONG_MODULES)
    items.sort(key=rank)  # stable: each module's tests keep their order


@pytest.fixture(scope="session")
async def manager(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SessionManager]:
    """One manager for the whole run; tests take their own conversation ids."""
    root = tmp_path_factory.mktemp("sessions")
    async with SessionManager(root, limits=test_limits()) as m:
        yield m


@pytest.fixture
async def fresh_manager(tmp_path: Path) -> AsyncIterator[SessionManager]:
    """A manager of the test's own (for failure tests that need a clean slate)."""
    async with SessionManager(tmp_path / "sessions", limits=test_limits()) as m:
        yield m
