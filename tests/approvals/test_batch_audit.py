"""What an auditor reads of a batch (issue 30, "Auditors cannot see the why"): a batch's sends,
which the console's worker carries out, belong to the person who decided the batch, with the
supervisor who approved it named, in the explorer, its exports and the submission's page; each
entry carries the decision's reason, evidence reference, outcome and exact body; a batch and
its submissions link to each other.
"""

import csv
import io
import json
from typing import Any

from asgiref.sync import async_to_sync

from orbit_console.decisions.batchworker import work_batches
from orbit_console.decisions.models import Batch, BatchState, ConsoleEvent, Submission
from orbit_console.ledger.seed import seed_incident
from tests.approvals.test_proposals import batch_step, propose_batch
from tests.console.web import element, signed_in, text_of
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

REASON = "broker outage INC-29: nothing was written"
EVIDENCE = "https://status.example/INC-29"


def test_a_batchs_sends_are_found_under_its_author_with_the_approver_and_the_why(
    approvals_server: DaphneServer, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="why"
    )
    operator, supervisor = crew["operator"], crew["supervisor"]
    with (
        signed_in(approvals_server.url, operator) as author,
        signed_in(approvals_server.url, supervisor) as approver,
        signed_in(approvals_server.url, crew["auditor"]) as auditor,
    ):
        batch_id = propose_batch(author, incident)
        batch_step(approver, batch_id, "approve", note="looked at INC-29")
        assert Batch.objects.get(id=batch_id).state == BatchState.RUNNING
        while async_to_sync(work_batches)():
            pass
        submissions = list(Submission.objects.filter(batch_item__batch_id=batch_id))
        assert len(submissions) == 2 and {s.state for s in submissions} == {"succeeded"}
        sends = ConsoleEvent.objects.filter(
            submission__in=submissions, kind__in=("submission.sent", "submission.receipt")
        )
        # The worker sent them: the record names no actor (it is never rewritten)...
        assert sends.count() == 4 and {e.actor_id for e in sends} == {None}

        # ...and filtering by the author finds every one of them, read as the author's act,
        # approved by the supervisor, with the decision's reason, evidence and outcome.
        page = auditor.get("/audit", params={"person": operator.username})
        assert page.status_code == 200
        for event in sends:
            row = text_of(element(page.text, rf'<tr id="event-{event.id}">.*?</tr>'))
            assert operator.username in row and "carried out by the console" in row, row
            assert f"approved by {supervisor.username}" in row, row
            assert REASON in row and EVIDENCE in row and "FAILED" in row, row
            assert f"batch {batch_id[:8]}" in row, row

        exported = list(
            csv.DictReader(
                io.StringIO(
                    auditor.get("/audit/export.csv", params={"person": operator.username}).text
                )
            )
        )
        by_id = {row["id"]: row for row in exported}
        for event in sends:
            row = by_id[event.id]
            assert (row["actor"], row["person"]) == ("", operator.username)
            assert row["approved_by"] == supervisor.username
            assert row["batch_id"] == batch_id
            assert (row["reason"], row["evidence_ref"], row["decided_outcome"]) == (
                REASON,
                EVIDENCE,
                "FAILED",
            )
            submission = next(s for s in submissions if s.id == row["submission_id"])
            assert row["body"] == submission.body  # the exact body sent
            assert json.loads(row["body"])["reason"] == REASON

        # The submission names its batch and who approved it; its history names the author.
        submission = submissions[0]
        shown = auditor.get(f"/submissions/{submission.id}").text
        assert f'href="/batches/{batch_id}"' in element(shown, r'<p id="submission-batch">.*?</p>')
        assert text_of(element(shown, r'<dd id="submission-approved-by">.*?</dd>')) == (
            supervisor.username
        )
        history = text_of(element(shown, r'<ol class="timeline">.*?</ol>'))
        assert "the console" not in history.replace("carried out by the console", "")
        assert operator.username in history

        # The task's history says the same.
        task_page = auditor.get(f"/tasks/{submission.task_id}").text
        for event in sends.filter(submission=submission):
            entry = text_of(element(task_page, rf'<li id="entry-ev-{event.id}".*?</li>'))
            assert f"{operator.username} (carried out by the console)" in entry, entry

        # The batch's page links to its submissions.
        batch_page = author.get(f"/batches/{batch_id}").text
        assert any(f'href="/submissions/{s.id}"' in batch_page for s in submissions)
