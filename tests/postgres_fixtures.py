"""A real PostgreSQL server on 127.0.0.1 for the tests (the Debian package's binaries).

``initdb`` into a temporary directory, then ``postgres`` in the foreground as a child of
this process (as the ``postgres`` user when the tests run as root: PostgreSQL refuses to
run as root), listening on 127.0.0.1 on a free port with its socket directory in the
temporary directory. It stops at the end of the run (fast shutdown, then SIGKILL after a
deadline), and dies with this process if the run is killed (parent-death signal), so
nothing is left behind. Imported by conftest.py.
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .gateway_fixtures import free_port

INSTALL_HINT = ("PostgreSQL is not installed here (`make sysdeps` installs the Debian package "
                "'postgresql'; it could not be installed on this machine)")
_PR_SET_PDEATHSIG = 1


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    versions = [Path(p).parent.parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    numbered = sorted((int(v.name), v) for v in versions if v.name.isdigit())
    if numbered:
        return numbered[-1][1] / "bin"
    initdb = shutil.which("initdb")
    return Path(os.path.realpath(initdb)).parent if initdb else None


def _die_with_parent() -> None:
    """In the child, after the change of user: SIGQUIT (immediate shutdown) when the test
    process dies, so a killed run leaves no server behind."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT)


class PostgresServer:
    """One PostgreSQL server for the tests; :meth:`new_database` gives each test its own."""

    def __init__(self, bindir: Path, workdir: Path) -> None:
        self.bindir = bindir
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._user: str | None = "postgres" if os.geteuid() == 0 else None

    @property
    def data(self) -> Path:
        return self.workdir / "data"

    def url(self, database: str = "postgres") -> str:
        """A URL for ``--database``."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 60.0) -> PostgresServer:
        """initdb, start, and return once it accepts connections (or raise)."""
        if self._user is not None:
            shutil.chown(self.workdir, self._user, self._user)
        subprocess.run([str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--no-sync", "--no-instructions"],
                       check=True, capture_output=True, user=self._user, cwd=self.workdir)
        log = open(self.workdir / "postgres.log", "ab")  # noqa: SIM115
        with log:
            self.proc = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.workdir}",
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                user=self._user, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"PostgreSQL did not start; see {log.name}")
            time.sleep(0.05)
        return self

    def _ready(self) -> bool:
        done = subprocess.run([str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port),
                               "-t", "1"], capture_output=True)
        return done.returncode == 0

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        name = f"ka_{secrets.token_hex(4)}"
        subprocess.run([str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                        "-U", "postgres", name], check=True, capture_output=True, timeout=30)
        return self.url(name)

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT), SIGKILL after ``timeout``; the data directory goes."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def postgres_available() -> str | None:
    """None when a test server can run here, else why not (the skip message)."""
    if postgres_bindir() is None:
        return INSTALL_HINT
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "PostgreSQL is installed but there is no 'postgres' user to run it as (tests run as root)"
    return None


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole run; skipped (saying why) where none is installed."""
    why = postgres_available()
    if why is not None:
        pytest.skip(why)
    bindir = postgres_bindir()
    assert bindir is not None
    with tempfile.TemporaryDirectory(prefix="ka-postgres-") as tmp:
        server = PostgresServer(bindir, Path(tmp)).start()
        try:
            yield server
        finally:
            server.stop()
