"""Where a first company sign-in belongs (signin/placement.py), without a provider: what the
provider might say, including what a hostile or careless one does (issue 39, items 3-4)."""

import secrets
from typing import Any

import pytest
from django.contrib.auth.models import User

from orbit_console.people.accounts import accounts_of, is_company
from orbit_console.signin.models import HeldSignin, OidcIdentity
from orbit_console.signin.rules import parse_rules
from orbit_console.signin.services import oidc_person_sync

ISSUER = "https://idp.example.com"
[RULE] = parse_rules('[{"value": "ops", "roles": ["operator"]}]')


def sign_in(**claims: Any) -> User | HeldSignin:
    return oidc_person_sync(
        issuer=ISSUER, claims={"sub": secrets.token_hex(8), **claims}, rule=RULE
    )


@pytest.mark.django_db
def test_a_company_name_alike_to_another_company_account_gets_a_name_of_its_own() -> None:
    """The provider says they are two people (two ``sub``): nothing to hold, but the second
    never reads like the first."""
    name = f"kim-{secrets.token_hex(3)}"
    first = sign_in(preferred_username=name)
    second = sign_in(preferred_username=name.upper())
    assert isinstance(first, User) and isinstance(second, User)
    assert first.username == name and second.username == f"{name.upper()}-2"
    assert is_company(first) and is_company(second)
    assert accounts_of(second.pk) == {second.pk}


@pytest.mark.django_db
def test_what_a_careless_provider_sends_is_made_into_a_bounded_name() -> None:
    tail = secrets.token_hex(3)
    huge = sign_in(preferred_username=f"x{tail}" * 200_000, email="not-an-address")
    assert isinstance(huge, User) and len(huge.username) <= 150
    hidden = sign_in(preferred_username=f"eve\u200b\u202e{tail}")  # zero width, bidi override
    assert isinstance(hidden, User) and hidden.username == f"eve--{tail}"
    sub = f"sub-{tail}"
    claims = {"sub": sub, "preferred_username": ["not", "a", "string"], "email": 12}
    nothing = oidc_person_sync(issuer=ISSUER, claims=claims, rule=RULE)
    assert isinstance(nothing, User) and nothing.username == sub and nothing.email == ""


@pytest.mark.django_db
def test_a_verified_address_of_two_people_is_held_not_linked_to_either() -> None:
    tail = secrets.token_hex(3)
    address = f"team-{tail}@example.com"
    one = User.objects.create_user(f"lee-{tail}", email=address)
    two = User.objects.create_user(f"max-{tail}", email=address)
    held = sign_in(preferred_username=f"pat-{tail}", email=address, email_verified=True)
    assert isinstance(held, HeldSignin)
    assert set(held.matches.all()) == {one, two}
    assert not OidcIdentity.objects.filter(subject=held.subject).exists()


@pytest.mark.django_db
def test_a_verified_address_whose_name_looks_like_another_person_is_held() -> None:
    tail = secrets.token_hex(3)
    User.objects.create_user(f"ops-{tail}", email=f"ops-{tail}@example.com")
    User.objects.create_user(f"boss-{tail}")
    held = sign_in(
        preferred_username=f"Boss-{tail}", email=f"ops-{tail}@example.com", email_verified=True
    )
    assert isinstance(held, HeldSignin)


@pytest.mark.django_db
def test_signing_in_again_while_held_makes_nothing_and_keeps_one_hold() -> None:
    name = f"ivy-{secrets.token_hex(3)}"
    User.objects.create_user(name)
    claims = {"sub": f"sub-{name}", "preferred_username": name}
    first = oidc_person_sync(issuer=ISSUER, claims=claims, rule=RULE)
    again = oidc_person_sync(issuer=ISSUER, claims=claims, rule=RULE)
    assert isinstance(first, HeldSignin) and isinstance(again, HeldSignin)
    assert first.id == again.id
    assert HeldSignin.objects.filter(subject=f"sub-{name}").count() == 1
    assert not User.objects.filter(username=f"{name}-2").exists()
