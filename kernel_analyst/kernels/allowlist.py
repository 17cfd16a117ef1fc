"""The network allowlist's entries: parsed, checked and in canonical form.

``Limits(network=[...])`` keeps its entries in the canonical form made here, and the
egress proxy (``launch/egress.py``) decides with the same rules, so a name is read one
way everywhere. Pure: no I/O, nothing imported from the rest of the package.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = (80, 443)
"""The ports a name listed without one may be reached on."""

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_NAME = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}")


@dataclass(frozen=True)
class HostRule:
    """One allowlist entry: ``pypi.org``, ``*.example.org`` (its subdomains),
    ``mirror.internal:8443`` (that port only), or an IP literal."""

    host: str
    """A lower-case name without a trailing dot, ``*.`` + a name, or a canonical IP literal."""
    port: int | None
    """The one port allowed; None allows :data:`DEFAULT_PORTS`."""

    def allows(self, host: str, port: int) -> bool:
        """Whether a request for ``host:port`` (normalised) matches this rule."""
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        if self.host.startswith("*."):
            return not is_ip_literal(host) and host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def parse_rule(entry: str) -> HostRule:
    """Parse one allowlist entry; ValueError says what is wrong with it."""
    text = entry.strip()
    if not text or "/" in text or "@" in text or any(c.isspace() for c in text):
        raise ValueError(f"a network allowlist entry is a host name, *.name, an IP address, each with an "
                         f"optional :port (no scheme, path or spaces); got {entry!r}")
    try:
        parts = urlsplit(f"//{text}")
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ValueError(f"bad network allowlist entry {entry!r}: {exc}") from None
    wildcard = text.startswith("*.")
    if wildcard:
        host = text[2:].rsplit(":", 1)[0] if port is not None else text[2:]
    host = normalise_host(host or "")
    if host is None or (wildcard and is_ip_literal(host)):
        raise ValueError(f"bad network allowlist entry {entry!r}: not a host name or IP address")
    return HostRule(f"*.{host}" if wildcard else host, port)


def normalise_allowlist(entries: str | Iterable[str]) -> tuple[str, ...]:
    """``Limits.network``'s canonical form of a list of entries (checked, duplicates dropped)."""
    items = [entries] if isinstance(entries, str) else list(entries)
    return tuple(dict.fromkeys(str(parse_rule(item)) for item in items))


def normalise_host(host: str) -> str | None:
    """A host as the allowlist compares it: lower case, no trailing dot, IP literals in
    canonical form; None when it is neither a DNS name nor an IP literal."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    return host if len(host) <= 253 and _NAME.fullmatch(host) else None


def is_ip_literal(host: str) -> bool:
    """True for an IP address literal (v4 or v6, without brackets)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class Allowlist:
    """The rules of one kernel's allowlist."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.rules = tuple(parse_rule(e) for e in entries)

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host:port`` (normalised) is listed."""
        return any(rule.allows(host, port) for rule in self.rules)

    def __str__(self) -> str:
        return ", ".join(map(str, self.rules)) or "nothing"


__all__ = ["DEFAULT_PORTS", "Allowlist", "HostRule", "is_ip_literal", "normalise_allowlist", "normalise_host",
           "parse_rule"]
