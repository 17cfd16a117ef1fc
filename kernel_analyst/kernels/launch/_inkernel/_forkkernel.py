"""A forked process becomes a kernel: the kernel side of templates, checkpoints and branches.

This file runs inside kernel processes (the kernel's own interpreter, which may not have
kernel_analyst installed), so it needs nothing but the standard library and, once a
kernel is built, ipykernel 7. The host imports it only for the wire format.

Three kinds of process use it, all through one step, :func:`_become`:

- **the template** (``python _forkkernel.py template ...``): imports IPython, ipykernel
  and the preload list, builds the kernel application, the kernel object and the shell
  (with the startup file run, the namespace empty) but binds nothing: no ZMQ context, no
  threads, no open user files. It then serves fork requests (:func:`_serve`).
- **a checkpoint**: a live kernel forked by :func:`_checkpoint` (on its main thread,
  between cells). The copy holds the namespace as it was, frozen: it leaves the
  kernel's process group, drops the kernel's own descriptors and serves fork requests
  like the template, until the host closes its control socket.
- **a kernel**: a child of either. It sets up its process (session, rlimits,
  sandbox, Landlock, cwd, environment, descriptors, seeds), binds fresh sockets into the
  existing kernel object (:func:`_bind`), and runs ipykernel's event loop. It never
  touches the ZMQ context, sockets, threads or event loop it inherited: a forked child
  has none of their threads, so closing them would wait forever; they are kept
  referenced (so no finaliser runs) and the process always ends with ``os._exit``.

The host talks to every such process over ``SOCK_SEQPACKET`` Unix sockets: one JSON
message per datagram, descriptors passed with ``SCM_RIGHTS``. Each kernel gets its own
socket pair, its *lifeline*: the host sends its spec on it, learns the kernel's pid from
the credentials of its first message (as the host's PID namespace numbers it), and the
kernel exits when the host's end closes. See ``docs/forking.md``.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import json
import os
import signal
import socket
import stat
import sys
import threading
import traceback
import uuid
from typing import Any, NoReturn

__all__ = ["recv_msg", "send_msg"]

_MAX_MSG = 1 << 20
_MAX_FDS = 8
_ORPHAN_PROBE_S = 1.0

# -- the wire ----------------------------------------------------------------------------


def send_msg(sock: socket.socket, obj: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send one message (a JSON object) and ``fds`` over a SOCK_SEQPACKET socket."""
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv_msg(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next message and the descriptors that came with it; None at end of stream."""
    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MSG, _MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data), list(fds)


# -- state of this process -------------------------------------------------------------


class _State:
    """What this process knows about itself (module-level, inherited by every fork)."""

    def __init__(self) -> None:
        self.app: Any = None
        """The IPKernelApp (built once, in the template; rebound in every kernel)."""
        self.helper: Any = None
        """The startup file's helper (``_kernel_analyst``) of this shell."""
        self.lifeline: socket.socket | None = None
        """This kernel's lifeline to the host (None outside a kernel)."""
        self.loop: Any = None
        """This kernel's event loop (its main thread's), where checkpoints are taken."""
        self.kept_fds: set[int] = set()
        """User descriptors this kernel inherited from its checkpoint (kept on purpose)."""
        self.infra_fds: set[int] | None = None
        """Descriptors of this kernel's own machinery (ZMQ, event loops, output pipes),
        recorded when the first cell starts (no user code has run before it)."""
        self.threads: set[int] = set()
        """Idents of the kernel's own threads (ipykernel's and the lifeline watcher)."""
        self.offsets: dict[int, int] = {}
        """File offsets of the kept descriptors at the time of the checkpoint."""
        self.leaked: list[Any] = []
        """Objects of an earlier kernel generation (ZMQ context, sockets, loops): kept
        referenced forever, so no finaliser ever touches them."""


_STATE = _State()


# -- small system calls ---------------------------------------------------------------------

_libc: Any = None


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> int:
    if result < 0 or (result != 0 and what.startswith("prctl")):
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CLONE_NEWNET = 0x40000000
_NS_FLAGS = {"mnt": 0x00020000, "ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000,
             "cgroup": 0x02000000, "pid": 0x20000000, "user": 0x10000000}
_NS_GET_USERNS = 0xB701
_NS_GET_PARENT = 0xB702


def _prctl(option: int, arg: int) -> None:
    _check(_c().prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


# -- the template ----------------------------------------------------------------------------

_KERNEL_FLAGS = ("--HistoryManager.hist_file=:memory:", "--Application.log_level=WARN")
# Modules a kernel imports while its application initialises, imported once here
# instead of in every child (about 50 ms of imports, measured).
_WARM_IMPORTS = (
    "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.iostream", "ipykernel.heartbeat",
    "ipykernel.control", "ipykernel.shellchannel", "ipykernel.subshell_manager",
    "ipykernel.debugger", "ipykernel.comm", "IPython.core.completerlib", "IPython.core.debugger",
    "IPython.core.oinspect", "IPython.extensions.storemagic", "IPython.utils.wildcard", "pdb",
    "sqlite3", "faulthandler", "tornado.gen", "tornado.locks", "tornado.queues",
    "zmq.eventloop.zmqstream", "encodings.idna", "random", "resource", "tornado.platform.asyncio",
    "traitlets.utils.importstring",
)


def template_main(argv: list[str]) -> NoReturn:
    """``_forkkernel.py template CTL_FD STARTUP PRELOAD``: build the template and serve."""
    ctl = socket.socket(fileno=int(argv[0]))
    code = 1
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the host's death ends the template ...
        if os.getppid() == 1:
            os._exit(1)  # ... also if it came before the line above
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphaned checkpoints come back here to be reaped
        # Same-uid code (another conversation under isolation="process") must not be able
        # to trace the template: every later conversation is a copy of it.
        _prctl(_PR_SET_DUMPABLE, 0)
        info = _build_template(argv[1], argv[2])
        send_msg(ctl, {"ready": True, **info})
        gc.collect()
        gc.freeze()  # the cycle collector never touches these pages: they stay shared
        _serve(ctl, role="template")
    except BaseException as exc:  # report why, then end: the host falls back to cold starts
        traceback.print_exc()
        try:
            send_msg(ctl, {"ready": False, "reason": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
    finally:
        os._exit(code)


def _ipykernel_version() -> str:
    import ipykernel

    return str(getattr(ipykernel, "__version__", "0"))


def _supported() -> str | None:
    """Why this interpreter's ipykernel cannot be forked (None: it can)."""
    from ipykernel.kernelapp import IPKernelApp

    version = _ipykernel_version()
    if version.split(".")[0] != "7" or not hasattr(IPKernelApp, "shell_channel_thread"):
        return f"ipykernel {version} (forking supports ipykernel 7)"
    if not hasattr(socket, "send_fds") or not hasattr(os, "register_at_fork"):
        return f"Python {sys.version.split()[0]} (forking needs 3.9 or newer)"
    return None


def _build_template(startup: str, preload: str) -> dict[str, Any]:
    """The kernel application, kernel object and shell, with nothing bound."""
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # a script's directory is not on a kernel's path
    reason = _supported()
    if reason is not None:
        raise RuntimeError(f"cannot fork kernels with {reason}")
    import importlib

    for name in _WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    from ipykernel.kernelapp import IPKernelApp
    from IPython.core.application import BaseIPythonApplication

    os.environ["KERNEL_ANALYST_PRELOAD"] = preload
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    app: Any = IPKernelApp.instance()
    base: Any = BaseIPythonApplication
    base.initialize(app, [*_KERNEL_FLAGS, f"--IPKernelApp.exec_files={startup}"])
    app.init_pdb()
    app.kernel = app.kernel_class.instance(parent=app, session=app.session, log=app.log,
                                           profile_dir=app.profile_dir, user_ns=app.user_ns)
    app.init_path()
    app.init_shell()
    app.init_gui_pylab()
    app.init_extensions()
    app.patch_io()
    # Runs the startup file (its shell-level part: the stream caps wait for streams)
    # and the preload imports, with the shell in place, as a cold kernel does.
    app.init_code()
    del os.environ["KERNEL_ANALYST_PRELOAD"]
    _warm_libraries()
    _warm_zmq()
    _STATE.app = app
    _STATE.helper = app.shell.user_ns.get("_kernel_analyst")
    _warm_cell(app.shell)
    if _STATE.helper is not None:
        try:  # the package versions every first cell reports (importlib.metadata: ~20 ms)
            _STATE.helper.versions()
        except Exception:
            traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    import importlib.util

    launcher = importlib.util.find_spec("ipykernel_launcher")
    versions = getattr(_STATE.helper, "versions_found", None)
    return {"pid": os.getpid(), "python": sys.version.split()[0], "ipykernel": _ipykernel_version(),
            "threads": threading.active_count(), "launcher": launcher.origin if launcher else None,
            "versions": versions if isinstance(versions, dict) else None}


def _warm_libraries() -> None:
    """Do once, outside the namespace, what a first cell makes pandas and matplotlib do
    lazily (imports, caches, the font and the renderer): every kernel forked from the
    template starts with them done instead of doing them itself."""
    try:
        import io

        pandas = sys.modules.get("pandas")
        if pandas is not None:
            frame = pandas.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"]})
            repr(frame.describe(include="all"))
            frame._repr_html_()
            repr(frame.a.sum())
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            figure, axes = pyplot.subplots()
            axes.plot([1, 2, 3])
            axes.set_title("warm")
            figure.savefig(io.BytesIO(), format="png")
            pyplot.close("all")
    except Exception:
        traceback.print_exc()  # only slower first cells


# A first cell as the host sends one (code with a frame, then the user expression that
# reports the variables), run once here so that every kernel's first cell finds IPython's
# cell machinery and the reporting code already run (about 3 ms of a first cell, measured).
_WARM_CELL = (
    "import pandas as pd\n"
    "_ka_warm = pd.DataFrame({'a': range(10), 'b': [0.5] * 10, 'c': list('abcdefghij')})\n"
    "_ka_warm_total = _ka_warm['b'].sum()\n"
    "_ka_warm.head()"
)
_STEP = "_kernel_analyst.step()"


def _warm_cell(shell: Any) -> None:
    """Run :data:`_WARM_CELL` silently (no history, no output, no cell events) and leave
    the namespace, and the variable report's baseline, as they were."""
    if "pandas" not in sys.modules or _STATE.helper is None:
        return
    before = set(shell.user_ns)
    try:
        shell.run_cell(_WARM_CELL, store_history=False, silent=True)
        shell.user_expressions({"step": _STEP})
    except Exception:
        traceback.print_exc()  # only a slower first cell
    finally:
        for name in set(shell.user_ns) - before:
            del shell.user_ns[name]
        try:
            shell.user_expressions({"step": _STEP})  # the baseline: the namespace as it was
        except Exception:
            traceback.print_exc()


def _warm_zmq() -> None:
    """libzmq initialises itself on its first socket (about 6 ms, measured): do that here,
    with a context that is closed again (no ZMQ context or thread is left behind)."""
    import tempfile

    import zmq

    with tempfile.TemporaryDirectory(prefix="ka-warm-") as directory:
        context = zmq.Context()
        sock = context.socket(zmq.ROUTER)
        sock.bind(f"ipc://{directory}/warm")
        sock.close(linger=0)
        context.term()


# -- fork points: the template and checkpoints ------------------------------------------------


def _serve(ctl: socket.socket, *, role: str, close_in_child: tuple[int, ...] = ()) -> NoReturn:
    """Serve the host's fork requests on ``ctl`` until it closes; reap and report children.

    ``{"spawn": token}`` with one descriptor (the new kernel's lifeline) forks a child
    that becomes a kernel; ``{"exit": true}`` or the end of the stream ends this process.
    """
    import select

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        while True:
            readable = select.select([ctl.fileno(), wake_r], [], [])[0]
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
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (wake_r, wake_w, ctl.fileno(), *close_in_child):
                        _close(fd)
                    _become(socket.socket(fileno=fds[0]), origin=role)
                os.close(fds[0])
                send_msg(ctl, {"spawned": obj["spawn"], "pid": pid})
            else:
                for fd in fds:
                    os.close(fd)
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


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


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
                if t is not main and t.ident not in _STATE.threads and t.is_alive()]
        infra = _infra_fds()
        pid = os.fork()
        if pid == 0:
            _freeze(fd, infra, token)
        gc.freeze()  # the namespace's pages stay shared with the copy: the collector must not touch them
        count = getattr(getattr(_STATE.app, "shell", None), "execution_count", 0)
        reply.update(pid=pid, threads=lost, execution_count=count)
    except Exception as exc:
        reply["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        _close(fd)
    lifeline = _STATE.lifeline
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
    now = _open_fds()
    recorded = _STATE.infra_fds
    if recorded is None:
        recorded = now - _STATE.kept_fds - {0, 1, 2}
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
    if _STATE.lifeline is not None:
        found.add(_STATE.lifeline.fileno())
    return found


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _open_fds() -> set[int]:
    """Descriptors open now (not counting the one used to list them)."""
    listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return {int(name) for name in os.listdir(listing)} - {listing}
    finally:
        os.close(listing)


def _freeze(fd: int, infra: set[int], token: str) -> NoReturn:
    """In the copy: leave the kernel's process group, let go of its machinery and serve."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.setsid()  # interrupts and the kernel's group kill do not reach checkpoints
        gc.freeze()
        _restore_stdio()
        for other in infra - {fd}:
            _close(other)
        user = _open_fds() - {0, 1, 2, fd}
        _STATE.offsets = _offsets(user)
        _STATE.kept_fds = user
        _STATE.lifeline = None
        ctl = socket.socket(fileno=fd)
        send_msg(ctl, {"frozen": token})
        _serve(ctl, role="checkpoint")
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
    _STATE.leaked.extend([sys.stdout, sys.stderr, sys.displayhook])
    sys.stdout, sys.stderr, sys.displayhook = sys.__stdout__, sys.__stderr__, sys.__displayhook__


# -- becoming a kernel ----------------------------------------------------------------------


def _become(lifeline: socket.socket, *, origin: str) -> NoReturn:
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
        _bind(spec, lambda: send_msg(lifeline, {"bound": True}))
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
        user = _open_fds() & _STATE.kept_fds
        if spec.get("branch"):  # a branch gets no descriptor of its parent's conversation
            _blank(user)
    for fd in _open_fds() - keep - user:
        _close(fd)
    if origin != "template" and not spec.get("branch"):
        for fd, offset in _STATE.offsets.items():
            try:
                os.lseek(fd, offset, os.SEEK_SET)
            except OSError:
                pass
    _STATE.kept_fds = user
    _STATE.infra_fds = None
    _STATE.lifeline = lifeline
    # The host moves this process into the conversation's cgroup once it has said hello
    # (backends/_forked.spawn_kernel), beside the rest of its startup.
    import resource

    for which, value in spec.get("rlimits", []):
        resource.setrlimit(which, (value, value))
    if spec.get("enter") is not None:
        _enter(int(spec["enter"]), lifeline)  # returns in the kernel, inside the sandbox
    elif spec.get("unshare_net"):
        _check(_c().unshare(_CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    _grow_descriptor_table()  # in the kernel process (after _enter's fork), with one thread
    if spec.get("landlock"):
        _landlock_scope()
    _prctl(_PR_SET_DUMPABLE, 1)  # the template is not; the host reads a kernel's /proc files
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


def _enter(holder: int, lifeline: socket.socket) -> None:
    """Join the namespaces of the sandbox whose process is ``holder`` (a host pid), as
    bubblewrap would have started this process there, then fork: the child (returned
    to) is in the sandbox's PID namespace; this process waits for it and ends with its
    exit status."""
    import fcntl

    fds = {name: os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in _NS_FLAGS}
    try:
        # /proc/self is unusable once the mount namespace is joined (this process is
        # not in the sandbox's PID namespace): know our user namespace from here on.
        current = os.stat("/proc/self/ns/user")
        pending = [name for name in _NS_FLAGS if name != "user"]
        owners = {name: fcntl.ioctl(fds[name], _NS_GET_USERNS) for name in pending}
        try:
            # A namespace can be joined only with privileges over its owner: those owned
            # by our user namespace first (bubblewrap run as root), then each user
            # namespace on the way down, and what it owns.
            for user_fd in [*_userns_path(fds["user"], current), None]:
                for name in [n for n in pending if _same_stat(os.fstat(owners[n]), current)]:
                    _check(_c().setns(fds[name], _NS_FLAGS[name]), f"setns({name})")
                    pending.remove(name)
                if user_fd is not None:
                    _check(_c().setns(user_fd, _NS_FLAGS["user"]), "setns(user)")
                    current = os.fstat(user_fd)
                    os.close(user_fd)
            if pending or not _same_stat(current, os.fstat(fds["user"])):
                raise OSError(errno.EPERM, f"could not join the sandbox's namespaces: {pending}")
        finally:
            for fd in owners.values():
                os.close(fd)
    finally:
        for fd in fds.values():
            os.close(fd)
    # Joining the mount namespace made its root (bubblewrap's new root) this process's
    # root and working directory.
    child = os.fork()
    if child == 0:
        os.setsid()  # its own process group again (the session above is the outer process's)
        _drop_privileges()
        return
    _wait_and_report(child, lifeline)


def _fd_ceiling() -> int:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if 0 < soft < 1 << 20 else 1 << 16


def _same_stat(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _userns_path(target: int, own: os.stat_result) -> list[int]:
    """User namespaces from the one below ours (``own``) down to ``target``, outermost
    first (new descriptors, closed by the caller)."""
    import fcntl

    chain = [os.dup(target)]
    while not _same_stat(os.fstat(chain[-1]), own):
        try:
            chain.append(fcntl.ioctl(chain[-1], _NS_GET_PARENT))
        except OSError:
            for fd in chain:
                os.close(fd)
            raise OSError(errno.EPERM, "the sandbox's user namespace is not below ours") from None
    os.close(chain.pop())  # our own
    return list(reversed(chain))


def _drop_privileges() -> None:
    """No capabilities left in any set, and no way to gain any (what bubblewrap gives
    the processes it starts)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _c().prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0)
    _c().prctl(_PR_CAP_AMBIENT, ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    _check(_c().capset(ctypes.byref(header), data), "capset")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def _wait_and_report(child: int, lifeline: socket.socket) -> NoReturn:
    """The process outside the sandbox that started ``child`` in it: wait for it and end
    with its status, which the fork point reports to the host as the kernel's."""
    code = 1
    try:
        # Not _open_fds(): /proc/self does not resolve once the sandbox's mount namespace
        # is joined (this process stays outside its PID namespace).
        os.closerange(3, _fd_ceiling())
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # end by the same signal, so the status reads the same
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
    except BaseException:
        pass
    finally:
        os._exit(code if code >= 0 else 128 - code)


# Landlock: scope signals and abstract Unix sockets to this conversation's processes
# (ABI 6). Any Landlock domain also keeps its processes from tracing, or reading the
# sensitive /proc files of, processes outside it.
_LANDLOCK_SCOPE = 0x1 | 0x2  # ABSTRACT_UNIX_SOCKET | SIGNAL


def _landlock_scope() -> None:
    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    attr = Attr(0, 0, _LANDLOCK_SCOPE)
    libc = _c()
    fd = _check(libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0),
                "landlock_create_ruleset")
    try:
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _check(libc.syscall(446, fd, 0), "landlock_restrict_self")
    finally:
        os.close(fd)


# -- binding a kernel: fresh sockets, threads and loop for the existing kernel object ---------


def _bind(spec: dict[str, Any], on_bound: Any) -> None:
    """Bind new sockets for the kernel object this process already holds (ipykernel 7:
    the steps of ``IPKernelApp.initialize`` that create the context, sockets, threads and
    streams), keeping the shell and its namespace. ``on_bound`` is called as soon as the
    sockets listen: the host connects while the rest is set up (ZMQ holds what it sends)."""
    import asyncio

    app = _STATE.app
    kernel = app.kernel
    _STATE.leaked.extend([app.context, app.shell_socket, app.control_socket, app.stdin_socket,
                          app.iopub_socket, app.iopub_thread, app.control_thread,
                          app.shell_channel_thread, app.heartbeat, app.debugpy_socket,
                          app.debug_shell_socket, getattr(app, "displayhook", None),
                          kernel.shell_stream, kernel.control_stream, kernel.debugpy_stream,
                          getattr(kernel, "io_loop", None), getattr(kernel, "debugger", None)])
    try:
        _STATE.leaked.append(asyncio.get_event_loop_policy().get_event_loop())
    except RuntimeError:
        pass
    _STATE.loop = asyncio.new_event_loop()  # the loop ipykernel's main thread runs
    asyncio.set_event_loop(_STATE.loop)
    conn = spec["connection"]
    app.connection_file = spec.get("connection_file", "")
    app.transport, app.ip = conn["transport"], conn["ip"]
    for channel in ("shell", "stdin", "control", "iopub", "hb"):
        setattr(app, f"{channel}_port", int(conn[f"{channel}_port"]))
    session = app.session
    session.signature_scheme = conn.get("signature_scheme", "hmac-sha256")
    session.key = conn["key"].encode()
    # Session refuses to send from another pid than the one that made it, and its id
    # names this kernel's messages: both are this process's own.
    session.pid = os.getpid()
    session.session = str(uuid.uuid4())
    session.message_count = 0
    app.context = None
    app.init_sockets()
    app.init_heartbeat()
    on_bound()
    _init_io(app)
    app.init_signal()
    _attach_kernel(app, kernel)
    _STATE.threads = {t.ident for t in threading.enumerate() if t.ident is not None}
    helper = _STATE.helper
    if helper is not None:
        helper.bind()
        if not getattr(helper, "_fork_first_cell", False):
            helper._fork_first_cell = True
            app.shell.events.register("pre_run_cell", _record_infra)
    if spec.get("execution_count"):
        app.shell.execution_count = int(spec["execution_count"])
    gc.freeze()


def _record_infra(*_args: Any) -> None:
    """At every cell start, until it is known: this kernel's own descriptors are all
    that is open now but was not inherited (no user code has run yet)."""
    if _STATE.infra_fds is None:
        _STATE.infra_fds = _open_fds() - _STATE.kept_fds - {0, 1, 2}


def _init_io(app: Any) -> None:
    """``IPKernelApp.init_io`` without flushing the previous kernel's streams (whose
    threads are gone) and without patching faulthandler again."""
    from functools import partial
    from io import FileIO, TextIOWrapper
    from logging import StreamHandler

    from traitlets.utils.importstring import import_item

    factory = import_item(str(app.outstream_class))
    if not app.capture_fd_output:
        factory = partial(factory, watchfd=False)
    sys.stdout = factory(app.session, app.iopub_thread, "stdout", echo=None if app.quiet else sys.__stdout__)
    sys.stderr = factory(app.session, app.iopub_thread, "stderr", echo=None if app.quiet else sys.__stderr__)
    copy = getattr(sys.stderr, "_original_stdstream_copy", None)
    if copy is not None:
        for handler in app.log.handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, StreamHandler) and _fileno(stream) in (2, None):
                handler.stream = TextIOWrapper(FileIO(copy, "w", closefd=False))
    app.displayhook = import_item(str(app.displayhook_class))(app.session, app.iopub_socket)
    sys.displayhook = app.displayhook


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except Exception:
        return None


def _attach_kernel(app: Any, kernel: Any) -> None:
    """``IPKernelApp.init_kernel`` for a kernel object that already exists."""
    import asyncio

    from zmq.eventloop.zmqstream import ZMQStream

    shell_stream = ZMQStream(app.shell_socket, app.shell_channel_thread.io_loop)
    app.shell_channel_thread.shell_stream = shell_stream
    control_stream = ZMQStream(app.control_socket, app.control_thread.io_loop)
    debugpy_stream = ZMQStream(app.debugpy_socket, app.control_thread.io_loop)
    app.control_thread.start()
    app.shell_channel_thread.start()
    kernel.session = app.session
    kernel.shell_stream = shell_stream
    kernel.control_stream = control_stream
    kernel.debugpy_stream = debugpy_stream
    kernel.debug_shell_socket = app.debug_shell_socket
    kernel.control_thread = app.control_thread
    kernel.shell_channel_thread = app.shell_channel_thread
    kernel.iopub_thread = app.iopub_thread
    kernel.iopub_socket = app.iopub_socket
    kernel.stdin_socket = app.stdin_socket
    kernel._stdout, kernel._stderr = sys.stdout, sys.stderr
    kernel._main_asyncio_lock = asyncio.Lock()
    kernel._aborting = False
    kernel.record_ports({f"{name}_port": getattr(app, f"{name}_port")
                         for name in ("shell", "iopub", "stdin", "hb", "control")})
    from ipykernel.debugger import _is_debugpy_available

    if _is_debugpy_available:
        kernel.debugger = kernel.debugger_class(
            kernel.log, debugpy_stream, kernel._publish_debug_event, app.debug_shell_socket,
            app.session, kernel._kernel_modules, kernel.debug_just_my_code, kernel.filter_internal_frames)
    shell = kernel.shell
    shell.kernel = kernel
    shell.displayhook.session = app.session
    shell.displayhook.pub_socket = app.iopub_socket
    shell.displayhook.topic = kernel._topic("execute_result")
    shell.display_pub.session = app.session
    shell.display_pub.pub_socket = app.iopub_socket
    app.displayhook.get_execution_count = lambda: kernel.execution_count


def _run() -> int:
    """Watch the lifeline, then run the kernel's loop until it is shut down."""
    lifeline = _STATE.lifeline
    assert lifeline is not None
    watcher = threading.Thread(target=_watch_lifeline, args=(lifeline,), name="kernel-analyst-lifeline",
                               daemon=True)
    watcher.start()
    if watcher.ident is not None:
        _STATE.threads.add(watcher.ident)
    _STATE.app.start()
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
        _STATE.loop.call_soon_threadsafe(_checkpoint, fd, token)
    except Exception as exc:  # no loop yet, or it has stopped (the kernel is ending)
        _close(fd)
        try:
            send_msg(lifeline, {"checkpointed": token, "error": f"the kernel cannot fork now: {exc!r}"})
        except OSError:
            pass


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "template":
        template_main(sys.argv[2:])
    sys.exit("usage: _forkkernel.py template CTL_FD STARTUP PRELOAD")
