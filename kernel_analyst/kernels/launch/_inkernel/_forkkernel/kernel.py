"""Fork points (the template, checkpoints) and their children, which become kernels.

A fork point serves the host's fork requests (:func:`serve`); a child sets up its
process as a cold launch would (session, rlimits, sandbox, Landlock, cwd, environment,
descriptors, seeds), binds fresh sockets into the kernel object it inherited
(``bind.py``) and runs ipykernel's event loop (:func:`become`). A live kernel forks
itself into a checkpoint when the host asks on its lifeline (``_checkpoint``): the
copy is frozen and serves fork requests like the template."""

from __future__ import annotations

import base64
import gc
import os
import signal
import socket
import stat
import sys
import threading
import traceback
from typing import Any, NoReturn

from . import pools
from .bind import bind
from .confine import enter, landlock_scope, seccomp_filter
from .state import PR_SET_DUMPABLE, STATE, check, clib, close_fd, open_fds, prctl
from .wire import recv_msg, send_msg

_CLONE_NEWNET = 0x40000000


# -- fork points: the template and checkpoints ------------------------------------------------


def serve(ctl: socket.socket, *, role: str, close_in_child: tuple[int, ...] = ()) -> NoReturn:
    """Serve the host's fork requests on ``ctl`` until it closes; reap and report children.

    ``{"spawn": token}`` with one descriptor (the new kernel's lifeline) forks a child
    that becomes a kernel; ``{"exit": true}`` or the end of the stream ends this process.
    """
    import select

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = select.poll()  # not select.select: a host's descriptor may be numbered past 1023
    poller.register(ctl.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    try:
        while True:
            readable = [fd for fd, _ in poller.poll()]
            if wake_r in readable:
                os.read(wake_r, 512)
                _report_exits(ctl)
            if ctl.fileno() not in readable:
                continue
            msg = recv_msg(ctl)
            if msg is None or msg[0].get("exit"):
                os._exit(0)
            obj, fds = msg
            if "spawn" in obj and len(fds) == 1:
                if role == "template":  # a checkpoint's pools are its kernel's, sized already
                    pools.before_fork(obj.get("threads"))
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (wake_r, wake_w, ctl.fileno(), *close_in_child):
                        close_fd(fd)
                    become(socket.socket(fileno=fds[0]), origin=role)
                os.close(fds[0])
                send_msg(ctl, {"spawned": obj["spawn"], "pid": pid})
            else:
                for fd in fds:
                    os.close(fd)
    except BaseException:  # the host's warning shows the log's tail: say why this fork point ended
        os.write(2, traceback.format_exc().encode(errors="replace"))  # fd 2: sys.stderr may be the kernel's
    finally:
        os._exit(0)


def _report_exits(ctl: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            send_msg(ctl, {"exited": pid, "status": os.waitstatus_to_exitcode(status)})
        except OSError:
            return


# -- checkpoints (in a live kernel) ------------------------------------------------------------


def _checkpoint(fd: int, token: str) -> None:
    """Fork this kernel into a frozen copy served on ``fd``, then tell the host on the
    lifeline: the copy's pid, the number of the next cell, and the threads started by
    user code, which the copy cannot carry. Runs on the kernel's main thread, as a
    callback of its event loop (:func:`_watch_lifeline` schedules it), so between two
    requests; the host asks only while it holds the session's turn, so between cells.
    One message each way, instead of an execute request through the shell channel."""
    reply: dict[str, Any] = {"checkpointed": token}
    try:
        main = threading.main_thread()
        lost = [t.name for t in threading.enumerate()
                if t is not main and t.ident not in STATE.threads and t.is_alive()]
        infra = _infra_fds()
        pid = os.fork()
        if pid == 0:
            _freeze(fd, infra, token)
        gc.freeze()  # the namespace's pages stay shared with the copy: the collector must not touch them
        count = getattr(getattr(STATE.app, "shell", None), "execution_count", 0)
        reply.update(pid=pid, threads=lost, execution_count=count)
    except Exception as exc:
        reply["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        close_fd(fd)
    lifeline = STATE.lifeline
    if lifeline is not None:
        try:
            send_msg(lifeline, reply)
        except OSError:
            pass  # the host is gone: the lifeline watcher ends this kernel


def _infra_fds() -> set[int]:
    """This kernel's own descriptors (never a user's): recorded at the first cell, or,
    before any cell ran, everything but what it inherited as a user's. A recorded
    number that is now a regular file other than the log was closed by the kernel and
    reused by user code: it is the user's."""
    now = open_fds()
    recorded = STATE.infra_fds
    if recorded is None:
        recorded = now - STATE.kept_fds - {0, 1, 2}
    logs = set()
    for stream in (sys.stdout, sys.stderr):
        copy = getattr(stream, "_original_stdstream_copy", None)
        if isinstance(copy, int):
            try:
                logs.add(_identity(os.fstat(copy)))
            except OSError:
                pass
    found = set()
    for fd in recorded & now:
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and _identity(st) not in logs:
            continue
        found.add(fd)
    if STATE.lifeline is not None:
        found.add(STATE.lifeline.fileno())
    return found


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino



def _freeze(fd: int, infra: set[int], token: str) -> NoReturn:
    """In the copy: leave the kernel's process group, let go of its machinery and serve."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.setsid()  # interrupts and the kernel's group kill do not reach checkpoints
        gc.freeze()
        _restore_stdio()
        for other in infra - {fd}:
            close_fd(other)
        user = open_fds() - {0, 1, 2, fd}
        STATE.offsets = _offsets(user)
        STATE.kept_fds = user
        STATE.lifeline = None
        ctl = socket.socket(fileno=fd)
        send_msg(ctl, {"frozen": token})
        serve(ctl, role="checkpoint")
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _offsets(fds: set[int]) -> dict[int, int]:
    """Positions of regular files, to restore in every kernel forked from this copy (the
    position is shared with the kernel the copy was made from, which moves on)."""
    found = {}
    for fd in fds:
        try:
            if os.path.isfile(f"/proc/self/fd/{fd}"):
                found[fd] = os.lseek(fd, 0, os.SEEK_CUR)
        except OSError:
            continue
    return found


def _restore_stdio() -> None:
    """Point fds 1 and 2 back at the log (ipykernel had them on its output pipes) and
    stop using the streams of the previous kernel."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        original = getattr(stream, "_original_stdstream_copy", None)
        if isinstance(original, int):
            try:
                os.dup2(original, fd)
            except OSError:
                pass
    STATE.leaked.extend([sys.stdout, sys.stderr, sys.displayhook])
    sys.stdout, sys.stderr, sys.displayhook = sys.__stdout__, sys.__stderr__, sys.__displayhook__


# -- becoming a kernel ----------------------------------------------------------------------


def become(lifeline: socket.socket, *, origin: str) -> NoReturn:
    """In a child of a fork point: become a kernel as the spec from the host says."""
    code = 1
    try:
        os.setsid()  # its own process group: interrupts and kills reach this kernel's tree only
        import atexit

        atexit._clear()  # handlers of the previous kernel would close ZMQ objects it inherited
        msg = recv_msg(lifeline)
        if msg is None:
            os._exit(0)
        spec, fds = msg
        _setup_process(spec, fds, lifeline, origin)
        send_msg(lifeline, {"hello": os.getpid()})  # its credentials carry our pid
        bind(spec, lambda: send_msg(lifeline, {"bound": True}))
        code = _run()
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except Exception:
            pass
    finally:
        os._exit(code)


def _setup_process(spec: dict[str, Any], fds: list[int], lifeline: socket.socket, origin: str) -> None:
    """Everything a cold launch does before ``exec``, and the fork's own clean-up."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if fds:
        os.dup2(fds[0], 1)
        os.dup2(fds[0], 2)
        os.close(fds[0])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _restore_stdio()
    keep = {0, 1, 2, lifeline.fileno()}
    if origin == "template":
        user: set[int] = set()
    else:
        user = open_fds() & STATE.kept_fds
        if spec.get("branch"):  # a branch gets no descriptor of its parent's conversation
            _blank(user)
    for fd in open_fds() - keep - user:
        close_fd(fd)
    if origin != "template" and not spec.get("branch"):
        for fd, offset in STATE.offsets.items():
            try:
                os.lseek(fd, offset, os.SEEK_SET)
            except OSError:
                pass
    STATE.kept_fds = user
    STATE.infra_fds = None
    STATE.lifeline = lifeline
    # The host moves this process into the conversation's cgroup once it has said hello
    # (launch/_forked.py: spawn_kernel), beside the rest of its startup.
    import resource

    for which, value in spec.get("rlimits", []):
        resource.setrlimit(which, (value, value))
    if spec.get("enter") is not None:
        enter(int(spec["enter"]), lifeline)  # returns in the kernel, inside the sandbox
    elif spec.get("unshare_net"):
        check(clib().unshare(_CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    _grow_descriptor_table()  # in the kernel process (after _enter's fork), with one thread
    if spec.get("seccomp"):  # after enter (setns, capset), before anything of the user's
        seccomp_filter(base64.b64decode(spec["seccomp"]))
    if spec.get("landlock"):
        landlock_scope()
    prctl(PR_SET_DUMPABLE, 1)  # the template is not; the host reads a kernel's /proc files
    os.chdir(spec["cwd"])
    os.environ.clear()
    os.environ.update(spec["env"])
    sys.argv[:] = list(spec.get("argv", sys.argv))
    if origin == "template" or spec.get("branch"):
        _reseed()


_DESCRIPTOR_TABLE = 256


def _grow_descriptor_table() -> None:
    """Grow the descriptor table to 256 entries now, while this process has one thread.
    A kernel holds about 64 descriptors once its sockets and threads exist, and growing
    the table of a process with threads waits for an RCU grace period: the first cell's
    first ``open`` past the 64th waited 9-15 ms for it (measured). A fork copies only
    the part of the table in use, so this runs in the kernel process itself."""
    import fcntl

    try:
        fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, _DESCRIPTOR_TABLE - 1)  # never reuses a taken number
    except OSError:
        return  # a lower RLIMIT_NOFILE: the table cannot grow that far anyway
    os.close(fd)


def _blank(fds: set[int]) -> None:
    """Replace descriptors with /dev/null (their numbers stay taken: objects that hold
    them fail quietly instead of writing into whatever would reuse the number)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        os.dup2(null, fd)
    os.close(null)


def _reseed() -> None:
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _run() -> int:
    """Watch the lifeline, then run the kernel's loop until it is shut down."""
    lifeline = STATE.lifeline
    assert lifeline is not None
    watcher = threading.Thread(target=_watch_lifeline, args=(lifeline,), name="kernel-analyst-lifeline",
                               daemon=True)
    watcher.start()
    if watcher.ident is not None:
        STATE.threads.add(watcher.ident)
    STATE.app.start()
    return 0


def _watch_lifeline(lifeline: socket.socket) -> None:
    """Schedule the checkpoints the host asks for (each with the descriptor its copy is
    served on); end the kernel when the host's end closes (the host is gone), as
    ipykernel's parent poller would."""
    while True:
        try:
            msg = recv_msg(lifeline)
        except OSError:
            msg = None
        if msg is None:
            os._exit(1)
        obj, fds = msg
        if "checkpoint" in obj and len(fds) == 1:
            _schedule_checkpoint(fds[0], str(obj["checkpoint"]), lifeline)
        else:
            for fd in fds:
                os.close(fd)


def _schedule_checkpoint(fd: int, token: str, lifeline: socket.socket) -> None:
    """Have the main thread take the checkpoint at its event loop's next turn."""
    try:
        STATE.loop.call_soon_threadsafe(_checkpoint, fd, token)
    except Exception as exc:  # no loop yet, or it has stopped (the kernel is ending)
        close_fd(fd)
        try:
            send_msg(lifeline, {"checkpointed": token, "error": f"the kernel cannot fork now: {exc!r}"})
        except OSError:
            pass
