"""Decisions on their way out while the person's access changes (issue 34).

The person's Orbit token replaced (credential rotation): replacing a token revokes the old one
as the new one is stored; a send that left with the old token was refused (401) and the
decision rejected (found by ``bench/drills/rotation.py``: one decision of 173 under load). The
person disabled, or their credential revoked (``bench/drills/revocation.py``): the decision is
rejected and says why, never dropped."""

import json
from typing import Any

from asgiref.sync import async_to_sync
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.decisions.models import SubmissionAction, SubmissionState
from orbit_console.decisions.submissions import submission_create, submission_send
from orbit_console.ledger.models import OperationAudit
from orbit_console.people.credentials import credential_drop, mint_embedded
from orbit_console.people.models import OrbitCredential
from tests.support.orbit import review_body
from tests.support.people import make_person
from tests.support.servers import DaphneServer


def stored_review(world: dict[str, Any], user: Any) -> Any:
    return submission_create(
        action=SubmissionAction.REVIEW,
        task_id=world["tasks"]["needs_review"],
        expected_revision="3",
        body=json.dumps(review_body()),
        created_by=user,
    ).submission


def test_a_decision_sent_with_a_token_replaced_meanwhile_goes_with_the_new_one(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    settings.ORBIT_API_URL = orbit_server.url
    operator = make_person(world, "operator")
    held = list(OrbitCredential.objects.filter(user=operator.user))  # what the page read
    submission = stored_review(world, operator.user)
    mint_embedded(
        user=operator.user, roles=frozenset({"operator"}), namespace_id=world["namespace_id"]
    )  # the rotation: the old token revoked, the new one stored

    sent = async_to_sync(submission_send)(submission, actor=operator.user, held=held)

    assert sent.state == SubmissionState.SUCCEEDED, (sent.state, sent.error_message)
    applied = OperationAudit.objects.filter(task_id=submission.task_id, action="task.review")
    assert applied.count() == 1


def test_a_decision_sent_with_a_revoked_token_and_no_other_is_rejected_and_says_why(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """A revoked credential that was not replaced is not retried: the decision is told."""
    settings.ORBIT_API_URL = orbit_server.url
    operator = make_person(world, "operator")
    held = list(OrbitCredential.objects.filter(user=operator.user))
    submission = stored_review(world, operator.user)
    credential_drop(user=operator.user, namespace_id=world["namespace_id"])

    sent = async_to_sync(submission_send)(submission, actor=operator.user, held=held)

    assert sent.state == SubmissionState.REJECTED
    assert sent.http_status == 401 and sent.error_code


def test_a_stored_decision_of_a_person_disabled_before_it_was_sent_is_rejected_and_says_why(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """Found by ``bench/drills/revocation.py``: the reconciler sent it in the disabled person's
    name, with the credential the console still held."""
    settings.ORBIT_API_URL = orbit_server.url
    operator = make_person(world, "operator")
    submission = stored_review(world, operator.user)
    operator.user.is_active = False
    operator.user.save(update_fields=["is_active"])

    sent = async_to_sync(submission_send)(submission, actor=None)

    assert sent.state == SubmissionState.REJECTED
    assert sent.error_code == "SENDER_DISABLED" and sent.error_message
    assert not OperationAudit.objects.filter(task_id=submission.task_id, action="task.review")
