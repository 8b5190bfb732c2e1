"""The keys that sign audit checkpoints (Ed25519).

``ORBIT_AUDIT_SIGNING_KEYS`` (comma-separated; each a 32-byte Ed25519 private key, URL-safe
base64: ``python -c 'import secrets; print(secrets.token_urlsafe(32))'``): the first signs new
checkpoints, all of them verify. ``ORBIT_AUDIT_VERIFY_KEYS``: public keys (``manage.py audit
public-key`` prints them) that verify only, so that whoever checks the checkpoints, or a key
retired from signing, need not hold a private key. A key rotates by putting the new one first
and moving the old one's public key to the verify keys. Each checkpoint names its key by id
(the first 16 hex digits of the public key's SHA-256). Without either setting (local use only)
one signing key is generated into the local state directory, next to the secret key; in
production only the checkpoint job needs a signing key.
"""

import base64
import hashlib
from functools import cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

KEY_BYTES = 32


class UnknownSigningKey(Exception):
    """A checkpoint names a signing key that is not among the configured ones."""


@cache
def _signing_keys() -> list[Ed25519PrivateKey]:
    return [
        Ed25519PrivateKey.from_private_bytes(_decode(text, "ORBIT_AUDIT_SIGNING_KEYS"))
        for text in settings.ORBIT_AUDIT_SIGNING_KEYS
    ]


@cache
def _verify_keys() -> dict[str, Ed25519PublicKey]:
    public = [key.public_key() for key in _signing_keys()] + [
        Ed25519PublicKey.from_public_bytes(_decode(text, "ORBIT_AUDIT_VERIFY_KEYS"))
        for text in settings.ORBIT_AUDIT_VERIFY_KEYS
    ]
    return {key_id(key): key for key in public}


def check() -> None:
    """Decode every configured key; ``ImproperlyConfigured`` names the first bad one."""
    _signing_keys()
    _verify_keys()


def _decode(text: str, setting: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise ImproperlyConfigured(f"{setting}: a key is not URL-safe base64") from None
    if len(raw) != KEY_BYTES:
        raise ImproperlyConfigured(f"{setting}: each key is {KEY_BYTES} bytes")
    return raw


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public: Ed25519PublicKey) -> str:
    return hashlib.sha256(_raw(public)).hexdigest()[:16]


def public_keys() -> list[str]:
    """The public keys of the signing keys, as ``ORBIT_AUDIT_VERIFY_KEYS`` takes them."""
    return [
        base64.urlsafe_b64encode(_raw(key.public_key())).decode().rstrip("=")
        for key in _signing_keys()
    ]


def can_sign() -> bool:
    return bool(_signing_keys())


def can_verify() -> bool:
    """Whether this process holds any key that checks signatures (public or private)."""
    return bool(_verify_keys())


def sign(message: bytes) -> tuple[str, str]:
    """The current signing key's id and its signature of ``message`` (URL-safe base64)."""
    keys = _signing_keys()
    if not keys:
        raise ImproperlyConfigured("ORBIT_AUDIT_SIGNING_KEYS: no signing key is configured")
    signature = base64.urlsafe_b64encode(keys[0].sign(message)).decode()
    return key_id(keys[0].public_key()), signature


def verifies(key_id_: str, message: bytes, signature: str) -> bool:
    """Whether ``signature`` is ``key_id_``'s signature of ``message``.
    ``UnknownSigningKey`` when that key is not configured."""
    public = _verify_keys().get(key_id_)
    if public is None:
        raise UnknownSigningKey(key_id_)
    try:
        public.verify(base64.urlsafe_b64decode(signature), message)
    except (InvalidSignature, ValueError):
        return False
    return True


def key_ids() -> tuple[list[str], list[str]]:
    """The ids of the keys that sign (the first signs new checkpoints) and of those that only
    verify (``ORBIT_AUDIT_VERIFY_KEYS`` that are not also signing keys)."""
    signing = [key_id(key.public_key()) for key in _signing_keys()]
    return signing, [name for name in _verify_keys() if name not in signing]
