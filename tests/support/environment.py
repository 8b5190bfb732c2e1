"""The environment of a test run, set before Django reads its settings (loaded with ``-p`` from
pyproject's ``addopts``, ahead of pytest-django).

- Playwright's sync API runs an event loop in the test thread; Django's ORM then refuses to run
  there unless told that this thread is not really asynchronous.
- Most suites exercise direct submission (issue 3's flows), so the four-eyes policy is off by
  default in tests; tests/approvals start servers with the production default (approval
  required) and override the settings they need.
"""

import os

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("CONSOLE_REVIEW_APPROVAL", "off")
os.environ.setdefault("CONSOLE_RETRY_APPROVAL", "off")
