"""The namespace the next request expects: a live kernel, and lost variables brought back.

What is replayed or loaded, and how, is ``trail/restore.py``'s (:class:`Recoverer`, which
talks to the kernel only through the callables it is given). This is the session's
side: before each request, a dead kernel is replaced (its loss marked in the trail),
and a loss noted earlier is recovered, in the session's turn, by the policy in force
(:class:`~kernel_analyst.kernels.RecoveryPolicy`); a planned stop (an idle cull, an
orderly close) first saves the namespace as a snapshot.
"""

from __future__ import annotations

import logging

from ..execution import Execution
from ..launch import RunningKernel
from ..recovery import RecoveryPolicy, RecoveryReport
from ..trail import Recoverer, RunCell, cells_to_restore
from . import quota
from .cell import note_ending
from .lifecycle import Lifecycle, Setup
from .recording import Recorder

log = logging.getLogger(__name__)


class Restoring:
    """One session's recovery: the policy, a loss waiting to be recovered, the last report."""

    def __init__(self, setup: Setup, kernels: Lifecycle, trail: Recorder, *, policy: RecoveryPolicy,
                 run: RunCell, guard: quota.DiskGuard | None) -> None:
        self.setup = setup
        self.kernels = kernels
        self.trail = trail
        self.policy = policy
        self.pending: str | None = None
        """Why the namespace was lost, while it is still to be brought back."""
        self.last: RecoveryReport | None = None
        """The report of the latest recovery, if any."""
        self._run = run
        self._guard = guard

    def lost(self, reason: str) -> None:
        """The namespace is gone: bring it back at the next use, if the policy says so."""
        if self.policy.enabled:
            self.pending = reason

    async def ready(self, ex: Execution | None) -> None:
        """In the turn, before a request: a live kernel (a dead one replaced, its loss
        marked) with the namespace brought back if it was lost and the policy says so,
        numbering its cells on from the notebook's. ``ex`` (the cell about to run) is
        told what happened."""
        ending = await self.kernels.ensure()
        if ending is not None:
            if ex is not None:
                ex.state = "lost"
                ex.events.append("kernel died while idle; restarted")
                note_ending(ex, ending)
            self.lost("the kernel died while idle")
            self.trail.mark(f"Kernel had died while idle ({ending.detail}); started a fresh kernel. All "
                            "variables were lost.", "died")
        report = await self.recover()
        if self.kernels.renumber:
            # A kernel that replaced another (or resumed the conversation) numbers its next
            # cell after the notebook's last, so cell numbers stay unique in the trail (undo,
            # verify and citations name cells by them); after a replay, whose cells it counted.
            self.kernels.renumber = False
            following = self.trail.next_count()
            if following > 1:
                await self.kernels.evaluate(f"_kernel_analyst.number_from({following})", 10.0)
        if report is not None and ex is not None:
            ex.recovery = report
            ex.events.append(f"state {'restored' if report.complete else 'partly restored'} "
                             f"({report.method}, {report.duration_s:.1f} s) after: {report.reason}")
            if report.complete and ex.state == "lost":
                ex.state = "kept"  # the namespace this step relies on is back

    async def ready_for_files(self) -> None:
        """Before the working directory changes: a pending recovery goes first (the
        recorded cells ran with the files as they were)."""
        if self.policy.enabled:
            await self.ready(None)

    def reopened(self, kernel: RunningKernel, reason: str) -> None:
        """The conversation goes on (a resume): in the kernel it had, still running; or in
        a fresh one, where its variables come back at first use (or it is said that they
        were not)."""
        if kernel.reattached:
            self.trail.mark("Conversation continued by another process; its kernel was still running, "
                            "so every variable is as it was.", "reattached")
            return
        if not cells_to_restore(self.trail.audit.cells):
            return
        if self.policy.enabled:
            self.pending = reason
        else:
            self.trail.mark("Conversation reopened in a fresh kernel; the variables from before were "
                            "not restored (recovery is off).", "reopened")

    async def recover(self) -> RecoveryReport | None:
        """Rebuild the namespace after a loss (in the turn, with a live kernel); None when
        nothing was lost or there was nothing to bring back."""
        reason, self.pending = self.pending, None
        if reason is None or self.trail.trail is None:
            return None
        report = await self._recoverer().recover(reason)
        if report is not None:
            self.last = report
            log.info("session %s: recovery after %s: %s", self.setup.id, reason, report.describe())
        return report

    async def save(self, reason: str) -> None:
        """Snapshot the namespace before a planned stop, when the policy asks for it."""
        kernel, policy, trail = self.kernels.kernel, self.policy, self.trail.trail
        if (not (policy.enabled and policy.snapshot) or kernel is None or not kernel.is_alive()
                or kernel.files is not None or trail is None or self.pending is not None
                or not cells_to_restore(trail.cells)):
            return  # nothing to save, a loss not yet recovered, or a remote kernel's files
        if self._guard is not None:  # the snapshot is not the user's data: no quota on it
            kernel.limit_file_size(self._guard.max_file or 2**62)
            self._guard.forget_kernel()
        try:
            manifest = await self._recoverer().save(reason)
        except Exception:  # a failed snapshot only means a replay later
            log.exception("session %s: could not snapshot the namespace", self.setup.id)
            return
        if manifest is not None:
            log.info("session %s: namespace saved (%d variables)", self.setup.id,
                     len(manifest.get("saved", {})))

    def _recoverer(self) -> Recoverer:
        here = [str(self.setup.workdir)]
        return Recoverer(self.policy, self.trail.audit, workdir=self.setup.workdir, run=self._run,
                         evaluate=self.kernels.evaluate, workdirs=(here, here))
