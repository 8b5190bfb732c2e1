"""People, their roles and what their Orbit credentials let them do.

Roles are the groups ``operator``, ``supervisor`` and ``auditor`` (a person may hold several).
Each role implies Orbit permissions (``CONSOLE_ROLE_PERMISSIONS``); the console offers an action
only when the person's roles and credentials allow it, and the recovery API still has the last
word on every call. A person holds at most one credential per namespace and sees what their
credentials cover (docs/access.md): an organisation-wide auditor holds one in every namespace.
"""

import asyncio
import time
import weakref
from dataclasses import dataclass

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group, User
from django.db import connection

from orbit_console.client import OrbitClient, inprocess
from orbit_console.lib.rows import Rows
from orbit_console.lib.secretbox import unseal
from orbit_console.people.accounts import COMPANY_KNOWN, company_ids
from orbit_console.people.models import Account, OrbitCredential

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
    def can_read_audit(self) -> bool:
        """May follow a task live (the timeline socket reads the platform's audit, AU1)."""
        return self.can("tasks:audit:read")

    @property
    def read_only(self) -> bool:
        """Auditors who hold no other role never change anything."""
        return not self.roles & {OPERATOR, SUPERVISOR}


_USERS = Rows(User)
_CREDENTIALS = Rows(OrbitCredential)
# Where ``user_with_person`` leaves the roles and credentials it read with the user.
_READ_WITH = "_orbit_person"


def user_with_person(user_id: int) -> User | None:
    """The user with this id, their console roles and their Orbit credentials, in one query
    (every console page and socket reads them together; ``load_person`` then asks no more).
    One row per role and credential pair; a user with neither has one row of NULLs."""
    groups, memberships = Group._meta.db_table, User.groups.through._meta.db_table
    sql = (
        f"SELECT {_USERS.select_columns('u')}, a.company, g.name, "  # noqa: S608 -- the models' own names
        f"{_CREDENTIALS.select_columns('c')} "
        f"FROM {_USERS.table} u "
        f"LEFT JOIN {Account._meta.db_table} a ON a.user_id = u.id "
        f"LEFT JOIN {memberships} m ON m.user_id = u.id "
        f"LEFT JOIN {groups} g ON g.id = m.group_id "
        f"LEFT JOIN {_CREDENTIALS.table} c ON c.user_id = u.id "
        "WHERE u.id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id])
        rows = cursor.fetchall()
    if not rows:
        return None
    width = len(_USERS.fields)
    user = _USERS.from_row(rows[0][:width])
    # Whether company sign-in made the account (``people.accounts.is_company`` asks no more).
    setattr(user, COMPANY_KNOWN, bool(rows[0][width]))
    width += 1
    roles = frozenset(row[width] for row in rows if row[width] in ROLES)
    by_id = {row[width + 1]: row[width + 1 :] for row in rows if row[width + 1] is not None}
    credentials = sorted(
        (_CREDENTIALS.from_row(row) for row in by_id.values()),
        key=lambda c: (c.namespace_name, c.namespace_id),
    )
    setattr(user, _READ_WITH, (roles, tuple(credentials)))
    return user


def _roles_and_credentials(user: User) -> tuple[frozenset[str], tuple[OrbitCredential, ...]]:
    read: tuple[frozenset[str], tuple[OrbitCredential, ...]] | None = getattr(
        user, _READ_WITH, None
    )
    if read is not None:
        return read
    reread = user_with_person(user.pk)
    return getattr(reread, _READ_WITH) if reread is not None else (frozenset(), ())


def role_permissions(roles: frozenset[str]) -> frozenset[str]:
    mapping: dict[str, list[str]] = settings.CONSOLE_ROLE_PERMISSIONS
    return frozenset(permission for role in roles for permission in mapping.get(role, []))


def load_person(user: User | AnonymousUser) -> Person | None:
    """The signed-in person with roles and effective permissions (sync): as read with the user
    (``user_with_person``, through the session), else read now."""
    if not user.is_authenticated:
        return None
    assert isinstance(user, User)  # noqa: S101 -- the project uses Django's own user model
    roles, credentials = _roles_and_credentials(user)
    permissions = role_permissions(roles)
    # What some credential was issued with (all of the roles' for a token issued elsewhere).
    issued = frozenset().union(
        *(frozenset(c.permissions.split()) if c.permissions else permissions for c in credentials)
    )
    return Person(user=user, roles=roles, permissions=permissions & issued, credentials=credentials)


def person_now(user_id: int) -> Person | None:
    """The person as the database says now, ``None`` when they may no longer sign in: a
    socket's re-check (its scope's user holds the roles and credentials read when it
    connected, which ``load_person`` would reuse)."""
    user = user_with_person(user_id)
    if user is None or not user.is_active:
        return None
    return load_person(user)


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
    # The embedded API of this process, without a trip through the network (client/inprocess).
    transport = None if url else inprocess.InProcessTransport(timeout=settings.ORBIT_API_TIMEOUT)
    return OrbitClient(
        url or inprocess.base_url(),
        token,
        timeout=timeout,
        deadline=settings.ORBIT_API_TIMEOUT,
        max_answer_bytes=settings.ORBIT_API_MAX_ANSWER_BYTES,
        transport=transport,
    )


# --- The people behind platform actor ids (AU6) ------------------------------------------------

_names: dict[str, str] = {}
_company_actors: set[str] = set()
# Actor ids the console knows no one by (API clients, workers), and when that was last seen:
# without this, every live push by such an actor would query the database once per open socket.
_unknown: dict[str, float] = {}
UNKNOWN_FOR_SECONDS = 60.0
# One lookup at a time per event loop: the sockets of one task all receive a push at once, and
# the first one's lookup answers for the others.
_lookups: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
    weakref.WeakKeyDictionary()
)


async def actor_names(actor_ids: set[str]) -> dict[str, str]:
    """The console's people behind platform actor ids (AU6), cached per process; an id that
    belongs to no one is asked about again after ``UNKNOWN_FOR_SECONDS``."""
    if _missing(actor_ids):
        loop = asyncio.get_running_loop()
        async with _lookups.setdefault(loop, asyncio.Lock()):
            missing = _missing(actor_ids)
            if missing:
                found = await sync_to_async(_lookup_names)(missing)
                _names.update(found)
                now = time.monotonic()
                _unknown.update((actor_id, now) for actor_id in missing if actor_id not in found)
    # A platform actor (a worker, a scheduler) is no console person: the deployment may name it.
    configured = settings.CONSOLE_ACTOR_NAMES
    return {
        actor_id: _names.get(actor_id) or configured[actor_id]
        for actor_id in actor_ids
        if actor_id in _names or actor_id in configured
    }


def _missing(actor_ids: set[str]) -> list[str]:
    now = time.monotonic()
    return [
        actor_id
        for actor_id in actor_ids
        if actor_id not in _names
        and now - _unknown.get(actor_id, float("-inf")) >= UNKNOWN_FOR_SECONDS
    ]


def _lookup_names(actor_ids: list[str]) -> dict[str, str]:
    credentials = list(
        OrbitCredential.objects.filter(actor_id__in=actor_ids).select_related("user")
    )
    company = company_ids(credential.user_id for credential in credentials)
    _company_actors.update(c.actor_id for c in credentials if c.user_id in company)
    return {credential.actor_id: credential.user.get_username() for credential in credentials}


def is_company_actor(actor_id: str) -> bool:
    """Whether the person ``actor_names`` found behind ``actor_id`` is a company account (an
    account stays what it was made as: kept with the names)."""
    return actor_id in _company_actors
