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
from orbit_console.ledger.tables import APPLICATIONS, CREDENTIALS

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
    One query reads the credential, its application's switch and its current queue scope (C3),
    which ``queue_scope`` then answers for the rest of the request.
    """
    return authenticate_header(request.headers.get("Authorization", ""), now=now)


def authenticate_header(authorization: str, *, now: datetime) -> Credential:
    """``authenticate`` for the value of an ``Authorization`` header (a WebSocket handshake's,
    which is no ``HttpRequest``)."""
    match = _BEARER.fullmatch(authorization)
    if match is None:
        raise Unauthenticated("a valid bearer token is required")
    credential, enabled = _credential_of(hash_token(match.group(1)))
    if (
        credential is None
        or credential.revoked_at is not None
        or (credential.expires_at is not None and credential.expires_at <= now)
        or not enabled
    ):
        raise Unauthenticated("a valid bearer token is required")
    return credential


def _credential_of(token_hash: str) -> tuple[Credential | None, bool]:
    """The credential with this token hash and whether its application is enabled; its queue
    scope is kept on it. One row per queue of the scope (one with NULL for none)."""
    connection = CREDENTIALS.connection
    scope = connection.ops.quote_name(Credential.queues.through._meta.db_table)
    sql = (
        f"SELECT {CREDENTIALS.select_columns('c')}, a.enabled, cq.queue_id "  # noqa: S608 -- the models' own names
        f"FROM {CREDENTIALS.table} c JOIN {APPLICATIONS.table} a ON a.id = c.application_id "
        f"LEFT JOIN {scope} cq ON cq.credential_id = c.id WHERE c.token_hash = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [token_hash])
        rows = cursor.fetchall()
    if not rows:
        return None, False
    width = len(CREDENTIALS.fields)
    credential = CREDENTIALS.from_row(rows[0][:width])
    queues = frozenset(row[width + 1] for row in rows if row[width + 1] is not None)
    credential._queue_scope = queues or None  # type: ignore[attr-defined]
    return credential, bool(rows[0][width])


def queue_scope(credential: Credential) -> frozenset[str] | None:
    """The queue ids the credential is limited to, or ``None`` for its whole namespace: read
    with the credential when the request authenticated (or now), so that every call checks
    the current scope (C3)."""
    try:
        return credential._queue_scope  # type: ignore[attr-defined,no-any-return]
    except AttributeError:
        pass
    through = Credential.queues.through.objects
    ids = frozenset(through.filter(credential_id=credential.id).values_list("queue_id", flat=True))
    return ids or None
