"""What reproducing means: input files by sha256, outputs after normalisation, images
by pixels. Used by ``verify`` (re-run a whole notebook) and by recovery (replay a
conversation's cells into a fresh kernel and say which came out differently).

The rules, in the order they are applied:

1. **Inputs.** Every file recorded in ``metadata.kernel_analyst.files`` must be found
   with the recorded sha256; a missing or changed file is reported and nothing runs.
2. **Status.** Each code cell must end the same way: ``ok``, ``error``, ``timeout`` or
   ``died``. A cell recorded as failed must fail with the same exception class and the
   same (normalised) message.
3. **Text.** Streams are compared per stream (all of stdout, all of stderr; the
   interleaving of the two is not deterministic); rich outputs in order. ``text/plain`` is
   compared exactly after normalisation; other text formats only when an output has no
   ``text/plain``.
4. **Normalisation** replaces volatile parts before comparing: memory addresses
   (``0x7f...``), timings (``Wall time: ...``, ``CPU times: ...``, timeit lines, "took 1.2
   s"), ipykernel's per-process temp paths, the session's working directory, and the ids
   in SVG images.
5. **Images** reproduce when their bytes are equal or, decoded, they have the same size
   and at most 0.1% of the pixels differ by more than 16 levels in any channel (so a
   different zlib or antialiasing rounding passes; a changed plot does not).
"""

from __future__ import annotations

import base64
import difflib
import io
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import sha256_file

PIXEL_TOLERANCE = 16
"""Largest per-channel difference (0-255) a pixel may have and still count as equal."""
PIXEL_FRACTION = 0.001
"""Fraction of pixels allowed to differ by more than ``PIXEL_TOLERANCE``."""

_RICH_TEXT = ("text/html", "text/markdown", "text/latex", "application/json", "image/svg+xml")
_RASTER = ("image/png", "image/jpeg", "image/gif")
_MAX_DIFF_LINES = 12


@dataclass(frozen=True)
class InputCheck:
    """One recorded input file and what was found."""

    name: str
    """The file's name in the session."""
    status: str
    """``ok``, ``missing`` or ``changed``."""
    expected_sha256: str
    """The digest recorded in the notebook."""
    found_sha256: str = ""
    """The digest of the file found (empty when missing)."""
    path: str = ""
    """Where it was found on this machine (empty when missing)."""
    searched: tuple[str, ...] = ()
    """Directories searched."""

    def describe(self) -> str:
        """One line for the terminal."""
        if self.status == "missing":
            return f"missing input: {self.name} (looked in: {', '.join(self.searched) or 'nowhere'})"
        if self.status == "changed":
            return (f"changed input: {self.path}: sha256 {self.found_sha256[:12]}..., "
                    f"recorded {self.expected_sha256[:12]}...")
        return f"input ok: {self.name}"



def join_text(value: Any) -> str:
    """nbformat text: a string, or a list of lines to join."""
    return "".join(value) if isinstance(value, list) else str(value)


def recorded_meta(nb: dict[str, Any]) -> dict[str, Any]:
    """A notebook's ``metadata.kernel_analyst`` (empty when absent)."""
    meta = nb.get("metadata", {}).get("kernel_analyst", {})
    return meta if isinstance(meta, dict) else {}


# -- inputs ----------------------------------------------------------------------------


def check_inputs(nb: dict[str, Any], notebook: Path,
                 data_dirs: Sequence[str | Path] = ()) -> list[InputCheck]:
    """Find each recorded input file and compare its sha256 with the record."""
    dirs = [Path(d) for d in data_dirs] + [notebook.parent, notebook.parent / "work"]
    searched = tuple(str(d) for d in dirs)
    checks = []
    for record in recorded_meta(nb).get("files", []):
        name, expected = str(record["name"]), str(record.get("sha256", ""))
        found = next((d / name for d in dirs if (d / name).is_file()), None)
        if found is None:
            checks.append(InputCheck(name, "missing", expected, searched=searched))
            continue
        digest = sha256_file(found)
        status = "ok" if not expected or digest == expected else "changed"
        checks.append(InputCheck(name, status, expected, digest, str(found), searched))
    return checks


# -- normalisation and comparison ----------------------------------------------------------

_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x..."),
    (re.compile(r"(Wall time|CPU times|Time taken|Elapsed time):[^\n]*"), r"\1: <time>"),
    (re.compile(r"[\d.]+ ?[nµu]?m?s ± [\d.]+ ?[nµu]?m?s per loop[^\n]*"), "<timeit>"),
    (re.compile(r"(?i)\b(took|elapsed|in|after)( about)? [\d.]+ ?"
                r"(ns|µs|us|ms|s|sec|secs|seconds|min|minutes)\b"), r"\1 <duration>"),
    (re.compile(r"ipykernel_\d+"), "ipykernel_<pid>"),
    (re.compile(r"\[\d+:\d+<[\d:?]+, *[^\]]*\]"), "[<progress>]"),
)
_SVG_IDS = re.compile(r"""((?:id|xlink:href|href|clip-path|mask)=["'](?:url\()?#?)[^"')]+""")


def normalise(text: str, *, workdirs: Iterable[str | re.Pattern[str]] = ()) -> str:
    """``text`` with volatile parts (addresses, timings, temp paths, workdirs) replaced."""
    text = text.replace("\r\n", "\n")
    for where in workdirs:
        if isinstance(where, re.Pattern):
            text = where.sub("<workdir>", text)
        else:
            text = text.replace(where, "<workdir>")
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def compare_images(expected: bytes, actual: bytes) -> str | None:
    """None when the images match by the rule in this module's docstring, else why not."""
    if expected == actual:
        return None
    try:
        import numpy as np
        from PIL import Image
    except ImportError:  # Pillow comes with matplotlib; without it only equal bytes pass
        return "image bytes differ"
    with Image.open(io.BytesIO(expected)) as a, Image.open(io.BytesIO(actual)) as b:
        if a.size != b.size:
            return f"image size {b.size[0]}x{b.size[1]}, expected {a.size[0]}x{a.size[1]}"
        pixels_a = np.asarray(a.convert("RGBA"), dtype=np.int16)
        pixels_b = np.asarray(b.convert("RGBA"), dtype=np.int16)
    worst = np.abs(pixels_a - pixels_b).max(axis=2)
    bad, total = int((worst > PIXEL_TOLERANCE).sum()), int(worst.size)
    if bad <= PIXEL_FRACTION * total:
        return None
    return f"image differs: {bad:,} of {total:,} pixels ({bad / total:.2%}) beyond tolerance"


def compare_outputs(expected: list[dict[str, Any]], actual: list[dict[str, Any]],
                    *, workdirs: Sequence[Sequence[str | re.Pattern[str]]] = ((), ())) -> list[str]:
    """Differences between two cells' outputs (empty when they reproduce)."""
    norm_e = _normaliser(workdirs[0])
    norm_a = _normaliser(workdirs[1])
    found: list[str] = []
    for name in ("stdout", "stderr"):
        found += _text_diff(name, norm_e(_stream(expected, name)), norm_a(_stream(actual, name)))
    rich_e, rich_a = _rich(expected), _rich(actual)
    if len(rich_e) != len(rich_a):
        found.append(f"{len(rich_a)} rich outputs (displays, results), expected {len(rich_e)}")
    for i, (e, a) in enumerate(zip(rich_e, rich_a, strict=False)):
        found += [f"output {i}: {d}" for d in _compare_bundle(e, a, norm_e, norm_a)]
    return found


def _normaliser(workdirs: Sequence[str | re.Pattern[str]]) -> Callable[[str], str]:
    return lambda text: normalise(text, workdirs=workdirs)


def _stream(outputs: list[dict[str, Any]], name: str) -> str:
    return "".join(join_text(o.get("text", "")) for o in outputs
                   if o.get("output_type") == "stream" and o.get("name") == name)


def _rich(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o.get("data", {}) for o in outputs if o.get("output_type") in ("display_data", "execute_result")]


def _compare_bundle(e: dict[str, Any], a: dict[str, Any], norm_e: Callable[[str], str],
                    norm_a: Callable[[str], str]) -> list[str]:
    found: list[str] = []
    for mime in _RASTER:
        if mime in e or mime in a:
            if mime not in e or mime not in a:
                found.append(f"{mime} {'missing' if mime in e else 'unexpected'}")
                continue
            why = compare_images(base64.b64decode(join_text(e[mime])), base64.b64decode(join_text(a[mime])))
            found += [why] if why else []
    texts = ["text/plain"] if "text/plain" in e else [m for m in _RICH_TEXT if m in e]
    for mime in texts:
        if mime not in a:
            found.append(f"{mime} missing")
            continue
        ev, av = norm_e(_text_of(e[mime])), norm_a(_text_of(a[mime]))
        if mime == "image/svg+xml":
            ev, av = _SVG_IDS.sub(r"\1<id>", ev), _SVG_IDS.sub(r"\1<id>", av)
        found += _text_diff(mime, ev, av)
    return found


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else join_text(value) if isinstance(value, list) else json.dumps(
        value, sort_keys=True)


def _text_diff(label: str, expected: str, actual: str) -> list[str]:
    if expected == actual:
        return []
    lines = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "recorded", "rerun",
                                      lineterm="", n=1))
    shown = lines[2:2 + _MAX_DIFF_LINES] + (["..."] if len(lines) > 2 + _MAX_DIFF_LINES else [])
    return [f"{label} differs:\n" + "\n".join(shown)]


def _error(outputs: list[dict[str, Any]]) -> tuple[str, str] | None:
    for out in outputs:
        if out.get("output_type") == "error":
            return str(out.get("ename", "")), str(out.get("evalue", ""))
    return None


def compare_cell(cell: dict[str, Any], status: str, outputs: list[dict[str, Any]],
                 *, workdirs: Sequence[Sequence[str | re.Pattern[str]]] = ((), ())) -> list[str]:
    """Differences between a recorded code cell and its re-execution."""
    expected_status = recorded_status(cell)
    if status != expected_status:
        return [f"status {status}, expected {expected_status}"]
    found: list[str] = []
    err_e, err_a = _error(cell.get("outputs", [])), _error(outputs)
    if err_e != err_a and err_e and err_a:
        norm_e, norm_a = _normaliser(workdirs[0]), _normaliser(workdirs[1])
        if err_e[0] != err_a[0] or norm_e(err_e[1]) != norm_a(err_a[1]):
            found.append(f"error {err_a[0]}: {err_a[1]}; expected {err_e[0]}: {err_e[1]}")
    without = [o for o in cell.get("outputs", []) if o.get("output_type") != "error"]
    return found + compare_outputs(without, [o for o in outputs if o.get("output_type") != "error"],
                                   workdirs=workdirs)


def recorded_status(cell: dict[str, Any]) -> str:
    """How a code cell ended: its kernel_analyst metadata, else its outputs."""
    status = cell.get("metadata", {}).get("kernel_analyst", {}).get("status")
    if isinstance(status, str):
        return status
    return "error" if _error(cell.get("outputs", [])) else "ok"
