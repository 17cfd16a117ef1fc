"""A forked process becomes a kernel: the kernel side of templates, checkpoints and branches.

This package runs inside kernel processes (the kernel's own interpreter, which may not
have kernel_analyst installed), so it needs nothing but the standard library and, once a
kernel is built, ipykernel 7. The host imports only its wire format (``wire.py``); the
template runs it as ``python <this directory> template ...`` (``__main__.py``).

Three kinds of process use it, all through one step, ``kernel.become``:

- **the template** (``template.py``): imports IPython, ipykernel and the preload list,
  builds the kernel application, the kernel object and the shell (with the startup files
  run, the namespace empty) but binds nothing: no ZMQ context, no threads, no open user
  files. It then serves fork requests (``kernel.serve``).
- **a checkpoint**: a live kernel forked by ``kernel._checkpoint`` (on its main thread,
  between cells). The copy holds the namespace as it was, frozen: it leaves the
  kernel's process group, drops the kernel's own descriptors and serves fork requests
  like the template, until the host closes its control socket.
- **a kernel**: a child of either. It sets up its process (session, rlimits, sandbox and
  Landlock: ``confine.py``; cwd, environment, descriptors, seeds), binds fresh sockets
  into the existing kernel object (``bind.py``), and runs ipykernel's event loop. It
  never touches the ZMQ context, sockets, threads or event loop it inherited: a forked
  child has none of their threads, so closing them would wait forever; they are kept
  referenced (``state.py``: so no finaliser runs) and the process always ends with
  ``os._exit``.

The host talks to every such process over ``SOCK_SEQPACKET`` Unix sockets: one JSON
message per datagram, descriptors passed with ``SCM_RIGHTS``. Each kernel gets its own
socket pair, its *lifeline*: the host sends its spec on it, learns the kernel's pid from
the credentials of its first message (as the host's PID namespace numbers it), and the
kernel exits when the host's end closes. See ``docs/forking.md``.
"""
