"""The outbox (issue 32): what an act tells is written in the act's own transaction, to the
people the issue names, in each one's language, and holds no token, business key or body (E2)."""

import json

import pytest
from django.db import transaction

from orbit_console.decisions.models import Proposal
from orbit_console.decisions.proposals import proposal_approve, proposal_create, proposal_reject
from orbit_console.notifications.models import Notification, Preference, Recipient
from orbit_console.people.models import OrbitCredential
from tests.notifications.conftest import person, propose


def recipients_of(kind: str, **subject: str) -> dict[int, str]:
    notification = Notification.objects.get(kind=kind, **subject)
    return dict(notification.recipients.values_list("user_id", "language"))


def test_a_waiting_proposal_is_told_to_the_supervisors_of_its_namespace_only(
    namespace: str,
) -> None:
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    chinese = person(namespace, "supervisor")
    Preference.objects.create(user=chinese, language="zh-hans")
    elsewhere = person(f"{namespace}-other", "supervisor")
    auditor = person(namespace, "auditor")

    proposal = propose(author, namespace)

    told = recipients_of("proposal.waiting", proposal_id=proposal.id)
    assert told == {supervisor.pk: "en", chinese.pk: "zh-hans"}
    assert elsewhere.pk not in told and auditor.pk not in told and author.pk not in told


def test_the_notification_rolls_back_with_the_act(namespace: str) -> None:
    author = person(namespace, "operator")
    person(namespace, "supervisor")

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        proposal = propose(author, namespace)
        assert Notification.objects.filter(proposal_id=proposal.id).exists()
        raise Undo
    assert not Proposal.objects.filter(id=proposal.id).exists()
    assert not Notification.objects.filter(proposal_id=proposal.id).exists()


def test_a_rejection_tells_its_author_the_reason_and_nothing_of_the_body(namespace: str) -> None:
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    proposal = propose(author, namespace)

    proposal_reject(proposal_id=proposal.id, supervisor=supervisor, reason="wrong evidence")

    notification = Notification.objects.get(kind="proposal.rejected", proposal_id=proposal.id)
    assert recipients_of("proposal.rejected", proposal_id=proposal.id) == {author.pk: "en"}
    assert notification.data["reason"] == "wrong evidence"
    assert notification.data["by"] == supervisor.username
    stored = json.dumps([notification.facts, notification.path, notification.key])
    assert "checked" not in stored and "SUCCEEDED" not in stored  # the body's reason/outcome
    assert notification.path == f"/proposals/{proposal.id}"


def test_an_approval_is_told_once_when_the_last_approver_approves(namespace: str) -> None:
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    proposal = propose(author, namespace)
    Proposal.objects.filter(id=proposal.id).update(required_approvals=2)

    proposal_approve(proposal_id=proposal.id, approver=supervisor)
    assert not Notification.objects.filter(kind="proposal.approved", proposal_id=proposal.id)

    second = person(namespace, "supervisor")
    proposal_approve(proposal_id=proposal.id, approver=second)
    assert recipients_of("proposal.approved", proposal_id=proposal.id) == {author.pk: "en"}
    # the supervisor told it waits, and the author told it was approved
    assert Recipient.objects.filter(notification__proposal_id=proposal.id).count() == 2


def test_a_supervisor_limited_to_other_queues_is_not_told(namespace: str) -> None:
    """Telling is showing: a credential that cannot read the task's queue hears nothing of it
    (docs/access.md), as its approvals queue would not show it."""
    author = person(namespace, "operator")
    whole = person(namespace, "supervisor")
    same_queue = person(namespace, "supervisor")
    other_queue = person(namespace, "supervisor")
    OrbitCredential.objects.filter(user=same_queue).update(queue_ids="q-payments")
    OrbitCredential.objects.filter(user=other_queue).update(queue_ids="q-other")
    body = json.dumps({"outcome": "SUCCEEDED", "reason": "checked"})
    proposal = proposal_create(
        action="review",
        task_id=f"task-{namespace}",
        expected_revision="3",
        body=body,
        proposed_by=author,
        namespace_id=namespace,
        queue_id="q-payments",
    ).proposal

    told = recipients_of("proposal.waiting", proposal_id=proposal.id)
    assert set(told) == {whole.pk, same_queue.pk}
