"""Durable submissions: never lose or duplicate a recovery decision (C9, I1, I6).

``submission_create`` stores the request — key, expected revision, exact body — before the first
send, in the same transaction as its console event. ``submission_send`` posts exactly that
request and records the answer:

- a receipt (first or deduplicated) → ``succeeded``;
- 429 → ``retry_later``, with the moment to try again;
- a timeout, a lost connection or a 5xx → ``unknown``: the identical request is sent again, by
  the person (the resend button) or by the reconciler, until a definite answer comes;
- any other answer → ``rejected``, with what it means.

The first definite answer wins: a late answer to an earlier send never overwrites it. Sends go
out with the credential of ``sent_as`` (the person who decided, or the approving supervisor),
so that the platform's audit names them whoever presses "resend".
"""

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from orbit_console.client import OrbitError, OutcomeUnknown, RetryReceipt, ReviewReceipt, Task
from orbit_console.decisions import chain
from orbit_console.decisions.models import (
    Batch,
    ConsoleEvent,
    Proposal,
    Submission,
    SubmissionAction,
    SubmissionState,
)
from orbit_console.lib import notes
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import (
    BATCH_MESSAGE,
    CONSOLE_EVENT_MESSAGE,
    FOLLOWUP_MESSAGE,
    PROPOSAL_MESSAGE,
    person_group,
    publish_on_commit,
    task_group,
)
from orbit_console.lib.rows import Rows
from orbit_console.lib.secretbox import unseal
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client

logger = logging.getLogger("orbit.console.submissions")


@dataclass(frozen=True)
class Created:
    submission: Submission
    created: bool  # False: this decision had already been submitted (double click, two tabs)


def decision_slot(task_id: str, revision: str) -> str:
    return f"{task_id}@{revision}"


@dataclass(frozen=True)
class DecidedOn:
    """What a decision was made on, as its decider saw the task when they started it, kept
    with the decision for the insight figures (docs/insight.md): the task's handler and its
    last attempt's error code (``lib/errorcodes.py``), since when it had waited for a person
    (``waiting_since``), and when the decision was started — the wizard opened, a batch
    selected. What the console did not see is left empty."""

    handler: str = ""
    last_error_code: str = ""
    waiting_since: datetime | None = None
    started_at: datetime | None = None


def waiting_since(task: Task) -> datetime | None:
    """Since when ``task`` has waited for a person, as the task itself says: a task in
    NEEDS_REVIEW since it was parked (its last update: nothing else changes a parked task), a
    FAILED or CANCELLED one since it ended. ``None`` for other states, or when the API does
    not say (an external Orbit may omit the times)."""
    if task.state == "NEEDS_REVIEW":
        return task.updated_at
    if task.state in ("FAILED", "CANCELLED"):
        return task.completed_at or task.updated_at
    return None


def submission_create(
    *,
    action: str,
    task_id: str,
    expected_revision: str,
    body: str,
    created_by: User,
    queue_id: str = "",
    namespace_id: str | None = None,
    sent_as: User | None = None,
    proposal: Proposal | None = None,
    batch: Batch | None = None,
    note: str = "",
    decided_on: DecidedOn | None = None,
) -> Created:
    """Store a decision before it is sent. One decision per task revision: a second one for
    the same revision returns the first instead (``created=False``). An approved proposal's
    submission reuses the key the proposal stored when it was made, and what it was made on.

    ``namespace_id`` is the task's; by default the proposal's, else the namespace of the
    creator's credential."""
    if namespace_id is None:
        namespace_id = proposal.namespace_id if proposal else credential_namespace(created_by)
    if decided_on is None and proposal is not None:
        decided_on = DecidedOn(
            handler=proposal.handler,
            last_error_code=proposal.last_error_code,
            waiting_since=proposal.waiting_since,
            started_at=proposal.started_at,
        )
    seen = decided_on or DecidedOn()
    now = timezone.now()
    submission_id = new_id()
    slot = decision_slot(task_id, expected_revision)
    key = proposal.idempotency_key if proposal is not None else f"orbit-console-{submission_id}"
    try:
        with transaction.atomic():
            submission = Submission.objects.create(
                id=submission_id,
                action=action,
                task_id=task_id,
                queue_id=queue_id,
                namespace_id=namespace_id,
                expected_revision=expected_revision,
                idempotency_key=key,
                body=body,
                created_by=created_by,
                sent_as=sent_as or created_by,
                proposal=proposal,
                created_at=now,
                decision_slot=slot,
                handler=seen.handler,
                last_error_code=seen.last_error_code,
                waiting_since=seen.waiting_since,
                started_at=seen.started_at,
                next_attempt_at=now + timedelta(seconds=settings.CONSOLE_PENDING_GRACE_SECONDS),
                reconcile_deadline=now + timedelta(hours=settings.CONSOLE_RECONCILE_DEADLINE_HOURS),
            )
            record_event(
                "submission.stored",
                submission=submission,
                batch=batch,
                actor=created_by,
                note=note,
                now=now,
            )
    except IntegrityError:
        existing = Submission.objects.filter(decision_slot=slot).first()
        if existing is None:  # the other one was rejected meanwhile: its slot is free again
            raise
        return Created(existing, created=False)
    return Created(submission, created=True)


@dataclass(frozen=True)
class Authenticated:
    """How and when a decider last authenticated before deciding (the audit record's)."""

    how: str
    at: datetime


def record_event(
    kind: str,
    *,
    submission: Submission | None = None,
    proposal: Proposal | None = None,
    batch: Batch | None = None,
    actor: User | None,
    note: str = "",
    now: datetime | None = None,
    authenticated: Authenticated | None = None,
) -> ConsoleEvent:
    """Append to the console's record, and announce it on the task's group once committed
    (a batch's own entries, which name no task, on the batch's group)."""
    if proposal is None and submission is not None and submission.proposal_id:
        proposal = submission.proposal
    subject = submission or proposal
    if subject is None and batch is None:
        raise ValueError("an event belongs to a submission, a proposal or a batch")
    # Its own transaction when called outside one; inside one, part of it (no savepoint: a
    # failure here fails the write it records).
    with transaction.atomic(savepoint=False):
        event = chain.append(
            ConsoleEvent(
                kind=kind,
                task_id=subject.task_id if subject else "",
                queue_id=subject.queue_id if subject else "",
                namespace_id=subject.namespace_id if subject else batch.namespace_id,  # type: ignore[union-attr]
                submission=submission,
                proposal=proposal,
                batch=batch,
                actor=actor,
                note=note,
                created_at=now or timezone.now(),
                authenticated_how=authenticated.how if authenticated else "",
                authenticated_at=authenticated.at if authenticated else None,
            )
        )
        # Apps above this one that act on what is recorded (notifications: an outbox row in
        # this same transaction) listen here instead of being imported.
        for listener in _listeners:
            listener(event)
    if subject is not None:
        message = {"type": CONSOLE_EVENT_MESSAGE, "event": event.as_message_data()}
        publish_on_commit(task_group(subject.task_id), message)
    _tell_the_people(submission, proposal, batch)
    return event


def _tell_the_people(
    submission: Submission | None, proposal: Proposal | None, batch: Batch | None
) -> None:
    """Whose decision moved is told live, once committed: "My decisions" adds the row of a
    decision stored in another tab or approved by a supervisor, and the row of a proposal or a
    batch waiting for approval comes and goes (issue 30)."""
    if submission is not None:
        message: dict[str, str] = {"type": FOLLOWUP_MESSAGE, "submission_id": submission.id}
        for user_id in {submission.created_by_id, submission.sent_as_id}:
            publish_on_commit(person_group(user_id), message)
    elif proposal is not None:
        message = {"type": PROPOSAL_MESSAGE, "proposal_id": proposal.id}
        publish_on_commit(person_group(proposal.proposed_by_id), message)
    elif batch is not None:
        message = {"type": BATCH_MESSAGE, "batch_id": batch.id}
        publish_on_commit(person_group(batch.created_by_id), message)


_listeners: list[Callable[[ConsoleEvent], None]] = []


def listen_to_records(listener: Callable[[ConsoleEvent], None]) -> None:
    """Call ``listener`` with every entry appended to the console's record, inside the
    transaction that appends it: what it writes commits or rolls back with the act."""
    if listener not in _listeners:
        _listeners.append(listener)


def record_export(*, actor: User, note: str, namespace_ids: Sequence[str]) -> list[ConsoleEvent]:
    """An export of the console's record is itself recorded, with its filter and time, once in
    each namespace it covered (whose auditors see it)."""
    now = timezone.now()
    with transaction.atomic():
        return [
            chain.append(
                ConsoleEvent(
                    kind="audit.exported",
                    actor=actor,
                    note=note,
                    namespace_id=namespace_id,
                    created_at=now,
                )
            )
            for namespace_id in namespace_ids or [""]
        ]


def credential_namespace(user: User) -> str:
    """The namespace of the person's Orbit credential when they hold exactly one and the
    console knows its namespace; "" otherwise (then the caller must name it)."""
    found = list(OrbitCredential.objects.filter(user=user).values_list("namespace_id", flat=True))
    return found[0] if len(found) == 1 else ""


def sending_credential(
    submission: Submission, held: Sequence[OrbitCredential]
) -> OrbitCredential | None:
    """The sender's credential (of ``held``, the sender's) for the submission's namespace.
    Where the console does not know one of the two namespaces (records and tokens from before
    it kept them), the sender's only credential: the API judges it."""
    for credential in held:
        if credential.namespace_id == submission.namespace_id:
            return credential
    if len(held) == 1 and not (submission.namespace_id and held[0].namespace_id):
        return held[0]
    return None


# --- Sending ----------------------------------------------------------------------------------


async def _rejected_unsent(
    submission: Submission, actor: User | None, code: str, message: str
) -> Submission:
    """Record ``submission`` rejected without sending it (``code``, ``message``: why)."""
    return await sync_to_async(_recorded)(
        _resolve,
        submission.id,
        SubmissionState.REJECTED,
        "submission.rejected",
        actor=actor,
        error_code=code,
        error_message=message,
    )


async def submission_send(
    submission: Submission, *, actor: User | None, held: Sequence[OrbitCredential] | None = None
) -> Submission:
    """Send the stored request (again) and record what came back. ``actor`` is who pressed the
    button, ``None`` for the reconciler; ``held``, the credentials of the sender when the
    caller has them already (the sender's own page). Returns the submission as it now stands."""
    if held is None or submission.sent_as_id != (actor.pk if actor else None):
        held = [c async for c in OrbitCredential.objects.filter(user_id=submission.sent_as_id)]
    if (
        submission.state != SubmissionState.UNKNOWN
        and submission.sent_as_id is not None
        and not await _sender_active(submission.sent_as_id)
    ):
        # A person disabled after deciding: a decision the API surely does not hold goes out no
        # more in their name, and is told, not dropped (issue 34, permission revocation). One
        # whose outcome is unknown is sent again: the API may hold it already, and only asking
        # with the same idempotency key finds out.
        return await _rejected_unsent(
            submission,
            actor,
            "SENDER_DISABLED",
            "the person who decided was disabled before it was sent",
        )
    credential = sending_credential(submission, held)
    if credential is None:
        return await _rejected_unsent(
            submission,
            actor,
            "NO_CREDENTIAL",
            "the sender has no Orbit credential for this namespace any more",
        )
    if not await sync_to_async(_mark_sent)(submission.id, actor):
        # Closed meanwhile (a definite answer, or its batch cancelled before it went out):
        # nothing more is sent.
        return await Submission.objects.aget(id=submission.id)
    try:
        try:
            async with orbit_client(credential) as orbit:
                receipt = await _post(orbit, submission)
        except OrbitError as error:
            replaced = await _replaced(credential) if error.status == 401 else None
            if replaced is None:
                raise
            # The person's token was replaced while this went out (a rotation: the old one is
            # revoked as the new one is stored). The API refused it before doing anything, so
            # the same request goes again, once, with the token the person now holds.
            async with orbit_client(replaced) as orbit:
                receipt = await _post(orbit, submission)
    except OutcomeUnknown as unknown:
        return await sync_to_async(_recorded)(_record_unknown, submission.id, unknown, actor)
    except OrbitError as error:
        return await sync_to_async(_recorded)(_record_error, submission.id, error, actor)
    return await sync_to_async(_recorded)(_record_receipt, submission.id, receipt, actor)


async def _sender_active(user_id: int) -> bool:
    return await User.objects.filter(pk=user_id, is_active=True).aexists()


async def _replaced(used: OrbitCredential) -> OrbitCredential | None:
    """The sender's credential for the same namespace as it is stored now, when it holds
    another token than ``used``; else ``None``."""
    now = await OrbitCredential.objects.filter(
        user_id=used.user_id, namespace_id=used.namespace_id
    ).afirst()
    if now is None or unseal(now.token_ciphertext) == unseal(used.token_ciphertext):
        return None
    return now


def _recorded(
    record: Callable[..., object], submission_id: str, *args: Any, **kwargs: Any
) -> Submission:
    """Record an answer and read the submission as it then stands, in one hop."""
    record(submission_id, *args, **kwargs)
    return Submission.objects.get(id=submission_id)


async def _post(orbit, submission: Submission) -> ReviewReceipt | RetryReceipt:  # type: ignore[no-untyped-def]
    if submission.action == SubmissionAction.REVIEW:
        return await orbit.review_task(
            submission.task_id, idempotency_key=submission.idempotency_key, body=submission.body
        )
    return await orbit.retry_task(
        submission.task_id, idempotency_key=submission.idempotency_key, body=submission.body
    )


_SUBMISSIONS = Rows(Submission)


def _locked(submission_id: str) -> Submission:
    """The submission, its row locked until the transaction ends (plain SQL, lib/rows.py:
    every send takes it twice)."""
    submission = _SUBMISSIONS.one("id = %s", [submission_id], for_update=True)
    if submission is None:
        raise Submission.DoesNotExist(f"no submission {submission_id}")
    return submission


def _mark_sent(submission_id: str, actor: User | None) -> bool:
    """Count a send about to go out; ``False`` (and nothing counted) for a closed submission."""
    with transaction.atomic():
        submission = _locked(submission_id)
        if not submission.is_open:
            return False
        now = timezone.now()
        first = submission.send_count == 0
        submission.send_count += 1
        submission.last_sent_at = now
        _SUBMISSIONS.update(submission, ["send_count", "last_sent_at"])
        kind = "submission.sent" if first else "submission.resent"
        note = "" if actor is not None or first else notes.written(notes.SENT_AGAIN_BY_RECONCILER)
        record_event(kind, submission=submission, actor=actor, note=note, now=now)
    return True


def _record_receipt(
    submission_id: str, receipt: ReviewReceipt | RetryReceipt, actor: User | None
) -> None:
    """The receipt, and in the same transaction the start of following the decision to its
    end: the receipt's task is the reviewed one, or the retry's new one (I2)."""
    from orbit_console.decisions.followups import followup_start

    retry = isinstance(receipt, RetryReceipt)
    note = f"audit {receipt.audit_id}" + (" (deduplicated)" if receipt.deduplicated else "")
    with transaction.atomic():
        resolved = _resolve(
            submission_id,
            SubmissionState.SUCCEEDED,
            "submission.receipt",
            actor=actor,
            note=note,
            http_status=201 if isinstance(receipt, RetryReceipt) and receipt.created else 200,
            audit_id=receipt.audit_id,
            deduplicated=receipt.deduplicated,
            result_task_id=receipt.task.id if retry else "",
            api_request_id=receipt.request_id or "",
        )
        if resolved is not None:  # else an earlier answer stands, and started it
            followup_start(resolved, receipt.task, now=resolved.resolved_at or timezone.now())


def _record_error(submission_id: str, error: OrbitError, actor: User | None) -> None:
    if error.status == 429:
        delay_ms = error.retry_after_ms or 1000
        _reschedule(
            submission_id,
            SubmissionState.RETRY_LATER,
            "submission.retry_later",
            actor=actor,
            after=timedelta(milliseconds=delay_ms),
            note=f"{error.code}: try again in {delay_ms} ms",
            http_status=429,
            error_code=error.code,
            error_message=error.message,
            api_request_id=error.request_id or "",
        )
        return
    _resolve(
        submission_id,
        SubmissionState.REJECTED,
        "submission.rejected",
        actor=actor,
        note=f"{error.status} {error.code}: {error.message}",
        http_status=error.status,
        error_code=error.code,
        error_message=error.message,
        api_request_id=error.request_id or "",
    )


def _record_unknown(submission_id: str, unknown: OutcomeUnknown, actor: User | None) -> None:
    submission = Submission.objects.get(id=submission_id)
    _reschedule(
        submission_id,
        SubmissionState.UNKNOWN,
        "submission.outcome_unknown",
        actor=actor,
        after=backoff(submission.send_count),
        note=unknown.reason,
        http_status=unknown.status,
        error_code=unknown.code or "",
        error_message=unknown.reason,
        api_request_id=unknown.request_id or "",
    )


def backoff(send_count: int) -> timedelta:
    """Bounded exponential backoff with jitter for the reconciler."""
    base, cap = settings.CONSOLE_RECONCILE_BACKOFF_SECONDS
    delay = min(cap, base * 2 ** max(0, send_count - 1))
    return timedelta(seconds=delay * (0.5 + random.random() / 2))  # noqa: S311 -- jitter


def _reschedule(
    submission_id: str,
    state: str,
    kind: str,
    *,
    actor: User | None,
    after: timedelta,
    note: str,
    **fields: object,
) -> None:
    with transaction.atomic():
        submission = _locked(submission_id)
        if not submission.is_open:
            return  # a definite answer arrived first; it stands
        now = timezone.now()
        submission.state = state
        submission.next_attempt_at = now + after
        for name, value in fields.items():
            setattr(submission, name, value)
        _SUBMISSIONS.update(submission, ["state", "next_attempt_at", *fields])
        record_event(kind, submission=submission, actor=actor, note=note, now=now)


def _resolve(
    submission_id: str,
    state: str,
    kind: str,
    *,
    actor: User | None,
    note: str = "",
    **fields: object,
) -> Submission | None:
    """Close an open submission with a definite answer; the submission so closed, or ``None``
    when it was closed already (the first definite answer stands)."""
    with transaction.atomic():
        submission = _locked(submission_id)
        if not submission.is_open:
            return None
        now = timezone.now()
        submission.state = state
        submission.resolved_at = now
        submission.next_attempt_at = None
        changed = ["state", "resolved_at", "next_attempt_at", *fields]
        if state == SubmissionState.REJECTED:
            submission.decision_slot = None  # a new decision may be made for this revision
            changed.append("decision_slot")
        for name, value in fields.items():
            setattr(submission, name, value)
        _SUBMISSIONS.update(submission, changed)
        record_event(kind, submission=submission, actor=actor, note=note, now=now)
        if state == SubmissionState.REJECTED and submission.proposal is not None:
            # The platform refused an approved proposal: it is closed with that answer; a new
            # decision needs a new proposal.
            Proposal.objects.filter(id=submission.proposal_id).update(decision_slot=None)
            record_event(
                "proposal.closed", proposal=submission.proposal, actor=actor, note=note, now=now
            )
    return submission
