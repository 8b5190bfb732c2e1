"""The keys that link the audit chains (issue 13): each record's ``entry_hash`` is an
HMAC-SHA256 of its canonical content under a key that lives outside the database, so that
someone who can write the rows but does not hold the key cannot forge a chain that verifies.

Keys come from ``ORBIT_AUDIT_KEYS`` (comma-separated; each 32 or more random bytes, URL-safe
base64: ``python -c 'import secrets; print(secrets.token_urlsafe(32))'``). The first links new
records; all of them verify older ones, so a key is rotated by putting the new one first and
keeping the old one for as long as records linked with it exist. Each record stores the id of
its key (the first 16 hex digits of the key's SHA-256), never the key. Without
``ORBIT_AUDIT_KEYS`` (local use only; production refuses to start without it) one key is
derived from ``SECRET_KEY``, which lives in the local state directory, not in the database.
"""

import base64
import hashlib
import hmac
from functools import cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

MIN_KEY_BYTES = 32


class UnknownKey(Exception):
    """A record names a key that is not among the configured ones."""


@cache
def _keyring() -> tuple[str, dict[str, bytes]]:
    encoded = list(settings.ORBIT_AUDIT_KEYS)
    if encoded:
        keys = [_decode(text) for text in encoded]
    else:
        keys = [
            HKDF(
                algorithm=hashes.SHA256(), length=32, salt=None, info=b"orbit-console audit key"
            ).derive(settings.SECRET_KEY.encode())
        ]
    ring = {key_id(key): key for key in keys}
    return key_id(keys[0]), ring


def _decode(text: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise ImproperlyConfigured("ORBIT_AUDIT_KEYS: a key is not URL-safe base64") from None
    if len(key) < MIN_KEY_BYTES:
        raise ImproperlyConfigured(f"ORBIT_AUDIT_KEYS: each key needs {MIN_KEY_BYTES} bytes")
    return key


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def current_key_id() -> str:
    return _keyring()[0]


def link(key_id_: str, message: bytes) -> str:
    """The HMAC-SHA256 of ``message`` under the key ``key_id_`` (hex)."""
    key = _keyring()[1].get(key_id_)
    if key is None:
        raise UnknownKey(key_id_)
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def key_ids() -> list[str]:
    """The configured keys' ids, the one that links new records first."""
    current, ring = _keyring()
    return [current, *(name for name in ring if name != current)]
