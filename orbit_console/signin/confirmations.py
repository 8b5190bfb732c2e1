"""Typing one's password again before deciding (``/signin/confirm``, docs/sign-in.md), with a
throttle of its own: the person's.

A confirmation is asked only of someone already signed in, so its failures say something about
that one session — a stolen one, or a person who forgot their password — never about the
address it comes from. Counted against the address (as django-axes counts sign-ins), ten wrong
confirmations locked everyone behind the same proxy or NAT out of signing in, company sign-in
included. Here they lock that person's confirmations, and nothing else: after
``AXES_FAILURE_LIMIT`` failures within ``AXES_COOLOFF_TIME``, for ``AXES_COOLOFF_TIME``; while
locked, no password is even checked. A right password forgets the failures.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from orbit_console.signin.models import StepUpLock

CONFIRMED, WRONG, LOCKED = "confirmed", "wrong", "locked"


@dataclass(frozen=True)
class Confirmation:
    outcome: str  # CONFIRMED, WRONG or LOCKED
    locked_until: datetime | None = None


def locked_until(user: User) -> datetime | None:
    """When the person's confirmations are locked until, if they are now."""
    lock = StepUpLock.objects.filter(user=user, locked_until__gt=timezone.now()).first()
    return lock.locked_until if lock is not None else None


def stepup_confirm(*, user: User, password: str) -> Confirmation:
    """Check the person's password for a confirmation, counting a failure against them alone."""
    if (until := locked_until(user)) is not None:
        return Confirmation(LOCKED, until)
    # Hashing is slow on purpose: outside the transaction, so that no row lock waits for it.
    if password and user.check_password(password):
        StepUpLock.objects.filter(user=user).delete()
        return Confirmation(CONFIRMED)
    return _failed(user)


@transaction.atomic
def _failed(user: User) -> Confirmation:
    now = timezone.now()
    StepUpLock.objects.get_or_create(user=user, defaults={"first_failed_at": now})
    lock = StepUpLock.objects.select_for_update().get(user=user)
    if lock.locked_until is not None and lock.locked_until > now:
        return Confirmation(LOCKED, lock.locked_until)
    if now - lock.first_failed_at > settings.AXES_COOLOFF_TIME or lock.locked_until is not None:
        lock.failures, lock.first_failed_at, lock.locked_until = 0, now, None
    lock.failures += 1
    if lock.failures >= settings.AXES_FAILURE_LIMIT:
        lock.failures, lock.locked_until = 0, now + settings.AXES_COOLOFF_TIME
    lock.save()
    if lock.locked_until is not None:
        return Confirmation(LOCKED, lock.locked_until)
    return Confirmation(WRONG)
