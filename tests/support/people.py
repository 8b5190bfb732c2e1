"""People of the console for tests: a Django user with roles and an Orbit credential minted in
a seeded namespace, exactly as ``manage.py console user`` makes them."""

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from orbit_console.people.credentials import person_enroll


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


def make_reader(world: dict[str, Any], *roles: str) -> TestPerson:
    """A person with ``roles`` whose credential holds ``tasks:read`` only, as a token issued
    elsewhere may (stored as ``console user --token-file`` stores it): for what the console does
    for someone who may not read the platform's audit (AU1)."""
    from orbit_console.client.types import CredentialInfo
    from orbit_console.ledger.lifecycle import credential_issue
    from orbit_console.ledger.models import Namespace, Permission
    from orbit_console.people.credentials import person_roles_set, store_external_token

    username = f"{'-'.join(roles)}-reader-{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username=username, password=password)
    person_roles_set(user=user, roles=frozenset(roles))
    namespace = Namespace.objects.get(id=world["namespace_id"])
    credential, token = credential_issue(
        namespace=namespace, actor_name=username, permissions=[Permission.READ]
    )
    info = CredentialInfo(
        id=credential.id,
        actor_id=credential.actor_id,
        namespace_id=namespace.id,
        namespace_name=namespace.name,
        queue_ids=frozenset(),
        permissions=frozenset({Permission.READ.value}),
    )
    store_external_token(user=user, token=token, info=info)
    return TestPerson(username=username, password=password, user=user, roles=frozenset(roles))
