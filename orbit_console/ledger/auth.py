"""Bearer tokens of the recovery API (C1).

A token is 32 random bytes, URL-safe base64, prefixed ``orb_``. The ledger stores only its
SHA-256; a lookup hashes the presented token and finds the row by that hash.
"""

import hashlib
import re
import secrets
from datetime import datetime

from django.http import HttpRequest

from orbit_console.ledger.errors import Unauthenticated
from orbit_console.ledger.models import Credential

TOKEN_PREFIX = "orb_"  # noqa: S105 -- a prefix, not a secret
_BEARER = re.compile(r"Bearer ([A-Za-z0-9._~+/=-]{1,512})", re.IGNORECASE)


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(request: HttpRequest, *, now: datetime) -> Credential:
    """The credential of the request's bearer token, or ``Unauthenticated``.

    Missing, malformed, unknown, expired and revoked tokens and tokens of a disabled
    application all get the same answer, so that a caller learns nothing about other tokens.
    """
    match = _BEARER.fullmatch(request.headers.get("Authorization", ""))
    if match is None:
        raise Unauthenticated("a valid bearer token is required")
    credential = (
        Credential.objects.select_related("application")
        .filter(token_hash=hash_token(match.group(1)))
        .first()
    )
    if (
        credential is None
        or credential.revoked_at is not None
        or (credential.expires_at is not None and credential.expires_at <= now)
        or not credential.application.enabled
    ):
        raise Unauthenticated("a valid bearer token is required")
    return credential


def queue_scope(credential: Credential) -> frozenset[str] | None:
    """The queue ids the credential is limited to, or ``None`` for its whole namespace: read
    when asked, so that every call checks the current scope (C3)."""
    through = Credential.queues.through.objects
    ids = frozenset(through.filter(credential_id=credential.id).values_list("queue_id", flat=True))
    return ids or None
