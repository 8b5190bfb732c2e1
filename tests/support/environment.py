"""The environment of a test run, set before Django reads its settings (loaded with ``-p`` from
pyproject's ``addopts``, ahead of pytest-django).

- Playwright's sync API runs an event loop in the test thread; Django's ORM then refuses to run
  there unless told that this thread is not really asynchronous.
- Most suites exercise direct submission (issue 3's flows), so the four-eyes policy is off by
  default in tests; tests/approvals start servers with the production default (approval
  required) and override the settings they need.
- On SQLite, the test process and the several servers it starts write to one file, under CI's
  load: writers may wait for its lock up to 20 s (the default is 5, tested in
  tests/ops/test_health_and_deploy.py).
- No process of the run consumes Orbit's event stream unless a test asks (``CONSOLE_FEED``):
  the test process serves the console's application to in-process sockets, and a consumer
  there, or in any server, would hold the lease and look after every test's follow-ups.
- Audit checkpoints describe one database: each run's test database gets a folder of its own,
  so that checkpoints of an earlier run (or of the demo) never meet this run's tables.

The suite runs on every core (pytest-xdist; ``pytest_load_initial_conftests`` below), each
worker isolated from the others: its own test database (pytest-django's ``_gw<N>`` suffix on
MariaDB; a file per process on SQLite), its own ``ORBIT_VAR_DIR``, its own key prefix for the
channel layer's groups in a shared Redis (``REDIS_CHANNEL_PREFIX``), its own range of ports
(``tests/support/servers.free_port``) and its own checkpoint folder. Every server, command and
socket a worker starts inherits these, so nothing one worker's test makes reaches another's.
"""

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("CONSOLE_REVIEW_APPROVAL", "off")
os.environ.setdefault("CONSOLE_RETRY_APPROVAL", "off")
os.environ.setdefault("DATABASE_BUSY_TIMEOUT_SECONDS", "20")
os.environ.setdefault("CONSOLE_FEED", "off")
if WORKER:
    base = Path(os.environ.get("ORBIT_VAR_DIR") or Path(__file__).resolve().parents[2] / "var")
    os.environ["ORBIT_VAR_DIR"] = str(base / f"pytest-{WORKER}")
    os.environ["REDIS_CHANNEL_PREFIX"] = f"orbit-test-{WORKER}"
if WORKER:  # the controller's folder, inherited, would be shared by every worker
    os.environ["ORBIT_AUDIT_CHECKPOINT_DIR"] = tempfile.mkdtemp(
        prefix=f"orbit-test-checkpoints-{WORKER}-"
    )
elif "ORBIT_AUDIT_CHECKPOINT_DIR" not in os.environ:
    os.environ["ORBIT_AUDIT_CHECKPOINT_DIR"] = tempfile.mkdtemp(prefix="orbit-test-checkpoints-")


def pytest_load_initial_conftests(
    early_config: pytest.Config, args: list[str], parser: Any
) -> None:
    """``uv run pytest`` uses every core: ``-n auto --dist loadscope`` unless the command line
    says how many processes (``-n N``, ``-n 0`` for one process) or turns xdist off
    (``-p no:xdist``). ``loadscope`` runs each module's tests on one worker, so a module's
    expensive fixtures (its own servers, a world it reads) start once, not once per worker;
    the modules are many and small enough to keep both workers busy to the end."""
    if WORKER or not early_config.pluginmanager.has_plugin("xdist"):
        return
    known = early_config.known_args_namespace
    if getattr(known, "numprocesses", None) is None:
        args[:0] = ["--numprocesses=auto"]
    if getattr(known, "dist", "no") == "no" and not getattr(known, "distload", False):
        args[:0] = ["--dist=loadscope"]
