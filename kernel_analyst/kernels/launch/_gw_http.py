"""The REST side of a Jupyter gateway: JSON requests with the token in a header.

Every failure becomes a :class:`GatewayError` whose message names the gateway (its URL
without credentials) and says what to do; the token never appears in a URL, a message
or a log line.
"""

from __future__ import annotations

import json
import logging
import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..exceptions import GatewayError

log = logging.getLogger(__name__)

_MAX_CLIENTS = 64  # liveness polls of many kernels must not queue behind each other


class GatewayHTTPError(GatewayError):
    """The gateway answered with an HTTP error status."""

    def __init__(self, message: str, status: int, *, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        """The gateway's own error message ("" when its body had none)."""


def normalise_url(url: str) -> str:
    """Check a gateway base URL (http or https, no credentials, query or fragment)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GatewayError(f"gateway URL must start with http:// or https:// and name a host; got {url!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise GatewayError("give the gateway URL without credentials, query or fragment; pass the "
                           "token with token= or KERNEL_ANALYST_GATEWAY_TOKEN")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


class GatewayHTTP:
    """A small async client for one gateway's REST API (and its websocket requests)."""

    def __init__(self, url: str, *, token: str | None, connect_timeout_s: float,
                 request_timeout_s: float, validate_cert: bool, ca_certs: str | None) -> None:
        self.url = normalise_url(url)
        self.ws_url = "ws" + self.url[4:]  # http -> ws, https -> wss
        self._headers = {"Authorization": f"token {token}"} if token else {}
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._tls: dict[str, Any] = {"validate_cert": validate_cert}
        if ca_certs:
            self._tls["ca_certs"] = ca_certs
        self._client: AsyncHTTPClient | None = None

    def request(self, path: str, *, method: str = "GET", body: Any = None,
                timeout: float | None = None, websocket: bool = False) -> HTTPRequest:
        """A request for ``path`` (under the base URL) with auth, timeouts and TLS options."""
        base = self.ws_url if websocket else self.url
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        elif method in ("POST", "PUT", "PATCH"):
            data = ""
        return HTTPRequest(base + path, method=method, headers=headers, body=data,
                           connect_timeout=self.connect_timeout_s,
                           request_timeout=timeout or self.request_timeout_s, **self._tls)

    async def call(self, method: str, path: str, body: Any = None, *,
                   timeout: float | None = None, missing_ok: bool = False) -> Any:
        """Send a request and return its decoded JSON body (None for an empty body, or
        for a 404 when ``missing_ok``). Raises GatewayError otherwise."""
        if self._client is None:
            self._client = AsyncHTTPClient(force_instance=True, max_clients=_MAX_CLIENTS)
        req = self.request(path, method=method, body=body, timeout=timeout)
        try:
            response = await self._client.fetch(req)
        except HTTPClientError as exc:
            if exc.code == 404 and missing_ok:
                return None
            raise self.error_for(exc, f"{method} {path}") from None
        except (OSError, ssl.SSLError) as exc:
            raise self.error_for(exc, f"{method} {path}") from None
        return json.loads(response.body) if response.body else None

    def error_for(self, exc: BaseException, what: str) -> GatewayError:
        """A GatewayError that says what happened and what to do."""
        where = f"the gateway at {self.url}"
        if isinstance(exc, HTTPClientError):
            if exc.code == 599:
                return GatewayError(f"{where} did not answer {what} in time ({exc.message}); check the "
                                    "URL and the network, or raise connect_timeout_s/request_timeout_s")
            if exc.code == 401:
                return GatewayError(f"{where} refused the token (HTTP 401 Unauthorized): it is missing "
                                    "or wrong; pass token= or set KERNEL_ANALYST_GATEWAY_TOKEN")
            detail = _error_detail(exc)
            said = f": {detail}" if detail else ""
            if exc.code == 403:
                return GatewayHTTPError(f"{where} forbade {what} (HTTP 403{said}); check the token's "
                                        "rights and the gateway's limits (e.g. max kernels)", 403,
                                        detail=detail)
            return GatewayHTTPError(f"{where} answered {what} with HTTP {exc.code}{said}", exc.code,
                                    detail=detail)
        if isinstance(exc, ssl.SSLError):
            return GatewayError(f"TLS with {where} failed ({exc}); check its certificate, or pass "
                                "ca_certs= (validate_cert=False only for testing)")
        return GatewayError(f"cannot reach {where} ({exc}); is it running, and is the URL right?")

    def close(self) -> None:
        """Release the HTTP client."""
        if self._client is not None:
            self._client.close()
            self._client = None


def _error_detail(exc: HTTPClientError) -> str:
    """The gateway's own short error message, if its JSON body has one."""
    try:
        body = json.loads(exc.response.body) if exc.response is not None else {}
    except ValueError:
        return ""
    message = str(body.get("message") or body.get("reason") or "") if isinstance(body, dict) else ""
    return message[:300]
