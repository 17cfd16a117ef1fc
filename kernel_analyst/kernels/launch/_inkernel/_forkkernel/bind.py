"""Binding a forked kernel: fresh sockets, threads and loop for the kernel object it inherited."""

from __future__ import annotations

import gc
import os
import sys
import threading
import uuid
from typing import Any

from .state import STATE, open_fds


def bind(spec: dict[str, Any], on_bound: Any) -> None:
    """Bind new sockets for the kernel object this process already holds (ipykernel 7:
    the steps of ``IPKernelApp.initialize`` that create the context, sockets, threads and
    streams), keeping the shell and its namespace. ``on_bound`` is called as soon as the
    sockets listen: the host connects while the rest is set up (ZMQ holds what it sends)."""
    import asyncio

    app = STATE.app
    kernel = app.kernel
    STATE.leaked.extend([app.context, app.shell_socket, app.control_socket, app.stdin_socket,
                          app.iopub_socket, app.iopub_thread, app.control_thread,
                          app.shell_channel_thread, app.heartbeat, app.debugpy_socket,
                          app.debug_shell_socket, getattr(app, "displayhook", None),
                          kernel.shell_stream, kernel.control_stream, kernel.debugpy_stream,
                          getattr(kernel, "io_loop", None), getattr(kernel, "debugger", None)])
    try:
        STATE.leaked.append(asyncio.get_event_loop_policy().get_event_loop())
    except RuntimeError:
        pass
    STATE.loop = asyncio.new_event_loop()  # the loop ipykernel's main thread runs
    asyncio.set_event_loop(STATE.loop)
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
    STATE.threads = {t.ident for t in threading.enumerate() if t.ident is not None}
    helper = STATE.helper
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
    if STATE.infra_fds is None:
        STATE.infra_fds = open_fds() - STATE.kept_fds - {0, 1, 2}


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
