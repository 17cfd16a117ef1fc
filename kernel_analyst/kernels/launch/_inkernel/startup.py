# Runs inside the kernel at start (IPKernelApp.exec_files), so it must need nothing but
# the standard library and IPython: the kernel may run in another environment that does
# not have kernel_analyst installed. Everything it defines hangs off one hidden name.
# The host reads results through execute_request user_expressions, which cost no extra
# round trip; the objects returned here print themselves as JSON. snapshots.py runs right
# after it and adds the helper's snapshot and restore.
# ruff: noqa
# mypy: ignore-errors


def _kernel_analyst_setup(max_output_chars, max_rich_chars):
    import itertools
    import json
    import os
    import sys
    import types

    shell = get_ipython()  # noqa: F821 - defined by IPython

    class _Json:
        """Its repr is JSON, so the host gets it from user_expressions' text/plain."""

        def __init__(self, value):
            self.text = json.dumps(value, default=str)

        def __repr__(self):
            return self.text

    class _OutputCap:
        """Caps what a cell may write to stdout/stderr, before it leaves the kernel."""

        def __init__(self, limit):
            self.limit = limit
            self.used = 0
            self.dropped = 0
            self.noted = 0
            self.originals = {}

        def install(self, stream):
            original = stream.write
            self.originals[stream] = original

            def write(text):
                if not isinstance(text, str):
                    return original(text)
                room = self.limit - self.used
                if len(text) <= room:
                    self.used += len(text)
                    return original(text)
                self.dropped += len(text) - max(room, 0)
                if room > 0:
                    self.used += room
                    original(text[:room])
                return len(text)

            stream.write = write

        def reset(self, *args):
            self.used = 0
            self.dropped = 0
            self.noted = 0

        def note(self, *args):
            if self.dropped:
                err = self.originals.get(sys.stderr, sys.stderr.write)
                text = (f"\n[kernel-analyst] output truncated: {self.dropped:,} characters "
                        f"dropped (limit {self.limit:,} per execution)\n")
                self.noted = len(text)
                err(text)

        def sent(self):
            """Characters this cell's streams handed to ipykernel, so the host can tell
            whether any were lost on the way."""
            return self.used + self.noted

    class _BundleCap:
        """Caps results, displays and errors before they leave the kernel, so no output
        can make the host receive more than the limits (streams are _OutputCap's).

        Per execution: each text entry of a MIME bundle (text/plain, text/html ...) is
        kept up to the text limit (text/plain cut with a note, others dropped whole, as
        half an HTML document is worse than none), and all entries together up to the
        rich limit (an image over it is dropped); a bundle always keeps a text/plain
        saying what was dropped. Dropped characters count in the stream cap's total.
        """

        TEXTUAL = ("text/", "application/json", "application/javascript", "image/svg+xml")

        def __init__(self, cap, text_limit, rich_limit):
            self.cap = cap
            self.text_limit = text_limit
            self.rich_limit = rich_limit
            self.rich_used = 0

        def reset(self, *args):
            self.rich_used = 0

        @staticmethod
        def _size(value):
            if isinstance(value, (bytes, bytearray)):
                return (len(value) + 2) // 3 * 4  # sent base64-encoded
            if isinstance(value, str):
                return len(value)
            try:
                return len(json.dumps(value, default=str))
            except Exception:
                return 0

        def bundle(self, data):
            if not isinstance(data, dict):
                return data
            kept, notes = {}, []
            for mime, value in data.items():
                size = self._size(value)
                textual = mime.startswith(self.TEXTUAL)
                if mime == "text/plain" and isinstance(value, str) and size > self.text_limit:
                    self.cap.dropped += size - self.text_limit
                    value = value[: self.text_limit]
                    notes.append(f"{size - self.text_limit:,} characters of text/plain")
                    size = self.text_limit
                elif (textual and size > self.text_limit) or self.rich_used + size > self.rich_limit:
                    self.cap.dropped += size
                    notes.append(f"{mime} of {size:,} characters")
                    continue
                self.rich_used += size
                kept[mime] = value
            if notes:
                note = ("[kernel-analyst] output truncated: " + ", ".join(notes)
                        + f" dropped (limits {self.text_limit:,} per text, {self.rich_limit:,} per execution)")
                plain = kept.get("text/plain")
                kept["text/plain"] = f"{plain}\n{note}" if isinstance(plain, str) else note
            return kept

        def traceback(self, stb):
            lines, used = [], 0
            for line in stb or []:
                line = str(line)
                if used + len(line) > self.text_limit:
                    room = max(0, self.text_limit - used)
                    self.cap.dropped += len(line) - room
                    lines.append(line[:room] + "\n[kernel-analyst] traceback truncated")
                    break
                used += len(line)
                lines.append(line)
            return lines

        def error(self, result):
            """post_run_cell: an exception whose message is over the limit is replaced, in
            the reply only, by one of the same name with the message cut."""
            err = getattr(result, "error_in_exec", None)
            if err is None:
                return
            try:
                text = str(err)
            except Exception:
                return
            if len(text) > self.text_limit:
                short = type(type(err).__name__, (Exception,), {})
                result.error_in_exec = short(text[: self.text_limit] + " [kernel-analyst] message truncated")

        def install(self, shell):
            hook = shell.displayhook
            write = hook.write_format_data
            hook.write_format_data = lambda fmt, md=None: write(self.bundle(fmt), md)
            pub = shell.display_pub
            publish = pub.publish
            pub.publish = lambda data, metadata=None, **kw: publish(self.bundle(data), metadata, **kw)
            show = shell._showtraceback

            def showtraceback(etype, evalue, stb):
                text = str(evalue)
                if len(text) > self.text_limit:
                    evalue = text[: self.text_limit] + " [kernel-analyst] message truncated"
                return show(etype, evalue, self.traceback(stb))

            shell._showtraceback = showtraceback
            shell.events.register("pre_run_cell", self.reset)
            shell.events.register("post_run_cell", self.error)

    class _Usage:
        """CPU time and peak resident memory of each cell, measured here (where it is
        exact) and reported with the step: getrusage for the CPU of this process and the
        children it waited for; VmHWM for memory, reset before each cell
        (/proc/self/clear_refs), so it is this cell's peak, not the kernel's lifetime's."""

        def __init__(self):
            self.cpu_at_start = None
            self.peak_reset = False
            self._opened = {}  # /proc/self/NAME -> (pid, descriptor, (st_dev, st_ino))

        @staticmethod
        def _cpu():
            try:
                import resource

                own = resource.getrusage(resource.RUSAGE_SELF)
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
            except Exception:
                return None
            return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

        def _proc_fd(self, name, flags):
            """This process's /proc/self/NAME, opened once rather than every cell (an open,
            a close and a file object each time, on the reply's path). A descriptor is
            used only in the process that opened it and while it still names that file:
            a forked kernel inherits its parent's (closed here, as a copy of it), and a
            cell may close descriptors it does not know of (one reused is left alone)."""
            pid = os.getpid()
            held = self._opened.pop(name, None)
            if held is not None:
                try:
                    st = os.fstat(held[1])
                    same = (st.st_dev, st.st_ino) == held[2]
                except OSError:
                    same = False
                if same and held[0] == pid:
                    self._opened[name] = held
                    return held[1]
                if same:
                    os.close(held[1])
            fd = os.open(f"/proc/self/{name}", flags)
            st = os.fstat(fd)
            self._opened[name] = (pid, fd, (st.st_dev, st.st_ino))
            return fd

        def start(self, *args):
            self.cpu_at_start = self._cpu()
            try:
                os.write(self._proc_fd("clear_refs", os.O_WRONLY), b"5")
                self.peak_reset = True
            except OSError:
                self.peak_reset = False

        def read(self):
            found = {}
            cpu = self._cpu()
            if cpu is not None and self.cpu_at_start is not None:
                found["cpu_s"] = round(cpu - self.cpu_at_start, 4)
            if self.peak_reset:
                try:
                    data = os.pread(self._proc_fd("status", os.O_RDONLY), 16384, 0)
                    at = data.find(b"\nVmHWM:")
                    if at >= 0:
                        found["peak_rss"] = int(data[at + 7:data.index(b"kB", at)]) * 1024
                except (OSError, ValueError):
                    pass
            return found

    class _Helper:
        max_columns = 60
        max_variables = 200
        Json = _Json  # for the helper's other parts (snapshots.py)

        def __init__(self):
            self.cap = _OutputCap(max_output_chars)
            self.usage = _Usage()
            self.bundles = _BundleCap(self.cap, max_output_chars, max_rich_chars)
            self.previous = {}
            self.private = set()  # names seen that start with "_" (a memo: they always will)
            self.pandas_configured = False
            self.versions_found = None
            self.interrupts = None
            self.fork = None  # the fork module, in kernels forked from a template

        def _user_items(self):
            ns, hidden = shell.user_ns, shell.user_ns_hidden
            items = [(name, ns[name]) for name in self.public_names(ns)]
            return [(name, value) for name, value in items
                    if not (name in hidden and hidden[name] is value) and not isinstance(value, types.ModuleType)]

        def public_names(self, ns):
            """The names not starting with "_", in the namespace's order. IPython adds
            names of its own for every cell (_i1, _1 ...), so in a long conversation they
            are most of the namespace: filterfalse() passes over the ones seen before at
            C speed (a Python loop over them cost 0.13 ms a cell at 1,000 cells, and
            grew with every cell)."""
            private = self.private
            names = []
            for name in list(itertools.filterfalse(private.__contains__, ns)):
                if isinstance(name, str) and not name.startswith("_"):
                    names.append(name)
                else:  # a "_" name, or no name at all: never a user's variable
                    private.add(name)
            if len(private) > 2 * len(ns) + 1000:  # names IPython has dropped since
                self.private = {name for name in private if name in ns}
            return names

        @staticmethod
        def _type_name(value):
            t = type(value)
            mod = t.__module__
            if mod == "builtins":
                return t.__qualname__
            top = mod.split(".")[0]
            return f"{top}.{t.__qualname__}"

        def info(self, name, value):
            d = {"name": name, "type": self._type_name(value)}
            shape = getattr(value, "shape", None)
            if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
                d["shape"] = list(shape)
            elif hasattr(value, "__len__") and not isinstance(value, (str, bytes, type)):
                try:
                    d["shape"] = [len(value)]
                except Exception:
                    pass
            columns = getattr(value, "columns", None)
            dtypes = getattr(value, "dtypes", None)
            if columns is not None and dtypes is not None and hasattr(dtypes, "items"):
                cols = [str(c) for c in list(columns)[: self.max_columns]]
                d["columns"] = cols
                d["dtypes"] = {str(k): str(v) for k, v in list(dtypes.items())[: self.max_columns]}
            elif getattr(value, "dtype", None) is not None and shape is not None:
                d["dtypes"] = {"": str(value.dtype)}
            if isinstance(value, (int, float, complex, bool, str, bytes)) or value is None:
                text = repr(value)
                d["summary"] = text if len(text) <= 80 else text[:77] + "..."
            return d

        def _fingerprint(self, value):
            shape = getattr(value, "shape", None)
            if not isinstance(shape, tuple):
                try:
                    shape = len(value) if not isinstance(value, type) else None
                except Exception:
                    shape = None
            key = (type(value), id(value), shape)
            if isinstance(value, (int, float, complex, bool, str, bytes)) and not (
                isinstance(value, (str, bytes)) and len(value) > 10_000
            ):
                key = key + (value,)
            columns = getattr(value, "columns", None)
            if columns is not None:
                try:
                    key = key + (tuple(map(str, columns)), tuple(map(str, value.dtypes)))
                except Exception:
                    pass
            return key

        def _snapshot(self):
            return {name: self._fingerprint(v) for name, v in self._user_items()}

        def reset_diff(self):
            self.previous = self._snapshot()

        def step(self):
            """Variable diff since the last step plus output stats (user_expressions)."""
            try:
                current = {}
                values = {}
                for name, v in self._user_items():
                    current[name] = self._fingerprint(v)
                    values[name] = v
                created = [n for n in current if n not in self.previous]
                changed = [n for n in current if n in self.previous and self.previous[n] != current[n]]
                deleted = [n for n in self.previous if n not in current]
                self.previous = current
                cap = self.max_variables
                result = {
                    "created": [self.info(n, values[n]) for n in created[:cap]],
                    "changed": [self.info(n, values[n]) for n in changed[:cap]],
                    "deleted": deleted[:cap],
                    "truncated": max(len(created), len(changed), len(deleted)) > cap,
                    "dropped_output": self.cap.dropped,
                    "sent_output": self.cap.sent(),
                    "usage": self.usage.read(),
                }
            except Exception as exc:  # never let bookkeeping break a user's cell
                result = {"created": [], "changed": [], "deleted": [], "error": repr(exc),
                          "dropped_output": self.cap.dropped}
            return _Json(result)

        def variables(self):
            items = list(self._user_items())[: self.max_variables]
            return _Json([self.info(n, v) for n, v in items])

        def column_values(self, name, column, probes, limit):
            """A column's most common values, and whether any of ``probes`` equals one of
            them the way ``series == probe`` compares (for the agent's checks)."""
            try:
                series = shell.user_ns[name][column]
                counts = series.value_counts(dropna=True)
                matched = any(bool((series == probe).any()) for probe in probes)
                values = [v.item() if hasattr(v, "item") else v for v in list(counts.index[:limit])]
                return _Json({"values": values, "distinct": int(len(counts)), "dtype": str(series.dtype),
                              "matched": matched})
            except Exception as exc:
                return _Json({"error": repr(exc)})

        def fetch(self, name, fmt, max_bytes):
            if name not in shell.user_ns:
                return _Json({"error": f"no variable named {name!r}"})
            value = shell.user_ns[name]
            try:
                payload = self._plain(value, fmt)
                text = json.dumps(payload, allow_nan=False, default=str)
            except Exception as exc:
                return _Json({"error": f"cannot convert {name!r}: {exc!r}"})
            if len(text) > max_bytes:
                return _Json({"error": f"{name!r} is {len(text):,} bytes as JSON; limit is {max_bytes:,}"})
            return _Json({"value": payload, "type": self._type_name(value)})

        @staticmethod
        def _plain(value, fmt):
            import math

            if hasattr(value, "to_csv") and hasattr(value, "columns") and fmt == "csv":
                return value.to_csv(index=False)
            if hasattr(value, "to_json") and hasattr(value, "columns"):
                return json.loads(value.to_json(orient="records", date_format="iso"))
            if hasattr(value, "to_json") and hasattr(value, "index"):  # Series
                return json.loads(value.to_json(orient="index", date_format="iso"))
            if hasattr(value, "tolist"):  # numpy arrays and scalars
                value = value.tolist()
            if isinstance(value, float) and not math.isfinite(value):
                return None
            json.dumps(value, allow_nan=False)
            return value

        @staticmethod
        def number_from(count):
            """Number the next cell ``count``: a conversation that goes on in a new kernel
            (a restart, a death, a resume) keeps one numbering in its notebook."""
            shell.execution_count = int(count)
            return _Json(int(count))

        def versions(self):
            if self.versions_found is None:
                import platform
                from importlib import metadata

                found = {"python": platform.python_version()}
                for dist in ("pandas", "numpy", "matplotlib", "ipykernel"):
                    try:
                        found[dist] = metadata.version(dist)
                    except Exception:
                        found[dist] = None
                self.versions_found = found
            return _Json(self.versions_found)

        @staticmethod
        def adopt(path):
            import os

            if os.path.isdir(path):
                os.chdir(path)
                if os.environ.get("HOME", "").endswith("/work"):
                    os.environ["HOME"] = path

        def configure_pandas(self, *args):
            if self.pandas_configured or "pandas" not in sys.modules:
                return
            self.pandas_configured = True
            pd = sys.modules["pandas"]
            for key, val in (("display.max_rows", 60), ("display.max_columns", 50),
                             ("display.width", 160), ("display.max_colwidth", 80)):
                try:
                    pd.set_option(key, val)
                except Exception:
                    pass

    helper = _Helper()
    # IPython >= 9 copies every byte a cell writes into its output history (_tee) before
    # our cap sees it, for the kernel's whole life; the host never reads that history.
    import contextlib

    shell._tee = lambda channel=None: contextlib.nullcontext()
    helper.bundles.install(shell)
    shell.events.register("pre_run_cell", helper.cap.reset)
    shell.events.register("pre_run_cell", helper.usage.start)
    shell.events.register("pre_run_cell", helper.configure_pandas)
    shell.events.register("post_run_cell", helper.cap.note)
    return helper


def _kernel_analyst_lossless_iopub():
    """Make the kernel wait, instead of dropping output, when this process reads IOPub
    slower than a cell writes (a busy host): a PUB socket silently drops messages past
    its high-water mark; with XPUB_NODROP its send blocks until there is room."""
    try:
        import zmq

        thread = get_ipython().kernel.iopub_thread  # noqa: F821 - defined by IPython
        sock = thread.socket
        # Set from the IOPub thread, which owns the socket (sockets are not thread-safe).
        thread.io_loop.add_callback(lambda: sock.setsockopt(zmq.XPUB_NODROP, 1))
    except Exception:
        pass  # not ipykernel's IOPubThread: keep its default


def _kernel_analyst_safe_interrupts():
    """Let an interrupt stop only the cell's code. While ipykernel handles a request it
    turns SIGINT into KeyboardInterrupt wherever it lands; outside the cell's code
    (building and sending the reply, flushing output) that aborts the handler and the
    reply is never sent. So SIGINT raises only inside InteractiveShell.run_code, which
    reports it as the cell's error. One that lands elsewhere in the request is held: the
    cell's next statement raises it instead of running (before the code, or between two
    statements); if no statement is left it is counted (``late_interrupts``) and
    dropped, as the code it was meant for has finished. The same hold covers the report
    of an error (showtraceback, slow on a busy machine): a second Stop pressed while the
    first interrupt's traceback is written must not abort it, or the cell's error
    output is lost."""
    import signal

    try:
        shell = get_ipython()  # noqa: F821 - defined by IPython
        kernel = shell.kernel
        run_code = shell.run_code
        showtraceback = shell.showtraceback
        kernel.pre_handler_hook  # noqa: B018 - ipykernel's hooks around each request
        kernel.post_handler_hook  # noqa: B018
    except Exception:
        return None
    state = {"in_code": 0, "reporting": 0, "held": False, "late_interrupts": 0, "handling": False}
    import linecache

    source = "raise KeyboardInterrupt('interrupted before the next statement of the cell ran')\n"
    name = "<kernel-analyst interrupt>"
    linecache.cache[name] = (len(source), None, [source], name)  # so tracebacks show the line
    interrupted = compile(source, name, "exec")

    def arm():
        # While user code runs and no traceback is written, Python's own handler (C code):
        # the KeyboardInterrupt starts in the user's frame, and the traceback a person
        # sees in JupyterLab ends there, not in a handler of ours. Else ours holds it. A
        # handler the cell installed itself (SIG_IGN, its own) is left alone.
        current = signal.getsignal(signal.SIGINT)
        if state["handling"] and (current is on_sigint or current is signal.default_int_handler):
            wanted = signal.default_int_handler if state["in_code"] and not state["reporting"] else on_sigint
            if current is not wanted:
                signal.signal(signal.SIGINT, wanted)

    async def guarded_run_code(code_obj, result=None, *, async_=False):
        state["in_code"] += 1
        try:
            if state["held"]:
                state["held"] = False
                code_obj, async_ = interrupted, False
            arm()
            return await run_code(code_obj, result, async_=async_)
        finally:
            state["in_code"] -= 1
            arm()

    def guarded_showtraceback(*args, **kwargs):
        state["reporting"] += 1
        arm()
        try:
            return showtraceback(*args, **kwargs)
        finally:
            state["reporting"] -= 1
            arm()

    def on_sigint(signum, frame):
        if state["in_code"] and not state["reporting"]:
            raise KeyboardInterrupt  # a signal between a change of state and arm()
        state["held"] = True

    def pre_handler_hook():
        state["held"] = False
        kernel.saved_sigint_handler = signal.signal(signal.SIGINT, on_sigint)
        state["handling"] = True

    def post_handler_hook():
        state["handling"] = False
        signal.signal(signal.SIGINT, kernel.saved_sigint_handler)
        if state["held"]:
            state["held"] = False
            state["late_interrupts"] += 1

    shell.run_code = guarded_run_code
    shell.showtraceback = guarded_showtraceback
    kernel.pre_handler_hook = pre_handler_hook
    kernel.post_handler_hook = post_handler_hook
    return state


def _kernel_analyst_own_expressions(helper):
    """Answer the session's own bookkeeping expressions (every cell carries the step)
    with a direct call of the helper. IPython evaluates a user expression by compiling
    it and trying every display formatter on the value (0.15 ms a cell, measured, on
    the reply's path); the value is a ``Json`` whose only form is its ``text/plain``
    repr, so the answer is the same as theirs. Any other expression (a client's own)
    goes through IPython as before."""
    shell = get_ipython()  # noqa: F821 - defined by IPython
    evaluate = shell.user_expressions
    own = {"_kernel_analyst.step()": helper.step, "_kernel_analyst.versions()": helper.versions}

    def answer(call):
        try:
            return {"status": "ok", "data": {"text/plain": repr(call())}, "metadata": {}}
        except Exception:
            return shell._user_obj_error()

    def user_expressions(expressions):
        theirs = {key: expr for key, expr in expressions.items() if expr not in own}
        found = evaluate(theirs) if theirs else {}
        return {key: found[key] if key in theirs else answer(own[expr]) for key, expr in expressions.items()}

    shell.user_expressions = user_expressions


def _kernel_analyst_preload(names):
    import importlib

    for name in filter(None, names.split(",")):
        try:
            importlib.import_module(name)
        except Exception:
            pass


def _kernel_analyst_binder(helper, lossless_iopub):
    """What depends on the kernel's transport (its output streams, its IOPub thread):
    a cold kernel binds once, at start; a kernel forked from a template or a checkpoint
    (``_forkkernel/``) binds again after it made its own sockets and streams."""
    import os
    import sys

    def bind():
        # A forked kernel's limits are its own session's, not its template's.
        text = int(os.environ.get("KERNEL_ANALYST_MAX_OUTPUT", helper.cap.limit))
        helper.cap.limit = helper.bundles.text_limit = text
        helper.bundles.rich_limit = int(os.environ.get("KERNEL_ANALYST_MAX_RICH", helper.bundles.rich_limit))
        helper.cap.install(sys.stdout)
        helper.cap.install(sys.stderr)
        lossless_iopub()

    return bind


import os as _ka_os

_kernel_analyst = _kernel_analyst_setup(int(_ka_os.environ.get("KERNEL_ANALYST_MAX_OUTPUT", "1000000")),
                                        int(_ka_os.environ.get("KERNEL_ANALYST_MAX_RICH", "20000000")))
_kernel_analyst.interrupts = _kernel_analyst_safe_interrupts()
_kernel_analyst_own_expressions(_kernel_analyst)
_kernel_analyst.bind = _kernel_analyst_binder(_kernel_analyst, _kernel_analyst_lossless_iopub)
if getattr(getattr(get_ipython(), "kernel", None), "iopub_thread", None) is not None:  # noqa: F821
    _kernel_analyst.bind()  # a template has no streams yet: its children bind their own
_kernel_analyst_preload(_ka_os.environ.get("KERNEL_ANALYST_PRELOAD", ""))
if _ka_os.environ.get("KERNEL_ANALYST_PRELOAD"):
    _kernel_analyst.versions()  # a pool kernel has time now; its first cell should not wait
_kernel_analyst.reset_diff()
del _ka_os, _kernel_analyst_setup, _kernel_analyst_preload, _kernel_analyst_binder
del _kernel_analyst_lossless_iopub, _kernel_analyst_safe_interrupts, _kernel_analyst_own_expressions
