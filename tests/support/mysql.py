"""The MySQL driver, for tests that start a process on a ``mysql://`` URL while the suite itself
runs on SQLite.

The driver is the opt-in extra ``mysql`` (it builds against the MySQL client headers), so the
README's ``uv run pytest`` on a machine with Python and uv alone has none: there such tests are
skipped with one line saying how to get it. Under CI (``CI`` set) a missing driver fails them,
as a missing Chromium fails the browser tests (``tests/support/chromium.py``).
"""

import importlib.util
import os

import pytest

HOW_TO_GET_IT = (
    "no MySQL driver: install the MySQL client headers ('apt-get install "
    "default-libmysqlclient-dev pkg-config') and the extra ('uv sync --extra mysql')"
)


def require_mysql_driver() -> None:
    if importlib.util.find_spec("MySQLdb") is not None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {HOW_TO_GET_IT}")
    pytest.skip(HOW_TO_GET_IT)
