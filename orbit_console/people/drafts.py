"""Drafts: what a person typed, kept across an ended session (docs/console.md, "Sessions and
drafts").

A form that carries typed text (a wizard's step, a supervisor's note, a batch's decision) may
arrive after the session it was typed in has ended. Its fields are kept here, for the person
whose session it was and the browser it came from, for ``CONSOLE_DRAFT_MINUTES``, and given back
once, on the page that shows the form, after that person has signed in again — by whatever means
they sign in. The request side (cookies, which forms keep drafts, where they are given back)
is the console's (``console/views/drafts.py``).

Drafts are not part of the console's record: keeping one decides nothing, and it is gone once
given back or expired, as a session is.
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from orbit_console.lib.secretbox import SecretUnreadable, seal, unseal
from orbit_console.people.models import MAX_PATH, Draft

# A review's result may be 256 KiB (RV3), pretty-printed larger: room for it and its reasons.
MAX_DRAFT_BYTES = 1024 * 1024
# A person's drafts, at most (their newest): a browser cannot fill the table for them.
MAX_DRAFTS_PER_PERSON = 10
# Never kept: the form's CSRF token belongs to the request that carried it.
NOT_KEPT = frozenset({"csrfmiddlewaretoken"})

Fields = list[tuple[str, str]]


@dataclass(frozen=True)
class Kept:
    posted_to: str
    fields: Fields


def browser_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _size(fields: Fields) -> int:
    return sum(len(name.encode()) + len(value.encode()) for name, value in fields)


def draft_keep(
    *, browser_key: str, owner: User, posted_to: str, resume_at: str, fields: Fields
) -> bool:
    """Keep ``fields`` for ``owner`` in the browser of ``browser_key``, replacing that browser's
    draft of the same page. ``False`` when there is nothing to keep or too much (then nothing
    is kept, and the sign-in page does not promise it)."""
    fields = [(name, value) for name, value in fields if name not in NOT_KEPT]
    too_long = max(len(posted_to), len(resume_at)) > MAX_PATH
    if not fields or too_long or _size(fields) > MAX_DRAFT_BYTES:
        return False
    now = timezone.now()
    values = {
        "owner": owner,
        "posted_to": posted_to,
        "fields_sealed": seal(json.dumps(fields)),
        "created_at": now,
        "expires_at": now + timedelta(minutes=settings.CONSOLE_DRAFT_MINUTES),
    }
    browser = browser_hash(browser_key)
    for _attempt in range(2):  # two tabs of one browser keeping the same page's draft at once
        try:
            with transaction.atomic():
                Draft.objects.filter(expires_at__lte=now).delete()
                Draft.objects.update_or_create(
                    browser=browser, resume_at=resume_at, defaults=values
                )
                older = Draft.objects.filter(owner=owner).order_by("-created_at", "-id")
                stale = list(older.values_list("id", flat=True)[MAX_DRAFTS_PER_PERSON:])
                if stale:
                    Draft.objects.filter(id__in=stale).delete()
            return True
        except IntegrityError:
            continue
    return False


def draft_take(*, browser_key: str, owner: User, resume_at: str) -> Kept | None:
    """The draft this browser kept for the page ``resume_at``, given back once to its owner.
    Found for anyone else, it is dropped: it is never shown to another person."""
    with transaction.atomic():
        draft = (
            Draft.objects.select_for_update()
            .filter(
                browser=browser_hash(browser_key),
                resume_at=resume_at,
                expires_at__gt=timezone.now(),
            )
            .first()
        )
        if draft is None:
            return None
        draft.delete()
    if draft.owner_id != owner.pk:  # type: ignore[attr-defined]
        return None
    try:
        pairs = json.loads(unseal(draft.fields_sealed))
    except SecretUnreadable:
        return None  # sealed under a key no longer configured: as if expired
    return Kept(draft.posted_to, [(str(name), str(value)) for name, value in pairs])


def draft_waiting(*, browser_key: str) -> bool:
    """Whether this browser has a draft kept (the sign-in page then says that nothing typed is
    lost; whose it is, it does not say)."""
    return Draft.objects.filter(
        browser=browser_hash(browser_key), expires_at__gt=timezone.now()
    ).exists()


def drafts_forget(*, browser_key: str, keep_owner: User | None = None) -> None:
    """Drop this browser's drafts (signing out), or those of anyone but ``keep_owner`` (another
    person signed in in this browser)."""
    drafts = Draft.objects.filter(browser=browser_hash(browser_key))
    if keep_owner is not None:
        drafts = drafts.exclude(owner=keep_owner)
    drafts.delete()
