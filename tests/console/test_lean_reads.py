"""The reads every console page makes — its session, its user, the person's roles and
credentials — in plain SQL (issue 12): the same answers as Django's own, refusals included."""

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group, User
from django.contrib.sessions.models import Session
from django.utils import timezone

from orbit_console.ops.sessions import SessionStore
from orbit_console.people.backends import PeopleBackend
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import ROLES, load_person
from tests.support.people import TestPerson, make_person


def test_a_live_session_is_read_and_an_expired_one_is_not(live_db: None) -> None:
    store = SessionStore()
    store["who"] = "operator"
    store.create()
    key = store.session_key
    assert SessionStore(key).load() == {"who": "operator"}
    assert async_to_sync(SessionStore(key).aload)() == {"who": "operator"}

    Session.objects.filter(session_key=key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    expired = SessionStore(key)
    assert expired.load() == {}
    assert expired.session_key is None  # a new session, never the expired one's key
    assert SessionStore("no-such-session-key-0123456789ab").load() == {}


@pytest.fixture
def person(world: dict[str, Any]) -> TestPerson:
    return make_person(world, "operator", "auditor")


def test_the_signed_in_user_is_read_as_django_reads_it(person: TestPerson) -> None:
    backend = PeopleBackend()
    user = backend.get_user(person.user.pk)
    assert user is not None
    orm = User.objects.get(pk=person.user.pk)
    assert (user.username, user.password, user.is_active, user.date_joined) == (
        orm.username,
        orm.password,
        orm.is_active,
        orm.date_joined,
    )
    assert async_to_sync(backend.aget_user)(str(person.user.pk)) == user
    assert backend.get_user("not a number") is None
    assert backend.get_user(10**9) is None

    User.objects.filter(pk=person.user.pk).update(is_active=False)
    assert backend.get_user(person.user.pk) is None  # as ModelBackend: inactive is no one


def test_a_person_is_their_roles_and_credentials(person: TestPerson, world: dict[str, Any]) -> None:
    user = User.objects.get(pk=person.user.pk)
    user.groups.add(Group.objects.get_or_create(name="not-a-console-role")[0])
    loaded = load_person(user)
    assert loaded is not None
    assert loaded.roles == frozenset({"operator", "auditor"}) and loaded.roles <= set(ROLES)
    orm = list(OrbitCredential.objects.filter(user=user).order_by("namespace_name"))
    assert [c.pk for c in loaded.credentials] == [c.pk for c in orm]
    assert loaded.credentials[0].token_ciphertext == orm[0].token_ciphertext
    assert loaded.credentials[0].namespace_id == world["namespace_id"]


def test_the_user_is_read_with_every_role_and_credential_once(
    person: TestPerson, world: dict[str, Any]
) -> None:
    """Two roles and two credentials: the joined read has four rows, the person has each once,
    credentials in the order of their namespaces' names."""
    from orbit_console.ledger.seed import seed_world
    from orbit_console.people.credentials import person_enroll
    from orbit_console.people.person import user_with_person

    other = seed_world(label="lean-reads")
    person_enroll(
        user=person.user,
        roles=frozenset({"operator", "auditor"}),
        namespace_id=other["namespace_id"],
    )
    user = user_with_person(person.user.pk)
    assert user is not None
    loaded = load_person(user)
    assert loaded is not None
    orm = list(OrbitCredential.objects.filter(user=user).order_by("namespace_name", "namespace_id"))
    assert len(orm) == 2
    assert [c.pk for c in loaded.credentials] == [c.pk for c in orm]
    assert loaded.roles == frozenset({"operator", "auditor"})
    assert user_with_person(10**9) is None
