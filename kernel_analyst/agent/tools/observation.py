"""Execution -> what the model sees.

An :class:`Observation` is the text of one step within a character budget, plus the
figures to attach when the model takes images. The text is assembled in this order:

1. notices: a timeout, a kernel death (with its cause and what to do about it) or restart
   and which variables were lost;
2. the output in display order: streams, and of each rich output its ``text/plain`` form
   (DataFrames as text, never HTML), figures as a short line naming them;
3. the error: ``ename: evalue`` and a traceback trimmed to the user's frames and the frame
   that raised, kept whole up to the budget;
4. a one-line note of the variables the step created, changed or deleted;
5. the step's CPU time and peak memory, for a step that used 10 s of CPU or more, held half
   its memory limit or more, or died.

When the output is longer than the room left for it, its head and tail are kept and the
middle is replaced by a count of the characters elided. If the caller names a file
(``save_as``), the full output goes into :attr:`Observation.saved`, the caller stores it
in the session's working directory, and the marker tells the model that file's name so it
can read the rest in pieces.

:func:`observe` is pure (no I/O). :func:`observe_step` is the one step from an execution to
what a model sees, used by ``Analyst``, ``KernelTool`` and the MCP ``execute`` tool: it
observes within the budget and stores the full output of a cut observation in the
session. Tracebacks name no host path: library frames lose their install prefix, other
paths outside the session keep only their last parts.
"""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...kernels import KernelSession
from ...kernels.exceptions import KernelAnalystError
from ...kernels.execution import Execution, ExecutionError, strip_ansi
from ..prompting import message, message_names

DEFAULT_BUDGET = 2500
"""Characters of observation per step, unless configured otherwise: sized so that a small
local model's 8k-token context holds the first request and six full steps (measured with
Qwen2.5-Coder's tokenizer, where digits are a token each: ``benchmarks/context_tokens.py``);
longer output is saved to a file the model can read in pieces."""
RESOURCES_CPU_S = 10.0
"""A step that used this much CPU time is told its CPU time and peak memory."""

_MIN_OUTPUT_ROOM = 200
_VARIABLES_NOTE_MAX = 400
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_RULE_RE = re.compile(r"^-{20,}$")
_PACKAGES_RE = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\:]+)+[/\\](?:site|dist)-packages[/\\]")
_STDLIB_RE = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\:]+)*[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]")
_FRAME_PATH_RE = re.compile(r"^(\s*File \"?)((?:[A-Za-z]:)?[/\\~][^\s:\"]*)")
_ARROW_RE = re.compile(r"^\s*-+>")
_CHAIN_MARKERS = ("The above exception was the direct cause", "During handling of the above exception")


@dataclass(frozen=True)
class SavedOutput:
    """The full output of a step whose observation was cut, to be stored for the model."""

    name: str
    """File name relative to the session's working directory."""
    data: bytes
    """The complete output text, UTF-8 encoded."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (name and size; not the data)."""
        return {"name": self.name, "size": len(self.data)}


@dataclass(frozen=True)
class ObservationSettings:
    """How much of an execution a model is shown."""

    budget: int = DEFAULT_BUDGET
    """Characters of observation text per step."""
    send_images: bool = False
    """Attach figures as images (decided by the caller from the model's abilities)."""
    max_images: int = 4
    """Figures attached per step at most (the rest are named in the text)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"budget": self.budget, "send_images": self.send_images, "max_images": self.max_images}


@dataclass(frozen=True)
class Observation:
    """What the model is shown about one execution."""

    text: str
    """The observation text, within the budget (plus short fixed notices)."""
    images: list[bytes] = field(default_factory=list)
    """PNG figures to attach (empty unless images were asked for)."""
    saved: SavedOutput | None = None
    """The full output to store under ``saved.name`` when the text was cut, else None."""
    elided_chars: int = 0
    """Characters of output left out of :attr:`text`."""

    def image_blocks(self) -> list[dict[str, Any]]:
        """LangChain standard image content blocks, one per attached figure."""
        return [
            {"type": "image", "base64": base64.b64encode(png).decode("ascii"), "mime_type": "image/png"}
            for png in self.images
        ]

    def content(self) -> str | list[str | dict[str, Any]]:
        """Message content: the text alone, or a text block followed by image blocks."""
        if not self.images:
            return self.text
        return [{"type": "text", "text": self.text}, *self.image_blocks()]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (images as their count)."""
        return {"text": self.text, "images": len(self.images),
                "saved": self.saved.to_dict() if self.saved else None, "elided_chars": self.elided_chars}


def observe(
    ex: Execution,
    *,
    budget: int = DEFAULT_BUDGET,
    send_images: bool = False,
    max_images: int = 4,
    lost_variables: Iterable[str] | None = None,
    save_as: str | None = None,
    workdir: str | None = None,
    recovering: bool = False,
    memory_limit: int | None = None,
) -> Observation:
    """Turn ``ex`` into the observation the model reads.

    ``budget`` is in characters. ``lost_variables`` names the variables that existed before
    a step that lost the kernel's state (``None``: not known). ``save_as`` is the file name
    under which the caller will store the full output when it does not fit. ``workdir``
    (the kernel's working directory) lets traceback paths inside it show as relative.
    ``recovering``: the session rebuilds lost variables before the next step.
    ``memory_limit`` (bytes) lets a step that came near it show its peak memory.
    """
    figures = _Figures(attach=send_images, max_images=max_images)
    output = _output_text(ex.outputs, figures)
    head = _notices(ex, lost_variables, recovering=recovering)
    notes = (_variables_note(ex), _dropped_note(ex), resources_note(ex, memory_limit))
    tail = [note for note in notes if note]
    room = max(budget - sum(len(part) + 1 for part in head + tail), _MIN_OUTPUT_ROOM)
    error = ""
    if ex.error is not None:
        error = format_error(ex.error, limit=max(room - min(len(output), room // 4), _MIN_OUTPUT_ROOM),
                             workdir=workdir)
    shown, elided = elide(output, max(room - len(error), _MIN_OUTPUT_ROOM), saved_as=save_as)
    if not output.strip() and not error:
        shown = message("no_output") if ex.status == "ok" else ""
    text = "\n".join(part for part in (*head, shown.rstrip("\n"), error, *tail) if part)
    saved = SavedOutput(save_as, output.encode("utf-8")) if elided and save_as else None
    return Observation(text=text, images=figures.attached, saved=saved, elided_chars=elided)


# -- output ---------------------------------------------------------------------------


class _Figures:
    """Numbers the figures of one step and decides which are attached."""

    def __init__(self, *, attach: bool, max_images: int) -> None:
        self.attach = attach
        self.max_images = max_images
        self.count = 0
        self.attached: list[bytes] = []

    def add(self, png: bytes) -> str:
        self.count += 1
        size = png_size(png)
        described = f"{size[0]}x{size[1]}" if size else "a"
        if self.attach and len(self.attached) < self.max_images:
            self.attached.append(png)
            return message("figure_attached", index=self.count, size=described)
        return message("figure_hidden", index=self.count, size=described)


def png_size(png: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's header, or None if it is not a PNG."""
    if len(png) < 24 or not png.startswith(_PNG_SIGNATURE):
        return None
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def _join(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_text(outputs: list[dict[str, Any]], figures: _Figures) -> str:
    parts: list[str] = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            parts.append(strip_ansi(_join(out.get("text", ""))))
        elif kind in ("execute_result", "display_data"):
            parts.append(_rich_text(out.get("data", {}), figures).rstrip("\n") + "\n")
    return "".join(parts)


def _rich_text(data: dict[str, Any], figures: _Figures) -> str:
    """One rich output as text: a figure line, or its plain-text form; never HTML."""
    if "image/png" in data:
        try:
            png = base64.b64decode(_join(data["image/png"]))
        except ValueError:
            png = b""
        return figures.add(png)
    for mime in ("text/plain", "text/markdown", "text/latex"):
        if mime in data:
            return strip_ansi(_join(data[mime]))
    return message("other_output", mime=next(iter(data), "empty"))


def elide(text: str, limit: int, *, saved_as: str | None = None) -> tuple[str, int]:
    """Keep the head and tail of ``text`` within ``limit`` characters; return the text
    and how many characters were elided (cuts fall on line breaks where one is near)."""
    if len(text) <= limit:
        return text, 0
    probe = _marker(len(text), saved_as)
    keep = max(limit - len(probe) - 2, 0)
    head = _cut_head(text, keep * 3 // 5)
    tail = _cut_tail(text, keep - len(head))
    count = len(text) - len(head) - len(tail)
    return f"{head}\n{_marker(count, saved_as)}\n{tail}", count


def _marker(count: int, saved_as: str | None) -> str:
    if saved_as:
        return message("elided_saved", count=f"{count:,}", file=saved_as)
    return message("elided", count=f"{count:,}")


def _cut_head(text: str, size: int) -> str:
    head = text[:size]
    newline = head.rfind("\n")
    return head[: newline + 1] if newline >= size * 4 // 5 else head


def _cut_tail(text: str, size: int) -> str:
    if size <= 0:
        return ""
    tail = text[-size:]
    newline = tail.find("\n")
    return tail[newline + 1:] if 0 <= newline < size // 5 else tail


# -- errors ---------------------------------------------------------------------------


def trim_traceback(traceback: list[str], *, workdir: str | None = None) -> tuple[list[str], int]:
    """The frames worth showing and the number left out.

    Of a chain of exceptions only the last is kept. Of its frames, those in the user's
    cells (and in files under ``workdir``, the user's own modules) are kept, and the last
    one (where the exception was raised); library frames in between are dropped. The
    final ``ename: evalue`` line is kept. No host path is shown:
    paths into site-packages or the standard library are shortened to the module path,
    paths under ``workdir`` become relative, any other path keeps its last two parts.
    """
    entries = [strip_ansi(entry).rstrip("\n") for entry in traceback]
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].lstrip().startswith(_CHAIN_MARKERS):
            entries = entries[i + 1:]
            break
    body = [e for e in entries if e.strip() and not _RULE_RE.match(e.strip())
            and "Traceback (most recent call last)" not in e]
    final = body.pop() if body and not _is_frame(body[-1]) else ""
    keep = {i for i, frame in enumerate(body) if _is_user_frame(frame, workdir)}
    if body:
        keep.add(len(body) - 1)
    shown: list[str] = []
    for i in sorted(keep):
        if (shown and i - 1 not in keep) or (not shown and i > 0):
            shown.append("   ...")
        frame = body[i] if _is_user_frame(body[i], workdir) else _compact_frame(body[i])
        shown.append(scrub_frame_path(frame, workdir))
    if final:
        shown.append(final)
    return shown, len(body) - len(keep)


def scrub_frame_path(frame: str, workdir: str | None = None) -> str:
    """A frame whose ``File PATH`` names no host path (see :func:`trim_traceback`)."""
    head, sep, rest = frame.partition("\n")
    match = _FRAME_PATH_RE.match(head)
    if match is None:
        return frame
    path = match.group(2)
    shown = _short_path(path, workdir)
    return head[: match.start(2)] + shown + head[match.end(2):] + sep + rest


def _short_path(path: str, workdir: str | None) -> str:
    if workdir:
        root = workdir.rstrip("/\\")
        if path.startswith(root) and path[len(root): len(root) + 1] in ("/", "\\"):
            return path[len(root) + 1:]
    for pattern in (_PACKAGES_RE, _STDLIB_RE):
        found = pattern.match(path)
        if found is not None:
            return path[found.end():]
    parts = [p for p in re.split(r"[/\\]", path) if p]
    return path if len(parts) <= 2 and not path.startswith("/") else "…/" + "/".join(parts[-2:])


def _compact_frame(entry: str) -> str:
    """A library frame as its location and the lines next to the arrow."""
    lines = entry.split("\n")
    arrow = next((i for i, line in enumerate(lines) if _ARROW_RE.match(line)), None)
    if arrow is None:
        return "\n".join(lines[:3])
    return "\n".join([lines[0], *lines[max(1, arrow - 1): arrow + 1]])


def _is_frame(entry: str) -> bool:
    text = entry.lstrip()
    return text.startswith(("File ", "Cell In[", "Input In [")) or "<ipython-input-" in text


def _is_user_frame(entry: str, workdir: str | None = None) -> bool:
    text = entry.lstrip()
    if workdir:
        root = workdir.rstrip("/\\") + "/"
        if text.startswith(("File " + root, 'File "' + root)):
            return True
    return text.startswith(("Cell In[", "Input In [")) or "<ipython-input-" in text


def format_error(error: ExecutionError, *, limit: int, workdir: str | None = None) -> str:
    """The error as the model sees it: ``Error: ename: evalue`` and the trimmed traceback,
    cut in the middle only if it exceeds ``limit`` characters."""
    first = message("error", error=str(error))
    frames, omitted = trim_traceback(error.traceback, workdir=workdir)
    if not frames:
        return first
    header = message("traceback", omitted=omitted) if omitted else message("traceback_whole")
    rest = "\n".join([header, *frames])
    shown, _ = elide(rest, max(limit - len(first) - 1, _MIN_OUTPUT_ROOM))
    return f"{first}\n{shown}"


# -- notices ----------------------------------------------------------------------------


def _notices(ex: Execution, lost_variables: Iterable[str] | None, *, recovering: bool = False) -> list[str]:
    seconds = f"{ex.duration_s:.1f}"
    restored = [_restored_note(ex)] if ex.recovery is not None else []
    if ex.state != "lost":
        timeout = [message("timeout_kept", seconds=seconds)] if ex.status == "timeout" else []
        return restored + timeout
    why = ex.ending.detail if ex.ending is not None else "the cause is not known"
    advice = [message(f"died_advice_{ex.ending.cause.value}")] if ex.ending is not None and \
        f"died_advice_{ex.ending.cause.value}" in message_names() else []
    if ex.status == "died":
        what = " ".join([message("died", why=why), *advice])
    elif ex.status == "timeout":
        what = message("timeout_restarted", seconds=seconds)
    else:
        what = " ".join([message("died_before", why=why), *advice])
    if recovering:
        return [*restored, what, message("lost_recovering")]
    names = sorted(lost_variables) if lost_variables is not None else []
    lost = message("lost_named", names=", ".join(names)) if names else message("lost_all")
    return [*restored, what, lost]


def _restored_note(ex: Execution) -> str:
    report = ex.recovery
    assert report is not None
    how = {"snapshot": "loaded from a snapshot", "replay": "earlier steps re-run"}.get(report.method,
                                                                                   report.method)
    lines = report.describe().splitlines()[1:]  # the first line repeats how and why
    return message("restored", how=f"{how}; {report.reason}", report=" ".join(lines))


def _variables_note(ex: Execution) -> str:
    changes = ex.variables.describe()
    if not changes:
        return ""
    if len(changes) > _VARIABLES_NOTE_MAX:
        changes = changes[: _VARIABLES_NOTE_MAX - 4].rstrip() + " ..."
    elif ex.variables.truncated:
        changes += " ..."
    return message("variables", changes=changes)


def resources_note(ex: Execution, memory_limit: int | None = None) -> str:
    """The step's CPU time and peak memory, when they are worth the model's attention: a
    step that used :data:`RESOURCES_CPU_S` of CPU or more, one that held half its memory
    limit or more, one that died. (CPU time, not wall time, so that a busy machine does not
    change what the model reads.)"""
    peak, cpu = ex.peak_memory_bytes, ex.cpu_time_s
    if peak is None and cpu is None:
        return ""
    limit = memory_limit or (ex.ending.memory_limit_bytes if ex.ending is not None else None)
    near = peak is not None and limit is not None and peak >= limit / 2
    if not ((cpu or 0.0) >= RESOURCES_CPU_S or near or ex.status == "died"):
        return ""
    mb = 1024 * 1024
    memory = "unknown" if peak is None else f"{peak / mb:,.0f} MB" + (f" of a {limit / mb:,.0f} MB limit"
                                                                          if limit else "")
    return message("resources", cpu="unknown" if cpu is None else f"{cpu:.1f} s", memory=memory)


def _dropped_note(ex: Execution) -> str:
    return message("output_dropped", count=f"{ex.truncated_bytes:,}") if ex.truncated_bytes else ""


# -- the step ---------------------------------------------------------------------------


async def observe_step(
    session: KernelSession,
    ex: Execution,
    *,
    settings: ObservationSettings | None = None,
    lost_variables: Iterable[str] | None = None,
    save_as: str | None = None,
) -> Observation:
    """The one step from an execution to what a model sees (Analyst, KernelTool, MCP).

    Observes ``ex`` within ``settings``; when the output does not fit and ``save_as``
    names a file, the full output is stored there in the session's working directory
    and the text says so. If it cannot be stored (disk quota, file limits), the
    observation is made again without naming a file, so the model is never told about a
    file that does not exist.
    """
    chosen = settings or ObservationSettings()
    lost = list(lost_variables) if lost_variables is not None else None

    recovering = session.recovery.enabled
    limit = session.limits.memory_mb * 1024 * 1024 if session.limits.memory_mb else None

    def render(name: str | None) -> Observation:
        return observe(ex, budget=chosen.budget, send_images=chosen.send_images, max_images=chosen.max_images,
                       lost_variables=lost, save_as=name, recovering=recovering, memory_limit=limit)

    return await store_saved_output(session, render(save_as), lambda: render(None))


async def store_saved_output(session: KernelSession, obs: Observation,
                             without_file: Callable[[], Observation]) -> Observation:
    """Store the full output of a cut observation in the session's working directory;
    if it cannot be stored, return ``without_file()`` instead."""
    if obs.saved is None:
        return obs
    try:
        await session.upload(obs.saved.data, name=obs.saved.name)
    except (KernelAnalystError, OSError):
        return without_file()
    return obs
