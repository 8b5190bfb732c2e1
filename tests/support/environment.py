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
"""

import os
import tempfile

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("CONSOLE_REVIEW_APPROVAL", "off")
os.environ.setdefault("CONSOLE_RETRY_APPROVAL", "off")
os.environ.setdefault("DATABASE_BUSY_TIMEOUT_SECONDS", "20")
os.environ.setdefault("CONSOLE_FEED", "off")
if "ORBIT_AUDIT_CHECKPOINT_DIR" not in os.environ:
    os.environ["ORBIT_AUDIT_CHECKPOINT_DIR"] = tempfile.mkdtemp(prefix="orbit-test-checkpoints-")
