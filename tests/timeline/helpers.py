"""Helpers of the live timeline's tests (issue 4): sessions, socket headers and changes made in
the test process through the ledger's own services, so that ``transaction.on_commit`` publishes
from here."""

import json
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from orbit_console.decisions.models import ConsoleEvent, SubmissionAction
from orbit_console.decisions.submissions import submission_create
from orbit_console.ledger import services
from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.journal import write_audit
from orbit_console.ledger.lifecycle import credential_revoke
from orbit_console.ledger.models import Credential, OperationAudit, Task
from orbit_console.ledger.requests import parse_retry, parse_review
from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import unseal
from orbit_console.people.models import OrbitCredential
from tests.support.orbit import new_key, retry_body, review_body

REASON_WITH_MARKUP = 'Checked <b>"the store"</b> & found nothing'
REASON_ESCAPED = "Checked &lt;b&gt;&quot;the store&quot;&lt;/b&gt; &amp; found nothing"


def timeline_path(task_id: str) -> str:
    return f"/ws/tasks/{task_id}/timeline"


def session_cookie(user: User) -> str:
    """The ``sessionid`` of a freshly signed-in session of ``user`` (stored in the test DB)."""
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def socket_headers(*, origin: str | None, session: str | None) -> list[tuple[bytes, bytes]]:
    headers: list[tuple[bytes, bytes]] = []
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if session is not None:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return headers


def ledger_credential(token: str) -> Credential:
    return Credential.objects.prefetch_related("queues").get(token_hash=hash_token(token))


def review_in_process(
    world: dict[str, Any], *, task: str = "needs_review", reason: str = REASON_WITH_MARKUP
) -> str:
    """Review a task through the ledger's service, as the API view does, in this process; the
    audit record is announced when the transaction commits. Returns the audit id."""
    request = parse_review(json.dumps(review_body(reason=reason)).encode())
    receipt = services.task_review(
        credential=ledger_credential(world["tokens"]["admin"]),
        task_id=world["tasks"][task],
        idempotency_key=new_key(),
        request=request,
    )
    audit_id: str = receipt.data["audit_id"]
    return audit_id


def retry_in_process(world: dict[str, Any], *, task: str = "failed") -> str:
    """Retry a task through the ledger's service, in this process. Returns the successor's id."""
    receipt = services.task_retry(
        credential=ledger_credential(world["tokens"]["admin"]),
        task_id=world["tasks"][task],
        idempotency_key=new_key(),
        request=parse_retry(json.dumps(retry_body()).encode()),
    )
    successor: str = receipt.data["task"]["id"]
    return successor


class RolledBack(Exception):
    pass


def review_rolled_back(world: dict[str, Any], *, task: str = "needs_review") -> str:
    """A review whose transaction rolls back after the audit record was written."""
    audit_id = ""
    try:
        with transaction.atomic():
            audit_id = review_in_process(world, task=task)
            raise RolledBack
    except RolledBack:
        pass
    return audit_id


def console_submission(world: dict[str, Any], user: User, *, task: str = "needs_review") -> str:
    """Store a console submission for the task (event ``submission.stored``); its event id."""
    created = submission_create(
        action=SubmissionAction.REVIEW,
        task_id=world["tasks"][task],
        expected_revision="3",
        body=json.dumps(review_body()),
        created_by=user,
    )
    event = ConsoleEvent.objects.filter(submission=created.submission).get()
    return str(event.id)


def revoke_person(user: User) -> None:
    """Revoke, in the ledger, the credential the console holds for this person."""
    stored = OrbitCredential.objects.get(user=user)
    credential = Credential.objects.get(token_hash=hash_token(unseal(stored.token_ciphertext)))
    credential_revoke(credential=credential)


def add_operations(task_id: str, count: int) -> list[str]:
    """``count`` platform operations on the task, a millisecond apart, newer than any before;
    written as the platform writes its audit. Returns their ids, oldest first."""
    ids = []
    with transaction.atomic():
        task = Task.objects.select_for_update().get(id=task_id)
        start = OperationAudit.objects.filter(task_id=task_id).order_by("-created_at").first()
        assert start is not None
        for number in range(1, count + 1):
            record = write_audit(
                task=task,
                operation_id=new_id(),
                actor_id="worker-7",
                action="task.execution_result",
                reason=f"late report {number}",
                evidence_ref=None,
                before={"state": task.state, "revision": str(task.revision)},
                after={"state": task.state, "revision": str(task.revision)},
                now=start.created_at + timedelta(milliseconds=number),
            )
            ids.append(record.id)
    return ids
