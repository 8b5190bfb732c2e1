"""People, their roles and what their Orbit credentials let them do.

Roles are the groups ``operator``, ``supervisor`` and ``auditor`` (a person may hold several).
Each role implies Orbit permissions (``CONSOLE_ROLE_PERMISSIONS``); the console offers an action
only when the person's roles and credentials allow it, and the recovery API still has the last
word on every call. A person holds at most one credential per namespace and sees what their
credentials cover (docs/access.md): an organisation-wide auditor holds one in every namespace.
"""

from dataclasses import dataclass

import httpx
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group, User
from django.db import connection

from orbit_console.client import OrbitClient, inprocess
from orbit_console.console.models import OrbitCredential
from orbit_console.lib.rows import Rows
from orbit_console.lib.secretbox import unseal

OPERATOR = "operator"
SUPERVISOR = "supervisor"
AUDITOR = "auditor"
ROLES = (OPERATOR, SUPERVISOR, AUDITOR)


class NoCredential(Exception):
    """The person has no Orbit credential yet (``manage.py console user``)."""


@dataclass(frozen=True)
class Person:
    user: User
    roles: frozenset[str]
    permissions: frozenset[str]
    credentials: tuple[OrbitCredential, ...]  # one per namespace, by the namespace's name

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(credential.namespace_id for credential in self.credentials)

    def credential_in(self, namespace_id: str) -> OrbitCredential | None:
        """The person's credential in ``namespace_id``, if they hold one."""
        for credential in self.credentials:
            if credential.namespace_id == namespace_id:
                return credential
        return None

    @property
    def name(self) -> str:
        return self.user.get_username()

    def can(self, permission: str) -> bool:
        return permission in self.permissions

    def has_role(self, role: str) -> bool:
        return role in self.roles

    @property
    def read_only(self) -> bool:
        """Auditors who hold no other role never change anything."""
        return not self.roles & {OPERATOR, SUPERVISOR}


def _roles_of(user_id: int) -> frozenset[str]:
    groups, memberships = Group._meta.db_table, User.groups.through._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT g.name FROM {groups} g JOIN {memberships} m ON m.group_id = g.id "  # noqa: S608 -- Django's own tables
            "WHERE m.user_id = %s",
            [user_id],
        )
        names = {name for (name,) in cursor.fetchall()}
    return frozenset(names & set(ROLES))


def role_permissions(roles: frozenset[str]) -> frozenset[str]:
    mapping: dict[str, list[str]] = settings.CONSOLE_ROLE_PERMISSIONS
    return frozenset(permission for role in roles for permission in mapping.get(role, []))


_CREDENTIALS = Rows(OrbitCredential)


def load_person(user: User | AnonymousUser) -> Person | None:
    """The signed-in person with roles and effective permissions (sync). Every console page
    asks, so it is two plain queries (lib/rows.py) rather than two through the ORM."""
    if not user.is_authenticated:
        return None
    assert isinstance(user, User)  # noqa: S101 -- the project uses Django's own user model
    roles = _roles_of(user.pk)
    credentials = tuple(
        _CREDENTIALS.many("user_id = %s", [user.pk], order_by="namespace_name, namespace_id")
    )
    permissions = role_permissions(roles)
    # What some credential was issued with (all of the roles' for a token issued elsewhere).
    issued = frozenset().union(
        *(frozenset(c.permissions.split()) if c.permissions else permissions for c in credentials)
    )
    return Person(user=user, roles=roles, permissions=permissions & issued, credentials=credentials)


def orbit_client(credential: OrbitCredential, *, base_url: str | None = None) -> OrbitClient:
    """A client of the recovery API acting with this credential."""
    return token_client(unseal(credential.token_ciphertext), base_url=base_url)


def token_client(token: str, *, base_url: str | None = None) -> OrbitClient:
    """A client of the recovery API acting with ``token`` (not stored yet, or just unsealed)."""
    timeout = httpx.Timeout(
        connect=settings.ORBIT_API_CONNECT_TIMEOUT,
        read=settings.ORBIT_API_TIMEOUT,
        write=settings.ORBIT_API_TIMEOUT,
        pool=settings.ORBIT_API_CONNECT_TIMEOUT,
    )
    url = base_url or settings.ORBIT_API_URL
    if url:
        return OrbitClient(url, token, timeout=timeout)
    # The embedded API of this process, without a trip through the network (client/inprocess).
    transport = inprocess.InProcessTransport(timeout=settings.ORBIT_API_TIMEOUT)
    return OrbitClient(inprocess.base_url(), token, timeout=timeout, transport=transport)
