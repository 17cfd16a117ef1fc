"""Text encoding of a data file, decided from its bytes on the host.

Order of evidence: a byte-order mark; then "the whole file is valid UTF-8" (exact, and
by far the most common case); then charset-normalizer on a sample. charset-normalizer
ranks single-byte Latin code pages poorly on short or mostly-ASCII samples (on French
text it proposed cp1250, mac_latin2 and cp932 here), so when Windows-1252 decodes the
sample with no more "mess" than its best guess, cp1252 wins: it is what Excel and most
Western-European exports write, and a superset of Latin-1's printable characters.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from ._source import STREAM_ERRORS, Source

_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32 byte-order mark"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32 byte-order mark"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8 byte-order mark"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16 byte-order mark"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16 byte-order mark"),
)
_CHUNK = 1 << 20
_SAMPLE = 1 << 20
_MESS_MARGIN = 0.01
_NAMES = {"utf_8": "utf-8", "latin_1": "latin-1", "iso8859_1": "latin-1", "ascii": "utf-8"}


@dataclass(frozen=True)
class EncodingGuess:
    """The encoding chosen for a file and why."""

    encoding: str
    """A Python codec name that ``pd.read_csv(encoding=...)`` accepts."""
    reason: str
    """One short phrase for the notes above the loading cell."""


def detect_encoding(source: Source) -> EncodingGuess:
    """The encoding of ``source``'s text (reads it once in chunks; never raises on content)."""
    sample = source.head(_SAMPLE)
    for bom, name, reason in _BOMS:
        if sample.startswith(bom):
            return EncodingGuess(name, reason)
    if (unmarked := _utf16_without_bom(sample)) is not None:
        return EncodingGuess(unmarked, "UTF-16 without a byte-order mark (every other byte is NUL)")
    if fits(source, "utf-8"):
        return EncodingGuess("utf-8", "the whole file is valid UTF-8")
    return _guess_legacy(sample)


def _utf16_without_bom(sample: bytes) -> str | None:
    """Mostly-ASCII UTF-16 is also valid UTF-8 (NUL is a character), so look at the NULs."""
    even, odd = sample[0::2], sample[1::2]
    if len(sample) < 4:
        return None
    if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


def _guess_legacy(sample: bytes) -> EncodingGuess:
    import charset_normalizer

    best = charset_normalizer.from_bytes(sample).best()
    western = charset_normalizer.from_bytes(sample, cp_isolation=["cp1252"]).best()
    if western is not None and (best is None or western.chaos <= best.chaos + _MESS_MARGIN):
        other = ""
        if best is not None and best.encoding != "cp1252":
            other = f" (charset-normalizer also proposed {best.encoding})"
        return EncodingGuess("cp1252", f"not UTF-8; Windows-1252 decodes it cleanly{other}")
    if best is None:
        return EncodingGuess("latin-1", "not UTF-8 and no code page fits; Latin-1 never fails to decode")
    name = _NAMES.get(best.encoding, best.encoding.replace("_", "-"))
    return EncodingGuess(name, f"not UTF-8; charset-normalizer's best guess ({best.language})")


def fits(source: Source, encoding: str) -> bool:
    """True when the whole text decodes with ``encoding`` (False too for a corrupt stream)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        with source.open() as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except (UnicodeDecodeError, *STREAM_ERRORS):
        return False
    return True
