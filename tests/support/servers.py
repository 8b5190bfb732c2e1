"""Real servers for tests: worker processes on the test database, as in production.

Each server is one worker of ``manage.py serve`` (``ops/workers.worker_argv``: uvicorn, or
daphne with ``ORBIT_SERVER=daphne``) serving ``orbit_console.asgi:application`` in its own
process with the test database's ``DATABASE_URL``, so tests talk to the recovery API and the
console over real HTTP and WebSockets. Data a test wants the server to see must be committed
(see ``live_db``).
"""

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

import httpx
from django.conf import settings
from django.db import connection

from orbit_console.ops.workers import default_server, worker_argv

LOG_DIR = Path(settings.VAR_DIR) / "test-logs"


# Ports a test binds after choosing them come from a range of this worker's own, below the
# kernel's ephemeral range: a port chosen by binding to 0 and letting go could be chosen by
# another worker at the same moment. Each run starts at a place of its own in the range, so
# that two runs on one machine (two checkouts) seldom meet either.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_PORTS_PER_WORKER = 900
_FIRST_PORT = 20_000 + _PORTS_PER_WORKER * int(_WORKER.removeprefix("gw") or 0)
_handed_out = 0
_start = secrets.randbelow(_PORTS_PER_WORKER)


def free_port() -> int:
    """A port nothing listens on now, for a server a test starts (one not handed out before
    by this process, so a stopped server's port is not given to the next)."""
    global _handed_out
    while _WORKER and _handed_out < _PORTS_PER_WORKER:
        port = _FIRST_PORT + (_start + _handed_out) % _PORTS_PER_WORKER
        _handed_out += 1
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_database_url() -> str:
    """The URL of the database the test run created (``test_...``), for child processes."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    user = db.get("USER") or "root"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"mysql://{user}{password}@{host}{port}/{db['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process of the test run: this one's, on the test database,
    without the permission to run sync database code in async contexts that tests need.

    Batches are the reconciler's to send unless a test says otherwise: a test drives them
    itself (``work_batches``) or starts ``manage.py reconcile``, and a server that sent them on
    its own would race it (the tests of the server's own worker set ``CONSOLE_BATCH_WORKER``).
    No server consumes Orbit's event stream unless a test asks (``CONSOLE_FEED``, off for the
    whole run: ``tests/support/environment.py``)."""
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "CONSOLE_BATCH_WORKER": "reconciler",
        # The run's settings (tests/support/settings.py) import from ``tests``, wherever the
        # child's own script lives.
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")])
        ),
        **extra,
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def wait_live(base_url: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Wait until ``base_url/health/live`` answers 200; fail if ``process`` exits first."""
    wait_answering(f"{base_url}/health/live", process, timeout, name=base_url)


def wait_answering(
    url: str,
    process: subprocess.Popen[bytes],
    timeout: float,
    *,
    name: str = "",
    interval: float = 0.2,
) -> None:
    """Wait until ``url`` answers 200; fail (AssertionError) if ``process`` exits first or
    ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited early ({process.returncode})"
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(interval)
    raise AssertionError(f"{name or url} did not come up")


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """Terminate ``process`` if it still runs; kill it if it has not ended 10 s later."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_manage(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` in a child process, by default with ``child_env()``."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=child_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class LoggedProcess:
    """A child process whose output goes to a log file of its own; ``stop`` ends both."""

    process: subprocess.Popen[bytes] | None
    _log: BinaryIO | None

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None


class DaphneServer(LoggedProcess):
    def __init__(
        self, name: str, *, env: dict[str, str] | None = None, proxy_headers: bool = False
    ) -> None:
        """``proxy_headers``: the client's address comes from X-Forwarded-For, as behind the
        reverse proxy (the image's CMD runs ``serve --proxy-headers``)."""
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.proxy_headers = proxy_headers
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{name}-{os.getpid()}.log"

    def start(self) -> "DaphneServer":
        env = child_env(**self.extra_env)
        log = self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            worker_argv(
                default_server(), host="127.0.0.1", port=self.port, proxy_headers=self.proxy_headers
            ),
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self._wait_live()
        return self

    def _wait_live(self, timeout: float = 120.0) -> None:
        # A process takes about 1.5 s of CPU to start; on a machine whose cores are all busy
        # (both workers of the suite, and whatever else runs) that can stretch past 30 s.
        assert self.process is not None
        try:
            wait_live(self.url, self.process, timeout)
        except AssertionError as failed:
            raise RuntimeError(f"{self.name}: {failed}; see {self.log_path}") from None

    def restart(self) -> "DaphneServer":
        """Stop and start again on the same port (clients see their connections drop)."""
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
