"""People of the console for tests: a Django user with roles and an Orbit credential minted in
a seeded namespace, exactly as ``manage.py console user`` makes them."""

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group, User

from orbit_console.console.credentials import mint_embedded


@dataclass
class TestPerson:
    __test__ = False

    username: str
    password: str
    user: User
    roles: frozenset[str]


def make_person(world: dict[str, Any], *roles: str, name: str | None = None) -> TestPerson:
    username = name or f"{'-'.join(roles)}-{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username=username, password=password)
    user.groups.set([Group.objects.get_or_create(name=role)[0] for role in roles])
    mint_embedded(user=user, roles=frozenset(roles), namespace_id=world["namespace_id"])
    return TestPerson(username=username, password=password, user=user, roles=frozenset(roles))
