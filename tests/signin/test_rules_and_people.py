"""Roles from groups (signin/rules.py) and the people they make (signin/services.py)."""

import secrets
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from orbit_console.lib.namespaces import NamespaceAmbiguous
from orbit_console.people.models import OrbitCredential
from orbit_console.signin.models import OidcIdentity
from orbit_console.signin.rules import (
    admitting_rule,
    first_match,
    groups_of,
    parse_filter,
    parse_rules,
)
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


def test_a_rule_that_names_no_claim_reads_oidc_groups_claim(settings: Any) -> None:
    """Issue 40 item 3: ``OIDC_GROUPS_CLAIM=roles`` (Entra ID's app roles) with rules that name
    no claim refused everyone: a rule without a claim read ``groups`` whatever the setting."""
    settings.OIDC_GROUPS_FILTER = None
    settings.OIDC_ROLE_RULES = parse_rules(
        '[{"value": "Orbit.Operator", "roles": ["operator"]},'
        ' {"claim": "hd", "value": "example.com", "roles": ["auditor"]}]'
    )
    settings.OIDC_GROUPS_CLAIM = "roles"
    assert admitting_rule({"roles": ["Orbit.Operator"]}) == settings.OIDC_ROLE_RULES[0]
    assert admitting_rule({"groups": ["Orbit.Operator"]}) is None
    assert admitting_rule({"hd": "example.com"}) == settings.OIDC_ROLE_RULES[1]
    settings.OIDC_GROUPS_CLAIM = "groups"
    assert admitting_rule({"groups": ["Orbit.Operator"]}) == settings.OIDC_ROLE_RULES[0]


@pytest.mark.django_db
def test_a_namespace_name_that_two_namespaces_share_is_refused_and_changes_nothing(
    world: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The one rule every command uses (lib/namespaces.py): an id, or a name exactly one
    namespace has. Before, sign-in silently took the first of two namespaces of that name; a
    name none has is still skipped (a rule may come before its namespace)."""
    from orbit_console.ledger.lifecycle import namespace_create

    shared = f"shared-{secrets.token_hex(3)}"
    first, _ = namespace_create(name=shared)
    namespace_create(name=shared)
    [both, missing, by_id] = parse_rules(
        f'[{{"value": "a", "roles": ["operator"], "namespaces": ["{shared}"]}},'
        f' {{"value": "b", "roles": ["operator"], "namespaces": ["no-such-namespace"]}},'
        f' {{"value": "c", "roles": ["operator"], "namespaces": ["{first.id}"]}}]'
    )
    claims = {"sub": f"00u-{shared}", "preferred_username": shared}
    with pytest.raises(NamespaceAmbiguous, match="several namespaces are named"):
        oidc_person_sync(issuer=ISSUER, claims=claims, rule=both)
    assert not OidcIdentity.objects.filter(subject=claims["sub"]).exists()
    user = oidc_person_sync(issuer=ISSUER, claims=claims, rule=missing)
    assert not OrbitCredential.objects.filter(user=user).exists()
    assert "does not exist" in caplog.text
    oidc_person_sync(issuer=ISSUER, claims=claims, rule=by_id)
    assert OrbitCredential.objects.get(user=user).namespace_id == first.id
