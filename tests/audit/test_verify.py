"""Tamper evidence (issue 6): both records are hash-chained, and ``manage.py audit verify`` —
run here as a real process on the test database — walks the chains and names the first break.

To tamper, a test lifts the append-only triggers (as someone with DDL rights could), changes one
row of its own, runs the command, then puts back exactly what was there and creates the
triggers again, in ``finally`` blocks. The shared database's chains are therefore intact before
and after each test: each test first checks that (a fresh ``verify`` exits 0) and finally checks
that its restore was exact (``verify`` exits 0 again).
"""

import base64
import hashlib
import re
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from django.test import override_settings
from django.utils import timezone

from orbit_console.audit import signing, status
from orbit_console.audit.checkpoints import Reading
from orbit_console.audit.models import ChainVerification
from orbit_console.audit.verify import verify
from orbit_console.decisions.chain import CONSOLE_CHAIN
from orbit_console.decisions.models import ChainHead, ConsoleEvent, Submission
from orbit_console.ledger.models import OperationAudit
from tests.audit.conftest import (
    AUDIT_TABLE,
    CONSOLE_TABLE,
    VERIFICATION_TABLE,
    append_only_lifted,
    audit_verify,
    more_events,
    verify_output,
)
from tests.console.web import Console, element, text_of
from tests.support.orbit import post, review_body
from tests.support.people import TestPerson
from tests.support.servers import child_env, run_manage

FIRST_BREAK = re.compile(r"^first break: (.*)$", re.MULTILINE)
ID = re.compile(r"\b[0-9a-f]{32}\b")


def assert_intact() -> str:
    done = audit_verify()
    output = verify_output(done)
    assert done.returncode == 0, output
    assert "first break" not in output
    assert re.search(r"^ledger audit: \d+ records, intact$", done.stdout, re.MULTILINE), output
    assert re.search(r"^console record: \d+ entries, intact$", done.stdout, re.MULTILINE), output
    return output


def broken_at(done: Any) -> str:
    """The ``first break`` line of a failed verification."""
    output = verify_output(done)
    assert done.returncode == 1, output
    match = FIRST_BREAK.search(done.stdout)
    assert match is not None, output
    return match.group(1)


@pytest.fixture
def intact(live_db: None) -> Iterator[None]:
    """The chains are intact before the test, and again after it put everything back."""
    assert_intact()
    yield
    assert_intact()


def chain_status(console: Console) -> str:
    page = console.get("/audit")
    assert page.status_code == 200, page.text
    return text_of(element(page.text, r'<p class="callout [^"]*" id="chain-status">.*?</p>'))


def test_audit_verify_passes_on_intact_chains(
    intact: None, world: dict[str, Any], submission: Submission, api: httpx.Client
) -> None:
    task_id = world["tasks"]["needs_review"]
    reviewed = post(api, task_id, "review", world["tokens"]["admin"], review_body())
    assert reviewed.status_code == 200, reviewed.text
    output = assert_intact()
    records = int(re.search(r"ledger audit: (\d+) records", output).group(1))  # type: ignore[union-attr]
    entries = int(re.search(r"console record: (\d+) entries", output).group(1))  # type: ignore[union-attr]
    assert records == OperationAudit.objects.count()
    assert entries == ConsoleEvent.objects.count() >= 1
    latest = ChainVerification.objects.order_by("-ran_at").first()
    assert latest is not None and latest.ok and latest.first_break == ""
    assert latest.checked == records + entries
    said = status.verified(latest)  # signed with the checkpoint key, and the columns agree
    assert said is not None and said.ok and said.checked == latest.checked


def test_edited_operation_audit_is_found_at_that_exact_record(
    intact: None,
    world: dict[str, Any],
    api: httpx.Client,
    console_as: Callable[..., Console],
    people: dict[str, TestPerson],
) -> None:
    task_id = world["tasks"]["needs_review"]
    reviewed = post(api, task_id, "review", world["tokens"]["admin"], review_body())
    assert reviewed.status_code == 200, reviewed.text
    chain = list(OperationAudit.objects.filter(task_id=task_id).order_by("seq"))
    assert len(chain) >= 3
    target = chain[1]  # in the middle: the record after it still links to the stored hash
    original = target.reason
    rows = OperationAudit.objects.filter(id=target.id)

    with append_only_lifted(AUDIT_TABLE):
        try:
            assert rows.update(reason=original + " (edited)") == 1
            done = audit_verify()
        finally:
            rows.update(reason=original)
    first_break = broken_at(done)
    assert ID.findall(first_break) == [task_id, target.id]
    assert f"record {target.id} (seq {target.seq})" in first_break
    assert "changed" in first_break
    assert re.search(r"^ledger audit: \d+ records, BROKEN$", done.stdout, re.MULTILINE)
    assert rows.get().reason == original

    latest = ChainVerification.objects.order_by("-ran_at").first()
    assert latest is not None and not latest.ok and target.id in latest.first_break
    status = chain_status(console_as(people["auditor"]))
    assert "BROKEN" in status and target.id in status


def test_edited_console_event_is_found_at_that_exact_entry(
    intact: None, submission: Submission
) -> None:
    _before, target, _after = more_events(submission, 3)
    original = target.note
    rows = ConsoleEvent.objects.filter(id=target.id)

    with append_only_lifted(CONSOLE_TABLE):
        try:
            assert rows.update(note="nothing happened here") == 1
            done = audit_verify()
        finally:
            rows.update(note=original)
    first_break = broken_at(done)
    assert ID.findall(first_break) == [target.id]
    assert f"entry {target.id} (seq {target.seq})" in first_break
    assert "changed" in first_break
    assert re.search(r"^ledger audit: \d+ records, intact$", done.stdout, re.MULTILINE)
    assert re.search(r"^console record: \d+ entries, BROKEN$", done.stdout, re.MULTILINE)
    assert rows.get().note == original


def test_edited_console_event_actor_is_found(intact: None, submission: Submission) -> None:
    """Every field is covered by the hash, not only the note: here an entry the console made
    itself is attributed to a person."""
    target = more_events(submission, 1)[0]
    rows = ConsoleEvent.objects.filter(id=target.id)
    original_actor = rows.values_list("actor_id", flat=True).get()
    with append_only_lifted(CONSOLE_TABLE):
        try:
            assert rows.update(actor=submission.created_by) == 1
            done = audit_verify()
        finally:
            rows.update(actor_id=original_actor)
    assert ID.findall(broken_at(done)) == [target.id]


def test_deleted_middle_console_event_is_found_at_the_next_entry(
    intact: None, submission: Submission
) -> None:
    before, removed, after = more_events(submission, 3)
    assert (before.seq + 1, removed.seq + 1) == (removed.seq, after.seq)
    kept = ConsoleEvent.objects.get(id=removed.id)

    with append_only_lifted(CONSOLE_TABLE):
        try:
            assert ConsoleEvent.objects.filter(id=removed.id).delete()[0] == 1
            done = audit_verify()
        finally:
            kept.save(force_insert=True)
    first_break = broken_at(done)
    assert ID.findall(first_break) == [after.id]
    assert f"entry {after.id} (seq {after.seq})" in first_break
    assert f"expected seq {removed.seq}" in first_break and "missing" in first_break


def test_deleted_last_console_event_is_found_by_the_head(
    intact: None, submission: Submission
) -> None:
    last = more_events(submission, 1)[0]
    head = ChainHead.objects.get(name=CONSOLE_CHAIN)
    assert (head.seq, head.last_hash) == (last.seq, last.entry_hash)  # it is the tail
    kept = ConsoleEvent.objects.get(id=last.id)

    with append_only_lifted(CONSOLE_TABLE):
        try:
            assert ConsoleEvent.objects.filter(id=last.id).delete()[0] == 1
            done = audit_verify()
        finally:
            kept.save(force_insert=True)
    first_break = broken_at(done)
    assert f"ends at seq {last.seq - 1}" in first_break
    assert f"head says {last.seq}" in first_break
    assert "removed" in first_break


# --- Keyed links (issue 13) ----------------------------------------------------------------------


def resealed_without_the_key(record: OperationAudit) -> str:
    """What someone with the rows but not the key can compute: the plain SHA-256 of the content
    the link covers, as the chains were before they were keyed."""
    from orbit_console.ledger.chain import content
    from orbit_console.lib import strictjson

    return hashlib.sha256(strictjson.canonical(content(record)).encode()).hexdigest()


def test_a_record_changed_and_relinked_without_the_key_is_found(
    intact: None, world: dict[str, Any]
) -> None:
    """Issue 13: a changed reason, re-hashed with the project's own function but without the
    audit key, no longer passes."""
    last = OperationAudit.objects.filter(task_id=world["tasks"]["failed"]).order_by("-seq")[0]
    rows = OperationAudit.objects.filter(id=last.id)
    forged = OperationAudit.objects.get(id=last.id)
    forged.reason = "a reason nobody gave"
    with append_only_lifted(AUDIT_TABLE):
        try:
            rows.update(reason=forged.reason, entry_hash=resealed_without_the_key(forged))
            done = audit_verify()
        finally:
            rows.update(reason=last.reason, entry_hash=last.entry_hash)
    first_break = broken_at(done)
    assert last.id in first_break and "changed" in first_break


def test_keys_rotate_and_a_record_of_a_key_not_held_is_found(intact: None) -> None:
    """A new key goes first and the old one stays: everything verifies. Without the old key,
    its records are named as linked by a key this installation does not hold."""
    from orbit_console.lib.auditkeys import _keyring

    current_id, ring = _keyring()
    old = base64.urlsafe_b64encode(ring[current_id]).decode()
    new = secrets.token_urlsafe(32)
    rotated = run_manage("audit", "verify", env=child_env(ORBIT_AUDIT_KEYS=f"{new},{old}"))
    assert rotated.returncode == 0, verify_output(rotated)
    without_old = run_manage("audit", "verify", env=child_env(ORBIT_AUDIT_KEYS=new))
    assert "an audit key this installation does not hold" in broken_at(without_old)


def test_explorer_shows_the_last_verification_result(
    intact: None, console_as: Callable[..., Console], people: dict[str, TestPerson]
) -> None:
    status = chain_status(console_as(people["supervisor"]))
    latest = ChainVerification.objects.order_by("-ran_at").first()
    assert latest is not None and latest.ok
    assert "intact" in status and f"({latest.checked} entries)" in status
    assert "BROKEN" not in status


# --- Issue 29 (b): what the explorer shows comes from signed results ----------------------------


def test_the_explorer_shows_only_signed_verification_results(
    intact: None,
    submission: Submission,
    console_as: Callable[..., Console],
    people: dict[str, TestPerson],
) -> None:
    """The runtime user inserted a verification (ok, dated 2027) while verify was failing, and
    the explorer showed "intact". Rows are signed by ``audit verify`` with the checkpoint key;
    the console shows the newest one whose signature it can check, and says that a newer one
    cannot be checked. A signed statement copied under a later date does not pass either."""
    earlier = ChainVerification.objects.order_by("-ran_at", "-id").first()
    assert earlier is not None and status.verified(earlier) is not None and earlier.ok
    target = more_events(submission, 1)[0]
    rows = ConsoleEvent.objects.filter(id=target.id)
    with append_only_lifted(CONSOLE_TABLE):
        try:
            rows.update(note="nothing happened here")
            done = audit_verify()
        finally:
            rows.update(note=target.note)
    assert target.id in broken_at(done)
    forged = ChainVerification.objects.bulk_create(
        [
            ChainVerification(
                ran_at=datetime(2027, 1, 1, tzinfo=UTC), ok=True, checked=1, first_break=""
            ),
            ChainVerification(  # the intact run's signed statement, under a later date
                ran_at=datetime(2027, 1, 2, tzinfo=UTC),
                ok=True,
                checked=earlier.checked,
                first_break="",
                statement=earlier.statement,
                key_id=earlier.key_id,
                signature=earlier.signature,
            ),
        ]
    )
    try:
        page = console_as(people["auditor"]).get("/audit")
        shown = text_of(element(page.text, r'<p class="callout [^"]*" id="chain-status">.*?</p>'))
        warning = element(
            page.text, r'<p class="callout danger" id="chain-status-unsigned">.*?</p>'
        )
    finally:
        with append_only_lifted(VERIFICATION_TABLE):
            ChainVerification.objects.filter(id__in=[row.id for row in forged]).delete()
    assert "BROKEN" in shown and target.id in shown
    assert "intact" not in shown
    assert 'datetime="2027-01-02T00:00:00Z"' in warning
    assert "carries no signature this console can check" in text_of(warning)


def test_without_keys_no_result_is_recorded_or_shown(live_db: None) -> None:
    """A verification run where no signing key is held records nothing (it would be worth no
    more than a row written by hand); a console without a key to check shows no result."""
    rows = ChainVerification.objects.count()
    try:
        with override_settings(ORBIT_AUDIT_SIGNING_KEYS=[], ORBIT_AUDIT_VERIFY_KEYS=[]):
            signing._signing_keys.cache_clear()
            signing._verify_keys.cache_clear()
            assert status.record(verify(Reading()), timezone.now()) is None
            assert status.chain_status() == status.ChainStatus(can_check=False)
    finally:
        signing._signing_keys.cache_clear()
        signing._verify_keys.cache_clear()
    assert ChainVerification.objects.count() == rows
    assert status.chain_status().can_check
