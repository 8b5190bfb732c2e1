"""Fixtures of the recovery API's suites."""

from typing import Any

import pytest


@pytest.fixture(scope="module")
def untouched_world(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    """One seeded world shared by a module's tests that change nothing in it: requests the API
    refuses, each test checking that the ledger is as it was (``orbit seed`` costs a third of a
    second; some of these tests are parametrised dozens of times)."""
    from orbit_console.ledger.seed import seed_world

    with django_db_blocker.unblock():
        return seed_world(label="untouched")
