"""``manage.py restored --since TIME`` (issue 34, drill 3's fast subset): after a restore, the
decisions the recovery API applied since the backup that the console has no record of.

Two reviews and a retry are applied at the embedded API after "the backup": the console holds
the receipt of one review (its submission names the API's audit id), not of the others, as a
console restored from a backup taken before them would. The command lists those two, the retry
included although its task was last updated before the backup (a retry is recorded on its
source and leaves it as it was), and exits 1."""

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.utils import timezone

from orbit_console.decisions.models import Submission
from orbit_console.decisions.submissions import submission_create
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.people.person import token_client
from tests.support.orbit import REVIEW_REVISION, retry_body, review_body
from tests.support.people import TestPerson


def review(token: str, task_id: str) -> str:
    """Review ``task_id`` at the API; the receipt's audit id."""

    async def send() -> str:
        async with token_client(token) as orbit:
            body = json.dumps(review_body())
            receipt = await orbit.review_task(task_id, idempotency_key=new_id(), body=body)
            return receipt.audit_id

    return async_to_sync(send)()


def retry(token: str, task_id: str) -> str:
    """Retry ``task_id`` at the API (recorded on it, which it leaves as it was); the audit id."""

    async def send() -> str:
        async with token_client(token) as orbit:
            body = json.dumps(retry_body())
            receipt = await orbit.retry_task(task_id, idempotency_key=new_id(), body=body)
            return receipt.audit_id

    return async_to_sync(send)()


def restored(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("restored", *args, stdout=out)
    except SystemExit as leaving:
        return int(leaving.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_decisions_applied_since_the_backup_but_not_in_the_console_are_listed(
    world: dict[str, Any], people: dict[str, TestPerson], monkeypatch: pytest.MonkeyPatch
) -> None:
    backup_time = timezone.now() - timedelta(seconds=1)
    token = world["tokens"]["admin"]
    kept_task, lost_task = world["tasks"]["needs_review_2"], world["tasks"]["needs_review"]
    kept = submission_create(
        action="review",
        task_id=kept_task,
        queue_id=world["queue_id"],
        expected_revision=REVIEW_REVISION,
        body=json.dumps(review_body()),
        created_by=people["operator"].user,
        note="its receipt is in the console",
    ).submission
    kept_audit = review(token, kept_task)
    Submission.objects.filter(id=kept.id).update(audit_id=kept_audit, state="succeeded")
    lost_audit = review(token, lost_task)  # applied; the restored console never heard of it
    # A task seeded (updated) before the backup, retried after it: only its successor is new.
    retried_task = world["tasks"]["failed"]
    retried_audit = retry(token, retried_task)

    monkeypatch.setenv("ORBIT_RESTORE_TOKEN", token)
    code, out = restored("--since", format_utc(backup_time), "--json")
    assert code == 1, out
    document = json.loads(out)
    assert document["applied_since"] == 3
    assert [(m["task_id"], m["action"], m["audit_id"]) for m in document["missing"]] == [
        (lost_task, "task.review", lost_audit),
        (retried_task, "task.retry", retried_audit),
    ]

    code, out = restored("--since", format_utc(timezone.now() + timedelta(seconds=5)))
    assert code == 0, out
    assert "0 decision(s) applied at the recovery API since" in out

    monkeypatch.delenv("ORBIT_RESTORE_TOKEN")
    with pytest.raises(CommandError, match="ORBIT_RESTORE_TOKEN is not set"):
        restored("--since", format_utc(backup_time))
