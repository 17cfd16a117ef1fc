"""Keeping and discarding a tenant's branch (a session made by ``fork``), for the HTTP API
and MCP: the library's ``manager.keep`` / ``manager.discard`` under the service's rules.

A branch and its parent are sessions of the same tenant. Keeping takes both sessions'
request locks (the parent's first, so two keeps of one parent's branches run one after
the other), wakes either if dormant, and then deletes the branch's session: its cells,
files and variables are the parent's now. Discarding deletes the branch; its parent's
notebook says so when the parent is live here.
"""

from __future__ import annotations

import logging

from ..kernels.conversation import DiscardReport, KeepReport, parent_of
from .exceptions import NotABranchError
from .records import SessionRecord
from .service import SessionService

log = logging.getLogger(__name__)


def parent_id(service: SessionService, branch: SessionRecord) -> str:
    """The session ``branch`` was forked from; 409 when it is no branch."""
    found = parent_of(service.notebook(branch).get("metadata", {}))
    if found is None:
        raise NotABranchError(f"session {branch.id} is not a branch (it was not made by fork); "
                              "only a fork can be kept or discarded")
    return found


async def keep_branch(service: SessionService, branch: SessionRecord) -> tuple[SessionRecord, KeepReport]:
    """Make ``branch`` its parent's line (see the module); return the parent and the report."""
    parent = await service.get(branch.tenant, parent_id(service, branch))
    async with service.use(parent) as session, service.use(branch):
        report = await service.manager.keep(branch.id, into=parent.id)
    if session.kernel_id != parent.kernel_id:  # a copied namespace: a new kernel (on a gateway, a new id)
        await service.registry.set_kernel(parent.id, owner=service.replica_id, kernel_id=session.kernel_id)
        parent.kernel_id = session.kernel_id
    await service.delete(branch)
    log.info("session %s kept branch %s (%s)", parent.id, branch.id, report.method)
    return parent, report


async def discard_branch(service: SessionService, branch: SessionRecord, *,
                         record_cells: bool = False) -> DiscardReport:
    """Delete the branch ``branch``; its live parent's notebook records it (with
    ``record_cells``, its cells too, abandoned)."""
    parent = parent_id(service, branch)
    if branch.session is not None and service.manager.get(branch.id) is branch.session:
        async with service.use(branch):
            report = await service.manager.discard(branch.id, record_cells=record_cells)
    else:  # dormant, or held elsewhere: nothing to close here, nothing to wake for it
        cells = service.notebook(branch).get("cells", [])
        report = DiscardReport(branch.id, parent, len(cells), recorded=False)
    await service.delete(branch)
    return report


__all__ = ["discard_branch", "keep_branch", "parent_id"]
