"""The network allowlist from inside the sandbox: ``Limits(network=[...])``.

A real bubblewrap kernel in its own network namespace reaches listed names through the
proxy that runs in this process (``kernels/egress.py``), by way of the forwarder on the
sandbox's loopback and the Unix socket bound into it. Only loopback is used: the listed
names resolve to a server on this host's 127.0.0.1 through the backend's
``egress_hosts``; everything else must stay unreachable.
"""

from __future__ import annotations

import argparse
import base64
import functools
import glob
import hashlib
import http.server
import threading
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kernel_analyst.frontend import flags
from kernel_analyst.kernels import Limits, LocalBackend, SandboxUnavailableError, SessionManager
from kernel_analyst.kernels.launch import LocalKernel, sandbox

from .helpers import wait_until
from .test_egress import Upstream
from .test_sandbox_support import SMALL, Tracked, json_line

PROBE = """
import http.client, json, os, socket, urllib.request
out = {"proxy": os.environ.get("HTTPS_PROXY"), "no_proxy": os.environ.get("NO_PROXY")}
def attempt(name, call):
    try:
        out[name] = call()
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
# Plain HTTP through the proxy (urllib reads HTTP_PROXY) and a CONNECT tunnel (as HTTPS uses).
def get(url):
    return urllib.request.urlopen(url, timeout=10).read().decode()
attempt("http", lambda: get(f"http://pypi.test:{PORT}/simple/"))
def tunnel():
    conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)
    conn.set_tunnel("files.pythonhosted.test", PORT)
    conn.request("GET", "/packages/x.whl")
    return conn.getresponse().read().decode()
attempt("tunnel", tunnel)
# Not listed, by name, by scheme, by IP literal.
attempt("unlisted_http", lambda: get(f"http://evil.test:{PORT}/"))
attempt("unlisted_https", lambda: get("https://evil.test/"))
attempt("redirect", lambda: get(f"http://pypi.test:{PORT}/redirect"))  # urllib follows it
def ip_tunnel():
    conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)
    conn.set_tunnel("127.0.0.1", PORT)
    conn.request("GET", "/")
    return conn.getresponse().read().decode()
attempt("ip_literal", ip_tunnel)
# Raw sockets: the host's loopback is not the sandbox's, nothing else is routed, no DNS.
attempt("raw_host_loopback", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3).close())
attempt("raw_outbound", lambda: socket.create_connection(("192.0.2.1", 80), timeout=3).close())
attempt("dns", lambda: socket.getaddrinfo("pypi.test", 443))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream() as server:
        yield server


@pytest.fixture(scope="module")
def package_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A PEP 503 simple index with one small wheel, served over HTTP on 127.0.0.1; its port."""
    root = tmp_path_factory.mktemp("index")
    _write_index(root)
    handler = functools.partial(_QuietHandler, directory=str(root))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield int(httpd.server_address[1])
        finally:
            httpd.shutdown()
            thread.join(10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _write_index(root: Path) -> None:
    files = {"tinypkg/__init__.py": "X = 1\n",
             "tinypkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
             "tinypkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                            "Tag: py3-none-any\n"}
    project = root / "simple" / "tinypkg"
    project.mkdir(parents=True)
    wheel = "tinypkg-0.1-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(project / wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(text)}")
        record.append("tinypkg-0.1.dist-info/RECORD,,")
        archive.writestr("tinypkg-0.1.dist-info/RECORD", "\n".join(record))
    (project / "index.html").write_text(f'<a href="{wheel}">{wheel}</a>')
    (root / "simple" / "index.html").write_text('<a href="tinypkg/">tinypkg</a>')


@pytest.fixture(scope="module")
async def allowlisted(upstream: Upstream, package_index: int,
                      tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SessionManager]:
    limits = Limits(isolation="sandbox", network=[f"pypi.test:{upstream.port}",
                                                  f"*.pythonhosted.test:{upstream.port}",
                                                  f"index.test:{package_index}"], **SMALL)
    backend = LocalBackend(egress_hosts={"pypi.test": "127.0.0.1", "files.pythonhosted.test": "127.0.0.1",
                                         "evil.test": "127.0.0.1", "index.test": "127.0.0.1"})
    async with SessionManager(tmp_path_factory.mktemp("egress"), limits=limits, backend=backend) as manager:
        yield manager


async def test_listed_names_are_reachable_and_nothing_else(allowlisted: SessionManager,
                                                            upstream: Upstream) -> None:
    session = await allowlisted.session("allowlist")
    s = Tracked(session)
    before = len(upstream.heads)
    ex = await s.run(f"PORT = {upstream.port}\n" + PROBE)
    out = json_line(ex.text)
    assert out["proxy"] == "http://127.0.0.1:3128" and "127.0.0.1" in out["no_proxy"]
    assert out["http"].startswith("GET /simple/ HTTP/1.1"), out["http"]
    assert f"Host: pypi.test:{upstream.port}" in out["http"]
    assert out["tunnel"].startswith("GET /packages/x.whl HTTP/1.1"), out["tunnel"]
    assert out["unlisted_http"] == (f"HTTPError: HTTP Error 403: Host evil.test:{upstream.port} "
                                    "is not on the network allowlist")
    assert "Tunnel connection failed: 403 Host evil.test:443 is not on the network allowlist" in \
        out["unlisted_https"]
    assert f"403 Host 127.0.0.1:{upstream.port} is not on the network allowlist" in out["ip_literal"]
    assert out["redirect"] == out["unlisted_http"], "a redirect is a new request, checked as the first"
    assert out["raw_host_loopback"].startswith("ConnectionRefusedError"), "the sandbox's own loopback"
    assert out["raw_outbound"].startswith("OSError"), out["raw_outbound"]
    assert out["dns"].startswith("gaierror"), out["dns"]
    assert len(upstream.heads) == before + 3, "only the three listed requests reached the server"
    kernel = session.kernel
    assert isinstance(kernel, LocalKernel) and kernel.egress is not None
    assert (kernel.egress.allowed, kernel.egress.refused) == (3, 4)
    assert "allowlist via the egress proxy" in kernel.plan.enforced["network"]
    s.check_audit()


async def test_pip_downloads_from_a_listed_index(allowlisted: SessionManager, package_index: int) -> None:
    session = Tracked(await allowlisted.session("pip"))
    pip = ("!python -m pip download --no-deps --disable-pip-version-check --retries 0 --no-cache-dir "
           "-d /tmp/wheels --trusted-host index.test --index-url http://index.test:{port}/simple/ tinypkg")
    ex = await session.run(pip.format(port=package_index) + "\nimport os; print(os.listdir('/tmp/wheels'))")
    assert "Successfully downloaded tinypkg" in ex.text, ex.text
    assert "['tinypkg-0.1-py3-none-any.whl']" in ex.text
    session.check_audit()


async def test_the_forwarder_and_proxy_end_with_the_kernel(allowlisted: SessionManager) -> None:
    session = await allowlisted.session("lifetime")
    kernel = session.kernel
    assert isinstance(kernel, LocalKernel) and kernel.egress is not None
    socket_dir = kernel.egress.socket_path.parent
    ex = await session.execute("import os; [open(f'/proc/{p}/cmdline').read().replace(chr(0), ' ') "
                               "for p in os.listdir('/proc') if p.isdigit()]")
    assert "egress_forwarder.py" in ex.text, "the forwarder runs inside the sandbox"
    assert _forwarders(), "and is visible from the host"
    await session.restart()  # a new kernel: a new proxy, the old one gone
    assert session.kernel is not kernel and not socket_dir.exists()
    for sid in allowlisted.list():
        await allowlisted.close(sid)
    assert await wait_until(lambda: _forwarders() == []), "killed with their sandboxes (a moment to exit)"


def _forwarders() -> list[str]:
    found = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                if b"egress_forwarder.py" in f.read():
                    found.append(path)
        except OSError:
            pass
    return found


def test_an_allowlist_needs_the_sandbox() -> None:
    with pytest.raises(SandboxUnavailableError, match=r"network allowlist.*isolation='sandbox'"):
        sandbox.resolve_isolation(Limits(isolation="process", network=["pypi.org"]))
    parser = argparse.ArgumentParser()
    flags.add_kernel_flags(parser)
    args = parser.parse_args(["--network", "pypi.org,files.pythonhosted.org", "--isolation", "sandbox"])
    assert flags.kernel_settings(args).limits().network == ("pypi.org", "files.pythonhosted.org")
    assert flags.kernel_settings(parser.parse_args(["--network", "off"])).limits().network is False
    assert flags.kernel_settings(parser.parse_args(["--network", "on"])).limits().network is True
    with pytest.raises(SystemExit):
        parser.parse_args(["--network", "https://pypi.org/simple"])

