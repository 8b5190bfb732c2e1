"""Giving people their roles and Orbit credentials (``manage.py console user``, ``manage.py
demo``, and the tests' and benchmarks' people).

With the embedded recovery API the console mints a credential in the ledger with the permissions
of the person's roles, acting as an administrator of the embedded ledger would. With an external
Orbit, the token issued there is stored instead. Either way the token is encrypted at rest. A
person holds at most one credential per namespace: a new one for a namespace replaces the one
held there, and those of other namespaces stay.
"""

from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group, User
from django.db import transaction

from orbit_console.client import CredentialInfo, OrbitError, OutcomeUnknown
from orbit_console.lib.secretbox import seal, unseal
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import role_permissions, token_client


def person_roles_set(*, user: User, roles: frozenset[str]) -> None:
    """Give ``user`` exactly ``roles``: the groups ``operator``, ``supervisor``, ``auditor``."""
    user.groups.set([Group.objects.get_or_create(name=role)[0] for role in roles])


@transaction.atomic
def person_enroll(
    *, user: User, roles: frozenset[str], namespace_id: str, queue_ids: frozenset[str] = frozenset()
) -> OrbitCredential:
    """Give ``user`` exactly ``roles`` and a credential of the embedded API for them, limited
    to ``queue_ids`` when given (else the whole namespace)."""
    person_roles_set(user=user, roles=roles)
    return mint_embedded(user=user, roles=roles, namespace_id=namespace_id, queue_ids=queue_ids)


class TokenRefused(Exception):
    """The recovery API did not accept a token to store, or did not answer: nothing stored."""


def check_external_token(token: str) -> CredentialInfo:
    """What the recovery API says a token issued by Orbit covers (its actor, namespace, queues
    and permissions: ``GET /v1/credential``); ``TokenRefused`` when it refuses the token or
    does not answer. Ask before opening a transaction: it is a call over the network."""
    return async_to_sync(_credential_info)(token)


def store_external_token(*, user: User, token: str, info: CredentialInfo) -> OrbitCredential:
    """Store a token issued by Orbit with the scope ``check_external_token`` learnt, in place
    of the one the person held in that namespace."""
    credential, _ = OrbitCredential.objects.update_or_create(
        user=user,
        namespace_id=info.namespace_id,
        defaults={
            "token_ciphertext": seal(token),
            "actor_id": info.actor_id,
            "permissions": " ".join(sorted(info.permissions)),
            "queue_ids": " ".join(sorted(info.queue_ids)),
            "namespace_name": info.namespace_name,
        },
    )
    return credential


async def _credential_info(token: str) -> CredentialInfo:
    try:
        async with token_client(token) as orbit:
            return await orbit.get_credential()
    except OrbitError as error:
        raise TokenRefused(f"the recovery API refused the token: {error.code}") from None
    except OutcomeUnknown:
        raise TokenRefused("the recovery API did not answer; the token was not stored") from None


def mint_embedded(
    *, user: User, roles: frozenset[str], namespace_id: str, queue_ids: frozenset[str] = frozenset()
) -> OrbitCredential:
    """Issue a credential in the embedded ledger for the person's roles, revoking the one they
    held in that namespace before, and store it."""
    from orbit_console.ledger.lifecycle import credential_issue
    from orbit_console.ledger.models import RECOVERY_PERMISSIONS, Namespace, Queue

    namespace = Namespace.objects.get(id=namespace_id)
    queues = list(Queue.objects.filter(namespace=namespace, id__in=queue_ids))
    if len(queues) != len(queue_ids):
        raise ValueError("every queue must be a queue of the namespace")
    previous = OrbitCredential.objects.filter(user=user, namespace_id=namespace.id).first()
    if previous is not None:
        _revoke_embedded(previous)
    permissions = sorted(role_permissions(roles))
    issued, token = credential_issue(
        namespace=namespace,
        actor_name=user.get_username(),
        permissions=permissions,
        recovery_access=bool(set(permissions) & RECOVERY_PERMISSIONS),
        queues=queues,
    )
    credential, _ = OrbitCredential.objects.update_or_create(
        user=user,
        namespace_id=namespace.id,
        defaults={
            "token_ciphertext": seal(token),
            "actor_id": issued.actor_id,
            "permissions": issued.permissions,
            "queue_ids": " ".join(sorted(queue_ids)),
            "namespace_name": namespace.name,
        },
    )
    return credential


@transaction.atomic
def credential_drop(*, user: User, namespace_id: str) -> bool:
    """Take away the person's credential in ``namespace_id`` (revoked too, when the embedded
    ledger issued it). Whether they held one."""
    credential = OrbitCredential.objects.filter(user=user, namespace_id=namespace_id).first()
    if credential is None:
        return False
    _revoke_embedded(credential)
    credential.delete()
    return True


def _revoke_embedded(credential: OrbitCredential) -> None:
    """Revoke ``credential`` in the embedded ledger, if that is where it was issued."""
    from orbit_console.ledger.auth import hash_token
    from orbit_console.ledger.lifecycle import credential_revoke
    from orbit_console.ledger.models import Credential

    issued = Credential.objects.filter(
        token_hash=hash_token(unseal(credential.token_ciphertext))
    ).first()
    if issued is not None:
        credential_revoke(credential=issued)
