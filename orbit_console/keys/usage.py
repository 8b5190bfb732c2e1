"""What still needs each key the console holds (``manage.py keys retire-check``), and sealing
stored secrets again under the current key (``manage.py keys reseal``): the last steps of a
rotation (docs/runbooks.md, "Rotating credentials").

The four kinds of key, and what can make an old one necessary:

- ``ORBIT_TOKEN_KEYS`` (``lib/secretbox.py``): every stored ciphertext — people's Orbit tokens,
  the feed's token, drafts. ``reseal`` encrypts them all under the first key; then an old key
  is needed by nothing and can go.
- ``ORBIT_AUDIT_KEYS`` (``lib/auditkeys.py``): every audit record (the API's and the
  console's) is linked under one key and verifies only under it. Records are append-only and
  their links are the evidence, so they are never re-linked: an audit key stays configured
  (second or later: verifying only) for as long as a record it linked exists.
- Checkpoint signing keys (``audit/signing.py``): checkpoints and signed verification results
  name their key. The private key can leave ``ORBIT_AUDIT_SIGNING_KEYS`` as soon as another is
  first; its public key stays in ``ORBIT_AUDIT_VERIFY_KEYS`` while anything it signed exists.
- ``SECRET_KEY`` and ``SECRET_KEY_FALLBACKS``: live sessions (their data is signed, and their
  sign-in hash is an HMAC under the key). A page request re-signs a session under the current
  key; a session nobody has used since is still signed under the old one, and dropping that
  fallback signs its person out. Such sessions end by ``SESSION_COOKIE_AGE`` at the latest.

Each key gets an ``action``: what its operator should do now (``RESEAL``, ``REMOVE``,
``RESTORE``, ``UNSIGN``), or nothing — a current key, an old one kept on purpose for as long as
what it linked or signed exists, an old ``SECRET_KEY`` whose sessions move on by themselves.
``retire-check`` exits 1 exactly when some key has one, so that a script can tell "act now"
from "nothing to do" (issue 41: an old audit key, kept for ever by design, made it exit 1 for
ever).
"""

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.models import Session
from django.core import signing as django_signing
from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from orbit_console.audit import signing
from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.decisions.models import ConsoleEvent
from orbit_console.feed.models import Source
from orbit_console.ledger.models import OperationAudit
from orbit_console.lib import auditkeys, secretbox
from orbit_console.ops.sessions import SessionStore
from orbit_console.people.models import Draft, OrbitCredential

# Every column that holds a ciphertext of ``lib/secretbox.py``: (what, model, field).
SEALED = (
    ("Orbit tokens of people", OrbitCredential, "token_ciphertext"),
    ("the feed's Orbit token", Source, "token_ciphertext"),
    ("drafts", Draft, "fields_sealed"),
)
UNREADABLE = "(no configured key)"

# What a key asks of its operator now (``KeyUse.action``).
RESEAL = "reseal"  # run ``manage.py keys reseal``, then remove it
REMOVE = "remove"  # nothing needs it: remove it from its setting
RESTORE = "restore"  # something needs it and it is not configured: put it back
UNSIGN = "unsign"  # its private key can leave the signing keys; its public key stays


@dataclass
class KeyUse:
    """One key of one kind: whether it is configured and what still needs it."""

    kind: str  # the setting
    key_id: str
    role: str  # "current", "old", "not configured"
    needed_by: dict[str, int] = field(default_factory=dict)
    advice: str = ""
    action: str = ""  # RESEAL, REMOVE, RESTORE, UNSIGN, or "" (nothing to do now)

    @property
    def needed(self) -> bool:
        return any(self.needed_by.values())

    @property
    def retirable(self) -> bool:
        """An old key that nothing needs any more."""
        return self.role == "old" and not self.needed


def _role(key_id: str, configured: list[str]) -> str:
    if key_id not in configured:
        return "not configured"
    return "current" if key_id == configured[0] else "old"


def token_keys() -> list[KeyUse]:
    configured = secretbox.key_ids()
    counts: dict[str, Counter[str]] = {name: Counter() for name in configured}
    for what, model, column in SEALED:
        for ciphertext in model.objects.values_list(column, flat=True).iterator():
            opened = secretbox.opened_by(ciphertext) or UNREADABLE
            counts.setdefault(opened, Counter())[what] += 1
    uses = []
    for name, needed in counts.items():
        role = "not configured" if name == UNREADABLE else _role(name, configured)
        use = KeyUse("ORBIT_TOKEN_KEYS", name, role, dict(needed))
        if use.role == "old":
            use.advice = (
                "run `manage.py keys reseal`, then remove it" if use.needed else "can be removed"
            )
            use.action = RESEAL if use.needed else REMOVE
        elif use.role == "not configured":
            use.advice = "these ciphertexts open with no configured key: put the key back"
            use.action = RESTORE
        uses.append(use)
    return uses


def audit_keys() -> list[KeyUse]:
    configured = auditkeys.key_ids()
    counts: dict[str, Counter[str]] = {name: Counter() for name in configured}
    for what, model in (("API audit records", OperationAudit), ("console events", ConsoleEvent)):
        for row in model.objects.values("key_id").annotate(n=Count("pk")):
            counts.setdefault(row["key_id"], Counter())[what] += row["n"]
    uses = []
    for name, needed in counts.items():
        use = KeyUse("ORBIT_AUDIT_KEYS", name or "(unkeyed)", _role(name, configured))
        use.needed_by = dict(needed)
        if use.role == "old":
            use.advice = (
                "keep it (second or later): the records it linked verify only with it and "
                "are never re-linked"
                if use.needed
                else "can be removed"
            )
            use.action = "" if use.needed else REMOVE
        elif use.role == "not configured" and use.needed:
            use.advice = "records linked with it cannot be verified: put the key back"
            use.action = RESTORE
        uses.append(use)
    return uses


def signing_keys() -> list[KeyUse]:
    signers, verifiers = signing.key_ids()
    configured = [*signers, *verifiers]
    counts: dict[str, Counter[str]] = {name: Counter() for name in configured}
    signed = (("checkpoints", WrittenCheckpoint), ("verification results", ChainVerification))
    for what, model in signed:
        for row in model.objects.exclude(key_id="").values("key_id").annotate(n=Count("pk")):
            counts.setdefault(row["key_id"], Counter())[what] += row["n"]
    uses = []
    for name, needed in counts.items():
        role = _role(name, signers) if name in signers else _role(name, configured)
        if name in verifiers:
            role = "old"
        use = KeyUse("ORBIT_AUDIT_SIGNING_KEYS / ORBIT_AUDIT_VERIFY_KEYS", name, role)
        use.needed_by = dict(needed)
        if name in signers and role == "old":
            use.advice = (
                "its private key can leave ORBIT_AUDIT_SIGNING_KEYS now; keep its public key "
                "in ORBIT_AUDIT_VERIFY_KEYS (`manage.py audit public-key`)"
                if use.needed
                else "can be removed"
            )
            use.action = UNSIGN if use.needed else REMOVE
        elif role == "old":
            use.advice = (
                "keep its public key in ORBIT_AUDIT_VERIFY_KEYS: what it signed verifies only "
                "with it"
                if use.needed
                else "can be removed"
            )
            use.action = "" if use.needed else REMOVE
        elif role == "not configured" and use.needed:
            use.advice = "what it signed cannot be verified: add its public key back"
            use.action = RESTORE
        uses.append(use)
    return uses


def secret_key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def secret_keys() -> list[KeyUse]:
    """Which key each live session still needs: the one its data is signed with, and the one
    its sign-in hash was made with (a session that needs a fallback for either is counted
    against that fallback)."""
    keys = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    configured = [secret_key_id(key) for key in keys]
    counts: dict[str, Counter[str]] = {name: Counter() for name in configured}
    store = SessionStore()
    live = Session.objects.filter(expire_date__gt=timezone.now())
    for session_data in live.values_list("session_data", flat=True).iterator():
        needs = _session_needs(session_data, keys, store)
        counts.setdefault(needs, Counter())["live sessions"] += 1
    uses = []
    for name, needed in counts.items():
        role = "not configured" if name == UNREADABLE else _role(name, configured)
        use = KeyUse("SECRET_KEY / SECRET_KEY_FALLBACKS", name, role, dict(needed))
        if use.role == "old":
            use.advice = (
                "removing it signs these people out; their sessions move to the current key "
                "with their next page, or end by SESSION_COOKIE_AGE"
                if use.needed
                else "can be removed from SECRET_KEY_FALLBACKS"
            )
            use.action = "" if use.needed else REMOVE  # the sessions move on by themselves
        uses.append(use)
    return uses


def _session_needs(session_data: str, keys: list[str], store: SessionStore) -> str:
    """The id of the oldest key this session needs, or ``UNREADABLE``."""
    data = None
    data_key = None
    for index, key in enumerate(keys):
        try:
            data = django_signing.loads(
                session_data, key=key, salt=store.key_salt, serializer=store.serializer
            )
        except django_signing.BadSignature:
            continue
        data_key = index
        break
    if data is None or data_key is None:
        return UNREADABLE
    needed = data_key
    session_hash = data.get(HASH_SESSION_KEY)
    user = get_user_model().objects.filter(pk=data.get(SESSION_KEY)).first()
    if session_hash and user is not None:
        for index, key in enumerate(keys):
            made = user._get_session_auth_hash(secret=key)  # type: ignore[attr-defined]
            if constant_time_compare(session_hash, made):
                needed = max(needed, index)
                break
    return secret_key_id(keys[needed])


def retire_report() -> list[KeyUse]:
    return [*secret_keys(), *token_keys(), *audit_keys(), *signing_keys()]


def reseal_all(*, batch: int = 200) -> dict[str, int]:
    """Encrypt every stored ciphertext again under the first ``ORBIT_TOKEN_KEYS`` key, a batch
    of rows per transaction (each row locked while it is rewritten, so that a token stored at
    the same moment is not overwritten with the old one). How many rows of each kind changed,
    and (under ``UNREADABLE``) how many no configured key opens: those are left as they are."""
    current = secretbox.key_ids()[0]
    changed: dict[str, int] = {}
    unreadable = 0
    for what, model, column in SEALED:
        changed[what] = 0
        last = None
        while True:
            with transaction.atomic():
                rows = model.objects.select_for_update().order_by("pk")
                if last is not None:
                    rows = rows.filter(pk__gt=last)
                chunk = list(rows.values_list("pk", column)[:batch])
                for pk, ciphertext in chunk:
                    opened = secretbox.opened_by(ciphertext)
                    if opened is None:
                        unreadable += 1  # no configured key opens it: left as it is, counted
                        continue
                    if opened == current:
                        continue
                    model.objects.filter(pk=pk).update(**{column: secretbox.reseal(ciphertext)})
                    changed[what] += 1
            if len(chunk) < batch:
                break
            last = chunk[-1][0]
    changed[UNREADABLE] = unreadable
    return changed
