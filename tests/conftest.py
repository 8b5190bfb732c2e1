"""Fixtures shared by every suite: the test database, real servers, seeded worlds, Chromium."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.chromium import HOW_TO_GET_ONE, find_chromium
from tests.support.mysql import HOW_TO_GET_IT as MYSQL_DRIVER
from tests.support.oidc import HOW_TO_GET as OIDC_PROVIDER
from tests.support.people import TestPerson, make_person
from tests.support.proxy import FaultyProxy
from tests.support.servers import DaphneServer
from tests.support.tools import HOW_TO_GET as TOOLS


@pytest.fixture(scope="session")
def django_db_setup(
    django_test_environment: None, django_db_modify_db_settings: None, django_db_blocker: Any
) -> Iterator[None]:
    """Always create the test database: most suites use it through real servers, not through
    pytest-django's ``db`` fixture, so pytest-django's own detection would skip it. Under
    pytest-xdist each worker's has its name suffixed (``_gw0``...)."""
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        config = setup_databases(verbosity=0, interactive=False, aliases={"default"})
    name = connection.settings_dict["NAME"]
    yield
    with django_db_blocker.unblock():
        teardown_databases(config, verbosity=0)
    if connection.vendor == "sqlite":
        for suffix in ("-wal", "-shm"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)


@pytest.fixture(scope="module", autouse=True)
def sign_in_failures_stay_in_their_module(
    django_db_setup: None, django_db_blocker: Any
) -> Iterator[None]:
    """Every request of the run comes from 127.0.0.1, and sign-in throttling counts failures
    by address (``people/throttle.py``): a module that sends wrong passwords on purpose (the
    generated-input runs, the throttle's own tests) would lock the next module's people out of
    signing in for the cool-off. What a module's failures left is forgotten when it ends."""
    yield
    from axes.models import AccessAttempt

    with django_db_blocker.unblock():
        AccessAttempt.objects.all().delete()


@pytest.fixture
def live_db(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Autocommit access to the test database, shared with the servers. Nothing is rolled
    back: tests stay independent by working in namespaces of their own (``world``)."""
    with django_db_blocker.unblock():
        yield


# The Origin a console process of the test run declares to an external Orbit's event stream
# (feed/sources.console_origin: http:// and the first of ALLOWED_HOSTS), which the servers that
# play that Orbit allow, as its operator would (docs/events.md).
CONSOLE_ORIGINS = {"ORBIT_EVENTS_ALLOWED_ORIGINS": "http://127.0.0.1"}


@pytest.fixture(scope="session")
def orbit_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """One daphne process serving the recovery API and the console on the test database."""
    with django_db_blocker.unblock():
        server = DaphneServer("orbit", env=CONSOLE_ORIGINS).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def orbit_server_2(orbit_server: DaphneServer, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """A second daphne process on the same database: with it, racing requests really run at
    the same time (one process runs its sync views one at a time)."""
    with django_db_blocker.unblock():
        server = DaphneServer("orbit-2", env=CONSOLE_ORIGINS).start()
    yield server
    server.stop()


@pytest.fixture
def world(live_db: None) -> dict[str, Any]:
    """A fresh ``orbit seed`` namespace: tokens and one task in every situation."""
    from orbit_console.ledger.seed import seed_world

    return seed_world(label="test")


@pytest.fixture
def api(orbit_server: DaphneServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=orbit_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def people(world: dict[str, Any]) -> dict[str, TestPerson]:
    """An operator, a supervisor and an auditor of ``world``'s namespace."""
    return {role: make_person(world, role) for role in ("operator", "supervisor", "auditor")}


@pytest.fixture(scope="session")
def faulty_proxy_session(orbit_server: DaphneServer) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(upstream_port=orbit_server.port)
    yield proxy
    proxy.close()


@pytest.fixture
def faulty_proxy(faulty_proxy_session: FaultyProxy) -> Iterator[FaultyProxy]:
    """The proxy between ``proxied_console`` and the API, back to ``pass`` after each test."""
    faulty_proxy_session.set_mode("pass")
    yield faulty_proxy_session
    faulty_proxy_session.set_mode("pass")


@pytest.fixture(scope="session")
def proxied_console(
    faulty_proxy_session: FaultyProxy, django_db_blocker: Any
) -> Iterator[DaphneServer]:
    """A console server that reaches the recovery API through ``faulty_proxy``."""
    with django_db_blocker.unblock():
        server = DaphneServer(
            "console-proxied", env={"ORBIT_EMBEDDED_API_URL": faulty_proxy_session.url}
        ).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    chromium = find_chromium()
    assert chromium is not None, HOW_TO_GET_ONE  # browser tests are skipped without one
    return {
        **browser_type_launch_args,
        "executable_path": chromium.executable_path,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
        ],
    }


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests last: Playwright's sync API leaves an event loop installed in the test
    thread for the rest of the session, which code that starts its own loop cannot share.

    Without a Chromium they are skipped (one line in the summary says how to get one), except
    under CI, where a missing browser fails the run."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
    browser_items = [item for item in items if item.get_closest_marker("browser")]
    if not browser_items or find_chromium() is not None:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"CI is set and {HOW_TO_GET_ONE}")
    skip = pytest.mark.skip(reason=HOW_TO_GET_ONE)
    for item in browser_items:
        item.add_marker(skip)


# What a fresh machine lacks, each said once in the summary with how to get it. Counted from the
# reports, which under pytest-xdist reach the controller (the workers are the ones collecting).
_MISSING_EXTRAS = {
    "browser": HOW_TO_GET_ONE,
    "MySQL driver": MYSQL_DRIVER,
    **{f"deployment ({name})": how for name, how in TOOLS.items()},
    "OpenID Connect provider": OIDC_PROVIDER,
}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for what, how in _MISSING_EXTRAS.items():
        skipped = sum(
            1
            for report in terminalreporter.stats.get("skipped", [])
            if isinstance(report.longrepr, tuple) and how in str(report.longrepr[2])
        )
        if skipped:
            noun = "test" if skipped == 1 else "tests"
            terminalreporter.write_line(f"{skipped} {what} {noun} skipped: {how}")
