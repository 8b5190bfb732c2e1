"""Roles from groups (signin/rules.py) and the people they make (signin/services.py)."""

import secrets
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from orbit_console.people.models import OrbitCredential
from orbit_console.signin.models import OidcIdentity
from orbit_console.signin.rules import first_match, groups_of, parse_filter, parse_rules
from orbit_console.signin.services import oidc_person_revoke, oidc_person_sync

ISSUER = "https://idp.example.com"


def test_the_first_rule_that_matches_decides() -> None:
    rules = parse_rules(
        '[{"claim": "groups", "value": "sup", "roles": ["supervisor"]},'
        ' {"claim": "groups", "value": "ops", "roles": ["operator"], "namespaces": ["n"]},'
        ' {"claim": "hd", "value": "example.com", "roles": ["auditor"]}]'
    )
    assert first_match(rules, {"groups": ["ops", "sup"]}) == rules[0]
    assert first_match(rules, {"groups": ["ops"]}) == rules[1]
    assert first_match(rules, {"groups": [], "hd": "example.com"}) == rules[2]
    assert first_match(rules, {"groups": ["marketing"]}) is None


@pytest.mark.parametrize(
    "text",
    [
        "{",
        '{"claim": "groups"}',
        '[{"value": "ops", "roles": ["admin"]}]',
        '[{"value": "ops", "roles": []}]',
        '[{"value": "", "roles": ["operator"]}]',
        '[{"value": "ops", "roles": ["operator"], "namespaces": "n"}]',
        '[{"value": "ops", "roles": ["operator"], "typo": 1}]',
    ],
)
def test_rules_that_are_not_rules_stop_the_start(text: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        parse_rules(text)


def test_a_large_group_list_is_filtered() -> None:
    claims = {"groups": [f"team-{n}" for n in range(5000)] + ["orbit-ops"]}
    assert groups_of(claims, claim="groups", keep=parse_filter("^orbit-")) == ["orbit-ops"]
    assert groups_of({"groups": "orbit-ops"}, claim="groups", keep=None) == ["orbit-ops"]
    assert groups_of({"groups": {"a": 1}}, claim="groups", keep=None) == []


@pytest.mark.django_db
def test_a_person_is_provisioned_kept_in_step_and_revoked(world: Any) -> None:
    namespace = world["namespace_id"]
    [operator, auditor] = parse_rules(
        f'[{{"value": "ops", "roles": ["operator"], "namespaces": ["{namespace}"]}},'
        f' {{"value": "aud", "roles": ["auditor"], "namespaces": ["{namespace}"]}}]'
    )
    claims = {"sub": "00u1", "preferred_username": "ada", "email": "ada@example.com"}
    user = oidc_person_sync(issuer=ISSUER, claims=claims, rule=operator)
    assert OidcIdentity.objects.get(subject="00u1").user == user
    assert set(user.groups.values_list("name", flat=True)) == {"operator"}
    first = OrbitCredential.objects.get(user=user)
    again = oidc_person_sync(issuer=ISSUER, claims=claims, rule=auditor)
    assert again == user
    second = OrbitCredential.objects.get(user=user)
    assert second.token_ciphertext != first.token_ciphertext
    assert oidc_person_revoke(issuer=ISSUER, subject="00u1") == user
    assert not user.groups.exists()
    assert not OrbitCredential.objects.filter(user=user).exists()


@pytest.mark.django_db
def test_a_company_person_never_takes_over_a_local_account_of_the_same_name(world: Any) -> None:
    """Held for an administrator (signin/placement.py); decided to be someone else, a name of
    its own and no usable password."""
    from django.contrib.auth.models import User

    from orbit_console.signin.models import HeldSignin
    from orbit_console.signin.services import held_signin_decide

    name = f"grace-{secrets.token_hex(3)}"
    local = User.objects.create_user(name, password="a long local password")
    [rule] = parse_rules('[{"value": "ops", "roles": ["auditor"]}]')
    held = oidc_person_sync(
        issuer=ISSUER, claims={"sub": f"00u-{name}", "preferred_username": name}, rule=rule
    )
    assert isinstance(held, HeldSignin)
    assert list(held.matches.all()) == [local]
    user = held_signin_decide(held_id=held.id, same_as=None, by="test")
    assert user != local
    assert user.username == f"{name}-2"
    assert not user.has_usable_password()
