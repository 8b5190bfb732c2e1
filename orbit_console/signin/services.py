"""Writes of company sign-in: provisioning a person and keeping their roles and credentials in
step with their groups (docs/sign-in.md)."""

import re
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from orbit_console.people.credentials import credential_drop, mint_embedded, person_roles_set
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import role_permissions
from orbit_console.signin.models import OidcIdentity
from orbit_console.signin.rules import Rule

_NAME = re.compile(r"[^\w.@+-]")


def _free_username(wanted: str) -> str:
    base = _NAME.sub("-", wanted)[:140] or "person"
    name, n = base, 1
    while User.objects.filter(username=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _namespace_ids(named: tuple[str, ...]) -> list[str]:
    """The embedded ledger's namespaces a rule names (by id or by name); unknown ones are
    skipped (a rule may be written before its namespace exists)."""
    from orbit_console.ledger.models import Namespace

    found: list[str] = []
    for name in named:
        ids = list(Namespace.objects.filter(id=name).values_list("id", flat=True)) or list(
            Namespace.objects.filter(name=name).values_list("id", flat=True)[:1]
        )
        found.extend(ids)
    return list(dict.fromkeys(found))


@transaction.atomic
def oidc_person_sync(*, issuer: str, claims: dict[str, Any], rule: Rule) -> User:
    """The person the provider ``issuer`` knows by ``claims["sub"]``, made at their first
    sign-in, with exactly the roles of ``rule``; on the embedded API, with a credential in
    each of its namespaces for those roles (minted again when the roles changed) and none in
    any other. Never joins a local account of the same name: a company sign-in is its own
    person."""
    subject = str(claims["sub"])
    identity = (
        OidcIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        wanted = str(claims.get("preferred_username") or claims.get("email") or subject)
        user = User.objects.create_user(_free_username(wanted), email=claims.get("email") or "")
        user.set_unusable_password()
        user.save()
        identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    user = identity.user
    email = claims.get("email")
    if isinstance(email, str) and email != user.email:
        user.email = email
        user.save(update_fields=["email"])
    identity.signed_in_at = timezone.now()
    identity.save(update_fields=["signed_in_at"])
    person_roles_set(user=user, roles=rule.roles)
    if settings.ORBIT_API_EMBEDDED:
        _credentials_sync(
            user=user, roles=rule.roles, namespace_ids=_namespace_ids(rule.namespaces)
        )
    return user


def _credentials_sync(*, user: User, roles: frozenset[str], namespace_ids: list[str]) -> None:
    wanted = role_permissions(roles)
    held = {c.namespace_id: c for c in OrbitCredential.objects.filter(user=user)}
    for namespace_id in held:
        if namespace_id not in namespace_ids:
            credential_drop(user=user, namespace_id=namespace_id)
    for namespace_id in namespace_ids:
        current = held.get(namespace_id)
        if current is None or frozenset(current.permissions.split()) != wanted:
            mint_embedded(user=user, roles=roles, namespace_id=namespace_id)


@transaction.atomic
def oidc_person_revoke(*, issuer: str, subject: str) -> User | None:
    """The provider no longer admits the person ``subject`` (no rule matches their groups):
    their roles and credentials go (revoked in the embedded ledger). The account stays, for
    the audit's names; it can do nothing."""
    identity = (
        OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    )
    if identity is None:
        return None
    person_roles_set(user=identity.user, roles=frozenset())
    for namespace_id in OrbitCredential.objects.filter(user=identity.user).values_list(
        "namespace_id", flat=True
    ):
        credential_drop(user=identity.user, namespace_id=namespace_id)
    return identity.user
