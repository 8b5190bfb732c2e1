"""Fixtures of the console suites."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.web import Console, signed_in
from tests.support.people import make_person
from tests.support.servers import DaphneServer


@pytest.fixture(scope="module")
def unchanged_world(
    django_db_setup: None, django_db_blocker: Any, orbit_server: DaphneServer
) -> Iterator[tuple[dict[str, Any], Console]]:
    """One seeded world and a signed-in operator shared by the tests of a module that change
    nothing in it (validation errors, pages only read): seeding and signing in cost seconds."""
    from orbit_console.ledger.seed import seed_world

    with django_db_blocker.unblock():
        world = seed_world(label="unchanged")
        person = make_person(world, "operator")
    with signed_in(orbit_server.url, person) as console:
        yield world, console
