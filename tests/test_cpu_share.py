"""A CPU share per kernel and a budget per owner (issue 29): the cgroup CPU controller's
files, a busy cell held to its quota, thread pools sized to the share in a forked kernel,
an owner's kernels below one budget, and the front ends' flags. This machine has cgroup
v1; v2 is checked on the files it would write."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import pytest

from kernel_analyst.frontend.flags import add_kernel_flags, add_tenant_cpus_flag, kernel_settings
from kernel_analyst.kernels import Execution, KernelSession, Limits, SessionManager
from kernel_analyst.kernels.launch import _cgroups, sandbox
from kernel_analyst.kernels.launch._cgroups import CpuBudget, CpuShare, OwnerCgroup
from kernel_analyst.kernels.launch._threads import thread_count, thread_environment
from kernel_analyst.server.cli import add_cli, config_from_args

from .conftest import test_limits

BUSY = ("import time\nstart, cpu = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - start < 0.6:\n    pass\n"
        "print(start, time.monotonic(), time.process_time() - cpu)")
"""A cell that wants a whole core for 0.6 s; it prints its window (CLOCK_MONOTONIC, one
clock for every process of the machine) and the CPU it got."""

SLACK_S = 0.05  # a period's quota carried over, and the scheduler's accounting slop


def held_to(cells: list[Execution], cores: float, group: Path) -> float:
    """Check that ``cells`` (BUSY, run at once) got at most ``cores`` over their common
    window, and that the group was throttled if they wanted more than that: on a machine
    busy enough that they never reached the share there is nothing to throttle. Returns
    the CPU seconds they got."""
    windows = [tuple(float(v) for v in ex.text.split()) for ex in cells]
    wall = max(end for _, end, _ in windows) - min(start for start, _, _ in windows)
    spent = sum(cpu for _, _, cpu in windows)
    assert spent <= cores * wall + SLACK_S, (spent, wall, cores)
    assert throttled(group) > 0 or spent < 0.9 * cores * wall, (spent, wall, throttled(group))
    return spent


def test_the_controller_files_for_each_policy_and_version() -> None:
    assert CpuShare(0.5).settings(1) == {"cpu.shares": "512", "cpu.cfs_period_us": "100000",
                                         "cpu.cfs_quota_us": "50000"}
    assert CpuShare(2, "weight").settings(1)["cpu.cfs_quota_us"] == "-1"
    assert CpuShare(1, "burst").settings(1)["cpu.cfs_burst_us"] == "100000"
    assert CpuShare(0.5).settings(2) == {"cpu.weight": "50", "cpu.max": "50000 100000"}
    assert CpuShare(4, "weight").settings(2) == {"cpu.weight": "400", "cpu.max": "max 100000"}
    assert CpuShare(1, "burst").settings(2)["cpu.max.burst"] == "100000"
    assert CpuShare(0.001).settings(2)["cpu.max"] == "1000 100000"  # the kernel's smallest quota
    assert CpuShare(1).describe() == "1 core (quota + weight)"


def test_thread_pools_follow_the_hard_share() -> None:
    assert thread_count(Limits(cpus=0.5), budgeted=False) == 1
    assert thread_count(Limits(cpus=1.5, tenant_cpus=1), budgeted=True) == 1
    assert thread_count(Limits(cpus=1.5, tenant_cpus=1), budgeted=False) == 2
    assert thread_count(Limits(cpus=64), budgeted=False) == (os.cpu_count() or 1)
    assert thread_count(Limits(cpus=1, cpu_policy="weight"), budgeted=False) is None
    assert thread_count(Limits(), budgeted=False) is None and thread_environment(None) == {}
    assert thread_environment(2)["OPENBLAS_NUM_THREADS"] == thread_environment(2)["OMP_NUM_THREADS"] == "2"


def test_limits_check_and_round_trip_the_cpu_fields() -> None:
    limits = Limits(cpus=0.5, tenant_cpus=2, cpu_policy="burst", syscall_filter=False)
    assert Limits.from_dict(limits.to_dict()) == limits
    for bad in ({"cpus": 0}, {"tenant_cpus": -1}, {"cpu_policy": "fair"}):
        with pytest.raises(ValueError):
            Limits(**bad)


def test_the_flags_and_the_service_default() -> None:
    parser = argparse.ArgumentParser()
    add_kernel_flags(parser)
    add_tenant_cpus_flag(parser)
    args = parser.parse_args(["--cpus", "0.5", "--tenant-cpus", "2", "--cpu-policy", "weight"])
    limits = kernel_settings(args).limits()
    assert (limits.cpus, limits.tenant_cpus, limits.cpu_policy) == (0.5, 2, "weight")
    assert kernel_settings(parser.parse_args(["--cpus", "0"])).limits(Limits(cpus=1)).cpus is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--cpus", "-1"])
    top = argparse.ArgumentParser()
    add_cli(top.add_subparsers())
    serve = config_from_args(top.parse_args(["serve"]))
    assert (serve.limits.cpus, serve.limits.tenant_cpus) == (1.0, None)  # one core per kernel
    budget = config_from_args(top.parse_args(["serve", "--cpus", "2", "--tenant-cpus", "3"]))
    assert (budget.limits.cpus, budget.limits.tenant_cpus) == (2, 3)


def test_an_owner_cgroup_under_cgroup_v2(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids io\n")
    group = OwnerCgroup.acquire(CpuBudget("tenant a", CpuShare(1.5)), tmp_path, 2)
    try:
        assert group.path.parent == tmp_path and group.path.name.startswith("kernel-analyst-")
        assert (group.path / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
        assert (group.path / "cpu.max").read_text() == "150000 100000"
        assert (group.path / "cpu.weight").read_text() == "150"
        again = OwnerCgroup.acquire(CpuBudget("tenant a", CpuShare(1.5)), tmp_path, 2)
        assert again is group and group.refs == 2
    finally:
        _cgroups._owners.pop(group.path, None)  # a plain directory: cgroupfs would remove it


def cpu_cgroup(session: KernelSession) -> Path:
    """The kernel's directory in the cpu hierarchy (cgroup v1 here)."""
    pid = session.describe()["kernel"]["pid"]
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if "cpu" in names.split(","):
            return Path("/sys/fs/cgroup/cpu") / path.lstrip("/")
    raise AssertionError("the kernel is in no cpu cgroup")


def throttled(directory: Path) -> int:
    stat = dict(line.split() for line in (directory / "cpu.stat").read_text().splitlines())
    return int(stat["nr_throttled"])


async def test_a_busy_cell_is_held_to_its_share_and_pools_are_sized(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=test_limits(cpus=0.2)) as manager:
        session = await manager.session("share")
        assert session.describe()["kernel"]["start"]["path"] == "template"
        assert session.describe()["kernel"]["enforced"]["cpu"] == "0.2 cores (quota + weight), cgroup v1"
        directory = cpu_cgroup(session)
        assert (directory / "cpu.cfs_quota_us").read_text().strip() == "20000"
        assert (directory / "cpu.shares").read_text().strip() == "205"
        held_to([await session.execute(BUSY)], 0.2, directory)
        # The template's OpenBLAS pool was sized for the machine; this kernel's is 1 thread.
        ex = await session.execute("import os, threadpoolctl\nprint(os.environ['OMP_NUM_THREADS'], "
                                   "{i['num_threads'] for i in threadpoolctl.threadpool_info()})")
        assert ex.text.split() == ["1", "{1}"], ex.text


async def test_an_owners_kernels_share_one_budget(tmp_path: Path) -> None:
    limits = test_limits(cpus=0.5, tenant_cpus=0.3)
    async with SessionManager(tmp_path, limits=limits, pool_size=1) as manager:
        assert manager.backend.kernels_differ_by_owner(limits)  # no pool kernel for an owner
        a, b = await manager.session("a", owner="t1"), await manager.session("b", owner="t1")
        other, nobody = await manager.session("c", owner="t2"), await manager.session("d")
        owner = cpu_cgroup(a).parent
        assert cpu_cgroup(b).parent == owner and "-owner-" in owner.name
        assert cpu_cgroup(other).parent not in (owner, cpu_cgroup(nobody).parent)
        assert "-owner-" not in cpu_cgroup(nobody).parent.name
        assert (owner / "cpu.cfs_quota_us").read_text().strip() == "30000"
        assert (cpu_cgroup(a) / "cpu.cfs_quota_us").read_text().strip() == "30000"  # never above the budget
        assert a.describe()["kernel"]["enforced"]["cpu"] == ("0.3 cores (quota + weight), cgroup v1; "
                                                              "owner 't1': 0.3 cores together")
        # Each kernel alone could take 0.3 cores; together they get 0.3, not 0.6.
        held_to(list(await asyncio.gather(a.execute(BUSY), b.execute(BUSY))), 0.3, owner)
        await manager.close("a")
        assert owner.exists()
        await manager.close("b")
        assert not owner.exists()  # the last of the owner's kernels removed it


def test_without_a_cpu_controller_the_rest_is_made_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _cgroups._cgroup_parents
    monkeypatch.setattr(_cgroups, "_cgroup_parents", lambda wanted: None if "cpu" in wanted else real(wanted))
    limits = Limits(cpus=1)
    group = _cgroups.KernelCgroup.create(max_processes=10, memory_bytes=2**28, cpu=CpuShare(1))
    assert group is not None and group.cpu is None and group.limits_memory
    try:
        assert group.cpu_missing is not None and "no CPU controller" in group.cpu_missing
        assert sandbox._describe_cpu(limits, group, None).startswith("NOT LIMITED (no CPU controller")
    finally:
        group.remove()
    assert sandbox._describe_cpu(limits, None, None) == "NOT LIMITED (no cgroup can be made here)"
    assert sandbox._describe_cpu(Limits(), None, None) == "unlimited"
