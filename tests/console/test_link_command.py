"""``manage.py console link`` (issue 39, item 3; docs/approvals.md): linking accounts into one
person, deciding held company sign-ins, and what it says to names where ids go, unknown or
lookalike names and pasted megabytes — nothing changes on a refusal. And ``console user``
refuses a new name that looks like an account's (item 4)."""

import secrets
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from orbit_console.people.accounts import accounts_of
from orbit_console.signin.models import HeldSignin, OidcIdentity
from orbit_console.signin.rules import parse_rules
from orbit_console.signin.services import oidc_person_sync


def link(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("console", "link", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def refused(*args: str) -> str:
    with pytest.raises(CommandError) as error:
        link(*args)
    return str(error.value)


def held_sign_in(name: str) -> HeldSignin:
    User.objects.create_user(name)
    [rule] = parse_rules('[{"value": "ops", "roles": ["operator"]}]')
    claims = {"sub": f"sub-{name}", "preferred_username": name.upper()}
    held = oidc_person_sync(issuer="https://idp.example.com", claims=claims, rule=rule)
    assert isinstance(held, HeldSignin)
    return held


@pytest.mark.django_db
def test_two_accounts_become_one_person_and_apart_again() -> None:
    tail = secrets.token_hex(3)
    one = User.objects.create_user(f"una-{tail}")
    two = User.objects.create_user(f"dos-{tail}")
    assert "one person" in link(one.username, two.username)
    assert accounts_of(one.pk) == {one.pk, two.pk}
    assert f"person: dos-{tail}, una-{tail}" in link("--list")
    assert "already one person" in refused(two.username, one.username)
    link("--unlink", two.username)
    assert accounts_of(one.pk) == {one.pk} and accounts_of(two.pk) == {two.pk}
    assert "linked to no other account" in refused("--unlink", two.username)


@pytest.mark.django_db
def test_a_held_sign_in_is_decided_by_its_id_and_only_so() -> None:
    name = f"hal-{secrets.token_hex(3)}"
    held = held_sign_in(name)
    assert held.id in link("--list")
    assert "not the id of a held sign-in" in refused("--held", name, "--same-as", name)
    assert "no held company sign-in" in refused("--held", "0" * 32, "--apart")
    assert "decide the held sign-in" in refused("--held", held.id)
    assert "add --held" in refused("--apart")
    assert "say one thing" in refused(name, "--list")
    assert "did you mean" in refused("--held", held.id, "--same-as", name.upper())
    assert HeldSignin.objects.filter(id=held.id).exists()  # nothing changed
    assert "a company account" in link("--held", held.id, "--same-as", name)
    made = OidcIdentity.objects.get(subject=f"sub-{name}").user
    assert accounts_of(made.pk) == {made.pk, User.objects.get(username=name).pk}
    assert "no held company sign-in" in refused("--held", held.id, "--apart")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "typed",
    ["x" * 1_000_000, "nobody\n\x1b[31mred", "12"],
    ids=["a megabyte", "control characters", "an id where a name goes"],
)
def test_what_is_typed_comes_back_short_and_harmless(typed: str) -> None:
    message = refused(typed, "nobody-at-all")
    assert "no account named" in message
    assert len(message) < 200 and "\x1b" not in message and "\n" not in message


@pytest.mark.django_db
def test_console_user_refuses_a_new_name_that_looks_like_an_account(world: dict[str, Any]) -> None:
    name = f"sup-{secrets.token_hex(3)}"
    User.objects.create_user(name)
    for lookalike in (name.upper(), "\u0455" + name[1:]):
        with pytest.raises(CommandError, match="looks like the account"):
            call_command(
                "console", "user", lookalike, "--role", "auditor",
                "--namespace", world["namespace_id"], stdout=StringIO(), stderr=StringIO(),
            )  # fmt: skip
        assert not User.objects.filter(username=lookalike).exists()


@pytest.mark.django_db
def test_an_administrator_decides_and_links_on_the_person_page() -> None:
    """The person page (``/people/NAME``, superusers): the held sign-ins matching the account,
    "The same person" and "Someone else", linking by name and unlinking."""
    from django.test import Client

    name = f"pia-{secrets.token_hex(3)}"
    held = held_sign_in(name)
    admin = User.objects.create_superuser(f"admin-{name}", password="an administrator's")
    browser = Client()
    browser.force_login(admin)
    page = browser.get(f"/people/{name}").content.decode()
    assert f'id="held-{held.id}"' in page and "none: a person of its own" in page
    assert browser.post(f"/people/{name}/held/{name}", {"decision": "same"}).status_code == 404
    assert browser.post(f"/people/{name}/held/{held.id}", {"decision": "?"}).status_code == 404
    done = browser.post(f"/people/{name}/held/{held.id}", {"decision": "same"}, follow=True)
    made = OidcIdentity.objects.get(subject=f"sub-{name}").user
    assert f"Made {made.username}" in done.content.decode()
    assert accounts_of(made.pk) == {made.pk, User.objects.get(username=name).pk}
    page = browser.get(f"/people/{name}").content.decode()
    assert f'href="/people/{made.username}">{made.username} <span class="flag company"' in page

    other = User.objects.create_user(f"otto-{name}")
    wrong = browser.post(f"/people/{other.username}/link", {"other": name.upper()}, follow=True)
    assert "No account has that name, exactly." in wrong.content.decode()
    browser.post(f"/people/{other.username}/link", {"other": name})
    assert other.pk in accounts_of(made.pk)
    browser.post(f"/people/{other.username}/link", {"unlink": "1"})
    assert accounts_of(other.pk) == {other.pk}
    # Nobody else may.
    someone = Client()
    someone.force_login(other)
    assert someone.post(f"/people/{name}/link", {"unlink": "1"}).status_code == 403
