"""What the audit and a finished batch tell (issue 32): a signed ``audit verify`` that found a
break, and an overdue checkpoint, reach every auditor once; a finished batch reaches its author
and approver with counts by outcome."""

from datetime import timedelta
from typing import Any

from django.utils import timezone

from orbit_console.audit import status
from orbit_console.audit.checkpoints import Reading
from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.audit.verify import FamilyReport, Report
from orbit_console.decisions.batches import finish_if_done
from orbit_console.decisions.models import Batch, BatchItem, BatchState
from orbit_console.lib.ids import new_id
from orbit_console.notifications import scans
from orbit_console.notifications.models import Notification
from tests.notifications.conftest import person


def test_a_signed_verification_that_found_a_break_is_told_to_every_auditor_once(
    namespace: str,
) -> None:
    auditor = person(namespace, "auditor")
    broken = Report(
        families=[FamilyReport("console", "entries", checked=3, problems=[f"break-{namespace}"])],
        checkpoints=Reading(),
    )
    row = status.record(broken, timezone.now())
    assert row is not None
    forged = ChainVerification.objects.create(
        ran_at=timezone.now(), ok=False, checked=1, first_break="written by hand"
    )

    scans.failed_verifications(timezone.now())
    scans.failed_verifications(timezone.now())

    [told] = Notification.objects.filter(key=f"audit.verify_failed:{row.id}")
    assert auditor.pk in set(told.recipients.values_list("user_id", flat=True))
    assert told.data["first_break"] == f"break-{namespace}"
    assert not Notification.objects.filter(key=f"audit.verify_failed:{forged.id}").exists()


def test_an_overdue_checkpoint_is_told_to_auditors_once(namespace: str, settings: Any) -> None:
    settings.ORBIT_AUDIT_CHECKPOINT_SECONDS = 60
    settings.CONSOLE_NOTIFY_CHECKPOINT_GRACE_SECONDS = 60
    auditor = person(namespace, "auditor")
    newest = WrittenCheckpoint.objects.order_by("-taken_at").first()
    taken = (newest.taken_at if newest else timezone.now()) + timedelta(seconds=1)
    checkpoint = WrittenCheckpoint.objects.create(
        series=f"s{new_id()[:8]}", number=1, digest="0" * 64, taken_at=taken
    )

    assert scans.overdue_checkpoint(taken + timedelta(seconds=100)) == 0  # within its period
    assert scans.overdue_checkpoint(taken + timedelta(seconds=121)) == 1
    assert scans.overdue_checkpoint(taken + timedelta(seconds=500)) == 0  # told once

    told = Notification.objects.get(key=f"audit.checkpoint_overdue:{checkpoint.series}:1")
    assert auditor.pk in set(told.recipients.values_list("user_id", flat=True))


def test_a_finished_batch_tells_its_author_and_approver_the_counts(namespace: str) -> None:
    author = person(namespace, "operator")
    approver = person(namespace, "supervisor")
    now = timezone.now()
    batch = Batch.objects.create(
        action="review",
        namespace_id=namespace,
        created_by=author,
        created_at=now,
        state=BatchState.RUNNING,
        decided_by=approver,
        sent_as=approver,
        decision='{"outcome": "SUCCEEDED", "reason": "r", "evidence_ref": "e-1"}',
    )
    for outcome in ("applied", "applied", "changed", "skipped"):
        BatchItem.objects.create(
            batch=batch, task_id=f"t-{new_id()}", seen_state="NEEDS_REVIEW", outcome=outcome
        )

    assert finish_if_done(batch, now)

    told = Notification.objects.get(kind="batch.finished", batch_id=batch.id)
    assert set(told.recipients.values_list("user_id", flat=True)) == {author.pk, approver.pk}
    assert told.data["counts"] == {"applied": 2, "changed": 1, "skipped": 1}
    assert told.path == f"/batches/{batch.id}"
