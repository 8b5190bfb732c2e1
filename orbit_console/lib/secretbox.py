"""Encryption at rest for secrets the console must be able to use again (Orbit tokens).

Fernet (AES-128-CBC + HMAC-SHA256) through ``cryptography``. Keys come from
``ORBIT_TOKEN_KEYS`` (comma-separated Fernet keys; the first encrypts, all decrypt, so keys can
be rotated). Without it — local use only — one key is derived from ``SECRET_KEY``.
"""

import base64
import hashlib
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class SecretUnreadable(Exception):
    """The ciphertext cannot be decrypted with any configured key."""


def _box() -> MultiFernet:
    """The box of the keys configured now. Made once per set of keys (and ``SECRET_KEY``, which
    the local key derives from), so that a box is never used under settings other than those it
    was made for: a suite's test that changed either once made every later token of its process
    unreadable to the servers it started."""
    return _box_of(tuple(settings.ORBIT_TOKEN_KEYS), settings.SECRET_KEY)


@cache
def _box_of(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    if not keys:
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"orbit-console token key"
        ).derive(secret_key.encode())
        keys = (base64.urlsafe_b64encode(derived).decode(),)
    return MultiFernet([Fernet(key) for key in keys])


def seal(secret: str) -> str:
    return _box().encrypt(secret.encode()).decode()


def unseal(ciphertext: str) -> str:
    try:
        return _box().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "the stored secret cannot be decrypted with the configured keys"
        ) from None


def _keys() -> list[str]:
    keys = list(settings.ORBIT_TOKEN_KEYS)
    return keys or ["(derived from SECRET_KEY)"]


def key_id(key: str) -> str:
    """How a key of ``ORBIT_TOKEN_KEYS`` is named in reports: the first 16 hex digits of its
    SHA-256 (never the key)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def key_ids() -> list[str]:
    """The configured keys' ids, the one that encrypts first."""
    return [key_id(key) for key in _keys()]


def opened_by(ciphertext: str) -> str | None:
    """The id of the first configured key that decrypts ``ciphertext`` (Fernet tokens do not
    name their key, so each is tried), or None when none does."""
    for key, fernet in zip(_keys(), _box()._fernets, strict=True):
        try:
            fernet.decrypt(ciphertext.encode())
        except InvalidToken:
            continue
        return key_id(key)
    return None


def reseal(ciphertext: str) -> str:
    """``ciphertext`` encrypted again under the first key (``SecretUnreadable`` when no
    configured key opens it)."""
    try:
        return _box().rotate(ciphertext.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "the stored secret cannot be decrypted with the configured keys"
        ) from None
