"""The outbox: every notification is written in the transaction of the act that causes it.

The console's record tells this module of every entry it appends, inside the appending
transaction (``decisions.submissions.listen_to_records``); what needs telling becomes one
``Notification`` row with its recipients, so that the act and what it tells commit or roll back
together. What time alone causes (an outcome still unknown, an expiry coming, the audit's
state) is found by the worker's scans (``scans.py``), written with ``notify`` too; the unique
``key`` of each occurrence makes a second scan tell nothing twice.
"""

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from orbit_console.decisions.batches import outcome_counts, within_queues
from orbit_console.decisions.evidence import evidence_link
from orbit_console.decisions.models import Batch, ConsoleEvent, Proposal
from orbit_console.lib.live import publish_on_commit
from orbit_console.notifications import wakeup, webhooks
from orbit_console.notifications.models import Notification, Preference, Recipient
from orbit_console.people.accounts import accounts_of, is_company
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import AUDITOR, SUPERVISOR

NOTIFY_MESSAGE = "notifications.changed"


def person_group(user_id: int) -> str:
    """The channel-layer group of one person's notifications menu."""
    return f"orbit.notify.{user_id}"


def supervisors_of(
    namespace_id: str, *, queue_id: str = "", batch: Batch | None = None
) -> list[User]:
    """The supervisors who may approve in ``namespace_id`` and see what is told: their
    credential there covers the task's queue (``queue_id``) or every task of ``batch``
    (docs/access.md), as the approvals queue would show it to them."""
    credentials = OrbitCredential.objects.filter(
        namespace_id=namespace_id, user__is_active=True, user__groups__name=SUPERVISOR
    ).select_related("user")
    found: dict[int, User] = {}
    for credential in credentials:
        scope = credential.queue_scope
        if batch is not None:
            covered = within_queues(batch, scope)
        else:
            covered = not scope or (bool(queue_id) and queue_id in scope)
        if covered:
            found[credential.user_id] = credential.user
    return [found[key] for key in sorted(found)]


def auditors() -> list[User]:
    return list(User.objects.filter(is_active=True, groups__name=AUDITOR).distinct().order_by("id"))


def notify(
    *,
    kind: str,
    key: str,
    recipients: Iterable[User],
    namespace_id: str = "",
    task_id: str = "",
    proposal_id: str = "",
    batch_id: str = "",
    submission_id: str = "",
    facts: dict[str, Any] | None = None,
    path: str = "",
    now: datetime | None = None,
) -> Notification | None:
    """Write one notification and its recipients, part of the caller's transaction (its own
    when there is none). ``None`` when this occurrence (``key``) was told already."""
    now = now or timezone.now()
    people = {user.pk: user for user in recipients if user.is_active}
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                kind=kind,
                key=key[:120],
                namespace_id=namespace_id,
                task_id=task_id,
                proposal_id=proposal_id,
                batch_id=batch_id,
                submission_id=submission_id,
                facts=json.dumps(facts or {}, sort_keys=True),
                path=path,
                created_at=now,
            )
            preferences = {
                p.user_id: p for p in Preference.objects.filter(user_id__in=list(people))
            }
            Recipient.objects.bulk_create(
                _recipient(notification, user, preferences.get(user.pk), now)
                for user in people.values()
            )
            webhooks.enqueue(notification)
    except IntegrityError:
        if Notification.objects.filter(key=key[:120]).exists():
            return None
        raise
    for user_id in people:
        publish_on_commit(
            person_group(user_id),
            {"type": NOTIFY_MESSAGE, "notification_id": notification.id},
        )
    wakeup.wake_on_commit()
    return notification


def _recipient(
    notification: Notification, user: User, preference: Preference | None, now: datetime
) -> Recipient:
    language = (preference.language if preference else "") or settings.LANGUAGE_CODE
    wants_email = bool(user.email) and (
        preference is None or notification.kind not in preference.email_off_kinds
    )
    return Recipient(
        notification=notification,
        user=user,
        language=language,
        email_state="pending" if wants_email else "",
        email_next_at=now if wants_email else None,
    )


# --- What the console's record tells ---------------------------------------------------------


def on_record(event: ConsoleEvent) -> None:
    """The notification an entry of the console's record causes, if any."""
    if event.proposal_id and event.kind.startswith("proposal."):
        _on_proposal(event, event.proposal)  # type: ignore[arg-type]
    elif event.batch_id and event.kind.startswith("batch."):
        _on_batch(event, event.batch)  # type: ignore[arg-type]


def _evidence(namespace_id: str, reference: object) -> dict[str, str]:
    """The decision's evidence reference, and its link where the namespace's policy makes one
    (decisions/evidence.py): a reference, never the record it points to."""
    if not isinstance(reference, str) or not reference:
        return {}
    link = evidence_link(namespace_id, reference)
    return {"evidence": reference[:200], **({"evidence_link": link} if link else {})}


def _proposal_facts(proposal: Proposal, **more: Any) -> dict[str, Any]:
    try:
        reference = proposal.request.get("evidence_ref")
    except ValueError:
        reference = None
    return {
        "action": proposal.action,
        "state": proposal.state,
        "expires_at": proposal.expires_at.isoformat(),
        **_evidence(proposal.namespace_id, reference),
        **more,
    }


def _on_proposal(event: ConsoleEvent, proposal: Proposal) -> None:
    _tell_four_eyes(
        event,
        what="proposal",
        pk=proposal.id,
        author=proposal.proposed_by,
        supervisors=lambda: supervisors_of(proposal.namespace_id, queue_id=proposal.queue_id),
        enough_approvals=lambda: proposal.approvals.count() >= proposal.required_approvals,
        facts=lambda **more: _proposal_facts(proposal, **more),
        common={
            "namespace_id": proposal.namespace_id,
            "task_id": proposal.task_id,
            "proposal_id": proposal.id,
            "path": reverse("console:proposal", args=[proposal.id]),
            "now": event.created_at,
        },
    )


def _tell_four_eyes(
    event: ConsoleEvent,
    *,
    what: str,
    pk: object,
    author: User,
    supervisors: Callable[[], list[User]],
    enough_approvals: Callable[[], bool],
    facts: Callable[..., dict[str, Any]],
    common: dict[str, Any],
) -> None:
    """What a proposal or a batch (``what``) tells as it goes through four eyes: the
    supervisors (but its author) that it waits, its author that it was approved (once enough
    approvals are in), rejected (and why) or expired."""
    kind = event.kind.removeprefix(f"{what}.")
    if kind == "proposed":
        authors = accounts_of(author.pk)  # none of the author's accounts decides it
        notify(
            kind=f"{what}.waiting",
            key=f"{what}.waiting:{pk}",
            recipients=[u for u in supervisors() if u.pk not in authors],
            facts=facts(),
            **common,
        )
    elif kind == "approved":
        if not enough_approvals():
            return
        notify(
            kind=event.kind,
            key=f"{event.kind}:{pk}",
            recipients=[author],
            facts=facts(state="approved", **_by(event.actor)),
            **common,
        )
    elif kind in ("rejected", "expired"):
        reason = {"reason": event.note} if kind == "rejected" else {}
        notify(
            kind=event.kind,
            key=f"{event.kind}:{pk}",
            recipients=[author],
            facts=facts(**_by(event.actor), **reason),
            **common,
        )


def _batch_facts(batch: Batch, **more: Any) -> dict[str, Any]:
    expires_at = getattr(batch, "expires_at", None)
    return {
        "action": batch.action,
        "state": batch.state,
        "items": batch.items.count(),
        **_evidence(batch.namespace_id, batch.decided.get("evidence_ref")),
        **({"expires_at": expires_at.isoformat()} if expires_at else {}),
        **more,
    }


def _on_batch(event: ConsoleEvent, batch: Batch) -> None:
    common: dict[str, Any] = {
        "namespace_id": batch.namespace_id,
        "batch_id": batch.id,
        "path": reverse("console:batch", args=[batch.id]),
        "now": event.created_at,
    }
    author = batch.created_by
    if event.kind != "batch.finished":
        _tell_four_eyes(
            event,
            what="batch",
            pk=batch.id,
            author=author,
            supervisors=lambda: supervisors_of(batch.namespace_id, batch=batch),
            enough_approvals=lambda: batch.approvals.count() >= batch.required_approvals,
            facts=lambda **more: _batch_facts(batch, **more),
            common=common,
        )
    else:
        batch.refresh_from_db(fields=["state", "sent_as", "decided_by"])
        counts = {key or "open": n for key, n in outcome_counts(batch).items()}
        people = [author, *(u for u in (batch.decided_by, batch.sent_as) if u is not None)]
        notify(
            kind="batch.finished",
            key=f"batch.finished:{batch.id}",
            recipients=people,
            facts=_batch_facts(batch, counts=counts),
            **common,
        )


def _by(user: User | None) -> dict[str, Any]:
    """Who did it, and whether company sign-in made their account (marked where it is told)."""
    return {"by": _name(user), **({"by_company": True} if is_company(user) else {})}


def _name(user: User | None) -> str:
    return user.get_username() if user is not None else ""
