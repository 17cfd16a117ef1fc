"""A real Jupyter Enterprise Gateway 3.3 on 127.0.0.1, from a virtualenv of its own.

Enterprise Gateway 3.3 needs ``jupyter-client<7`` and ``pyzmq<25``, which this project's
environment cannot hold, so it gets its own virtualenv beside the test interpreter's
(``<venv>/enterprise-gateway``), made on first use (``make test`` makes it before the
tests, so its pip install is not counted against a test's timeout):

    python -m tests.enterprise_gateway_fixtures     # make (or check) the virtualenv

Its kernels run ipykernel from this project's interpreter (a kernelspec written here),
through Enterprise Gateway's local process proxy. By default it refuses the user it runs
as when that is ``root`` (``unauthorized_users``), as a fresh deployment does; the tests
add ``mallory``.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .gateway_fixtures import GatewayProcess

REQUIREMENTS = ("jupyter_enterprise_gateway==3.3.*", "jupyter-client<7", "pyzmq<25")
"""What the gateway's virtualenv holds (the pins its 3.3 release needs)."""
UNAUTHORIZED = ("root", "mallory")
"""Users the test gateway refuses (``root`` is Enterprise Gateway's own default)."""
_INSTALL_TIMEOUT_S = 900


def venv_dir() -> Path:
    """Where the gateway's virtualenv lives: inside the test interpreter's own virtualenv,
    so ``make clean`` removes it and a fresh clone makes it again."""
    return Path(sys.prefix) / "enterprise-gateway"


def prepare_venv(dest: Path | None = None) -> Path:
    """The gateway's Python, after making its virtualenv if it is missing or holds other
    pins (under a file lock: two test workers may ask at once)."""
    dest = dest or venv_dir()
    python = dest / "bin" / "python"
    stamp = dest / ".installed-stamp"
    wanted = "\n".join(REQUIREMENTS)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == wanted and python.exists():
            return python
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True, timeout=_INSTALL_TIMEOUT_S)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *REQUIREMENTS], check=True, timeout=_INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
        stamp.write_text(wanted)
    return python


class EnterpriseGatewayProcess(GatewayProcess):
    """One ``enterprise_gateway`` process with a token, on 127.0.0.1 (kernels listed)."""

    def __init__(self, workdir: Path, *, python: Path, extra_args: tuple[str, ...] = ()) -> None:
        super().__init__(workdir, extra_args=extra_args)
        self.python = python

    def _environment(self) -> dict[str, str]:
        env = super()._environment()
        env.pop("KG_AUTH_TOKEN", None)
        env["EG_AUTH_TOKEN"] = self.token  # in the environment, not on the command line
        return env

    def argv(self) -> list[str]:
        users = [f"--EnterpriseGatewayApp.unauthorized_users={user}" for user in UNAUTHORIZED]
        return [str(self.python), "-m", "enterprise_gateway", "--EnterpriseGatewayApp.ip=127.0.0.1",
                f"--EnterpriseGatewayApp.port={self.port}", "--EnterpriseGatewayApp.port_retries=0",
                "--EnterpriseGatewayApp.list_kernels=True", "--KernelRestarter.time_to_dead=1.0",
                "--log-level=WARN", *users, *self.extra_args]

    def post_kernel(self, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """POST /api/kernels directly (status, JSON body), as another client would."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/api/kernels", body=json.dumps({"name": "python3", "env": env}),
                         headers={"Authorization": f"token {self.token}"})
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            conn.close()


def main() -> int:
    """``python -m tests.enterprise_gateway_fixtures``: make the virtualenv, say how long it took."""
    started = time.monotonic()
    made = not (venv_dir() / ".installed-stamp").is_file()
    with contextlib.redirect_stdout(sys.stderr):
        python = prepare_venv()
    took = time.monotonic() - started
    print(f"Enterprise Gateway virtualenv: {python.parent.parent} "
          f"({'made in' if made else 'ready; checked in'} {took:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["REQUIREMENTS", "UNAUTHORIZED", "EnterpriseGatewayProcess", "prepare_venv", "venv_dir"]
