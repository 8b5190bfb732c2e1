"""Approvals that expire and remind (issue 32): a batch waiting for approval expires like a
proposal, cannot be approved after, keeps its place in the history and is told to its author;
supervisors are reminded once before; an outcome still unknown is told after a while."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from orbit_console.decisions.batches import ProposalRefused, batch_approve, batches_expire_due
from orbit_console.decisions.models import (
    Batch,
    BatchItem,
    BatchState,
    ConsoleEvent,
    Proposal,
    Submission,
    SubmissionState,
)
from orbit_console.lib.ids import new_id
from orbit_console.notifications import scans
from orbit_console.notifications.models import Notification
from tests.notifications.conftest import person, propose


def proposed_batch(author: Any, namespace: str, expires_in: timedelta) -> Batch:
    now = timezone.now()
    batch = Batch.objects.create(
        action="review",
        namespace_id=namespace,
        created_by=author,
        created_at=now,
        state=BatchState.PROPOSED,
        decision='{"outcome": "SUCCEEDED", "reason": "checked", "evidence": "INC-7"}',
        required_approvals=1,
        expires_at=now + expires_in,
    )
    BatchItem.objects.create(batch=batch, task_id=f"t-{new_id()}", seen_state="NEEDS_REVIEW")
    return batch


def test_an_expired_batch_cannot_be_approved_and_is_told_to_its_author(namespace: str) -> None:
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    batch = proposed_batch(author, namespace, timedelta(seconds=-1))

    with pytest.raises(ProposalRefused):
        batch_approve(batch_id=batch.id, approver=supervisor)

    batch.refresh_from_db()
    assert batch.state == BatchState.EXPIRED
    assert list(ConsoleEvent.objects.filter(batch=batch).values_list("kind", flat=True)) == [
        "batch.expired"
    ]
    told = Notification.objects.get(kind="batch.expired", batch_id=batch.id)
    assert list(told.recipients.values_list("user_id", flat=True)) == [author.pk]
    assert "INC-7" not in told.facts and "checked" not in told.facts


def test_the_reconciler_expires_batches_past_their_time(namespace: str) -> None:
    author = person(namespace, "operator")
    late = proposed_batch(author, namespace, timedelta(seconds=-5))
    early = proposed_batch(author, namespace, timedelta(hours=5))

    batches_expire_due(timezone.now())

    assert Batch.objects.get(id=late.id).state == BatchState.EXPIRED
    assert Batch.objects.get(id=early.id).state == BatchState.PROPOSED


def test_supervisors_are_reminded_once_before_a_proposal_or_batch_expires(
    namespace: str, settings: Any
) -> None:
    settings.CONSOLE_PROPOSAL_REMINDER_MINUTES = 60
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    proposal = propose(author, namespace)
    Proposal.objects.filter(id=proposal.id).update(
        expires_at=timezone.now() + timedelta(minutes=30)
    )
    batch = proposed_batch(author, namespace, timedelta(minutes=45))
    distant = proposed_batch(author, namespace, timedelta(hours=5))

    scans.reminders(timezone.now())
    scans.reminders(timezone.now())

    for kind, subject in (
        ("proposal.reminder", {"proposal_id": proposal.id}),
        ("batch.reminder", {"batch_id": batch.id}),
    ):
        [told] = Notification.objects.filter(kind=kind, **subject)
        assert list(told.recipients.values_list("user_id", flat=True)) == [supervisor.pk]
    assert not Notification.objects.filter(kind="batch.reminder", batch_id=distant.id).exists()


def test_an_outcome_still_unknown_is_told_to_its_author_and_supervisors(
    namespace: str, settings: Any
) -> None:
    settings.CONSOLE_NOTIFY_UNKNOWN_AFTER_MINUTES = 10
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    now = timezone.now()
    made = {}
    for name, age in (("old", 11), ("young", 5)):
        submission_id = new_id()
        made[name] = Submission.objects.create(
            id=submission_id,
            action="review",
            task_id=f"t-{submission_id}",
            namespace_id=namespace,
            expected_revision="3",
            idempotency_key=f"orbit-console-{submission_id}",
            body='{"outcome": "SUCCEEDED", "reason": "secret reason"}',
            created_by=author,
            sent_as=author,
            created_at=now - timedelta(minutes=age),
            state=SubmissionState.UNKNOWN,
            reconcile_deadline=now + timedelta(hours=1),
        )

    scans.unknown_outcomes(now)
    scans.unknown_outcomes(now)

    [told] = Notification.objects.filter(kind="submission.unknown", namespace_id=namespace)
    assert told.submission_id == made["old"].id
    assert set(told.recipients.values_list("user_id", flat=True)) == {author.pk, supervisor.pk}
    assert "secret reason" not in told.facts
