"""People of the console for tests: a Django user with roles and an Orbit credential minted in
a seeded namespace, exactly as ``manage.py console user`` makes them."""

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from orbit_console.console.credentials import person_enroll


@dataclass
class TestPerson:
    __test__ = False

    username: str
    password: str
    user: User
    roles: frozenset[str]


def make_person(
    world: dict[str, Any],
    *roles: str,
    name: str | None = None,
    queue_ids: frozenset[str] = frozenset(),
) -> TestPerson:
    """With ``queue_ids``, the person's credential covers only those queues of the world."""
    username = name or f"{'-'.join(roles)}-{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username=username, password=password)
    person_enroll(
        user=user, roles=frozenset(roles), namespace_id=world["namespace_id"], queue_ids=queue_ids
    )
    return TestPerson(username=username, password=password, user=user, roles=frozenset(roles))
