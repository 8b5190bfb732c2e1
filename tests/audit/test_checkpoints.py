"""Signed checkpoints (issue 13, part 2): ``manage.py audit checkpoint`` signs the heads of the
audit chains into a folder outside the database, and ``manage.py audit verify`` holds the tables
against them.

Each tamper class is done here as someone with the application's database rights would do it
(``TRUNCATE`` on MariaDB, where it skips the append-only triggers; on SQLite, which has no
``TRUNCATE``, with the triggers lifted), and verification must name it. The exact rows are then
put back in ``finally`` blocks, and the chains are checked whole again. Each test writes its
checkpoints to a folder of its own: the test database is shared, the folders are not, so each
test starts and ends with the database's list of checkpoints empty (``forget_checkpoints``).
"""

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Model
from django.test import override_settings
from django.utils import timezone

from orbit_console.audit import chains, checkpoints, signing
from orbit_console.audit.chains import Head
from orbit_console.audit.checkpoints import Checkpoint, CheckpointError, Reading
from orbit_console.audit.models import MovedChain, WrittenCheckpoint
from orbit_console.audit.verify import verify
from orbit_console.decisions.chain import CONSOLE_CHAIN
from orbit_console.decisions.models import ChainHead, ConsoleEvent, Submission
from orbit_console.decisions.submissions import record_event
from orbit_console.ledger import chain as ledger_chain
from orbit_console.ledger import journal
from orbit_console.ledger.models import OperationAudit, Task
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc
from tests.audit.conftest import (
    AUDIT_TABLE,
    CONSOLE_TABLE,
    WRITTEN_TABLE,
    append_only_lifted,
    execute,
    forget_checkpoints,
    more_events,
    verify_output,
)
from tests.console.web import element, text_of
from tests.support.orbit import post, review_body
from tests.support.servers import child_env, run_manage


@pytest.fixture
def folder(tmp_path: Path, live_db: None) -> Iterator[Path]:
    """This test's checkpoint folder, for this process and the commands it runs."""
    path = tmp_path / "checkpoints"
    forget_checkpoints()
    try:
        with override_settings(ORBIT_AUDIT_CHECKPOINT_DIR=path):
            yield path
    finally:
        forget_checkpoints()
    assert whole(), "a test did not put back what it changed"


def whole() -> bool:
    """The chains are intact on their own (no checkpoint involved)."""
    return verify(Reading()).problems == []


def problems() -> list[str]:
    return verify(checkpoints.read()).problems


def signed_now() -> Checkpoint:
    written = checkpoints.write()
    assert written is not None
    return written


def newest_record(task_id: str) -> OperationAudit:
    return OperationAudit.objects.filter(task_id=task_id).order_by("-seq")[0]


@contextmanager
def restored(model: type[Model], rows: list[Any]) -> Iterator[None]:
    """Whatever happens to ``rows`` inside, they are inserted again afterwards (those that are
    missing)."""
    try:
        yield
    finally:
        present = set(
            model._default_manager.filter(pk__in=[row.pk for row in rows]).values_list(
                "pk", flat=True
            )
        )
        model._default_manager.bulk_create([row for row in rows if row.pk not in present])


@contextmanager
def head_kept() -> Iterator[None]:
    head = ChainHead.objects.get(name=CONSOLE_CHAIN)
    try:
        yield
    finally:
        ChainHead.objects.filter(name=CONSOLE_CHAIN).update(seq=head.seq, last_hash=head.last_hash)


def empty(*tables: str) -> None:
    """Empty ``tables`` the quickest way the database offers the application's user."""
    if connection.vendor == "mysql":
        execute(*(f"TRUNCATE TABLE {table}" for table in tables))  # the triggers never fire
    else:
        with append_only_lifted(*tables):
            execute(*(f"DELETE FROM {table}" for table in tables))  # noqa: S608 -- our names


def test_the_commands_sign_the_heads_and_verify_holds_the_tables_to_them(
    folder: Path, world: dict[str, Any], api: httpx.Client
) -> None:
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    first = run_manage("audit", "checkpoint", env=env)
    assert first.returncode == 0, verify_output(first)
    assert f"checkpoint 1 written to {folder / '00000001.json'}" in first.stdout
    document = json.loads((folder / "00000001.json").read_text())
    payload = document["checkpoint"]
    assert (payload["number"], payload["previous"]) == (1, "")
    assert payload["database"] == checkpoints.database_label()  # the commands' and ours agree
    signed = {chain: (seq, link) for chain, seq, link in payload["heads"]["ledger"]}
    for task_id in world["tasks"].values():
        record = newest_record(task_id)
        assert signed[task_id] == (record.seq, record.entry_hash)

    task_id = world["tasks"]["needs_review"]
    reviewed = post(api, task_id, "review", world["tokens"]["admin"], review_body())
    assert reviewed.status_code == 200, reviewed.text
    second = run_manage("audit", "checkpoint", env=env)
    assert "checkpoint 2 written" in second.stdout and "1 head(s) moved" in second.stdout
    payload = json.loads((folder / "00000002.json").read_text())["checkpoint"]
    record = newest_record(task_id)
    assert payload["heads"] == {"ledger": [[task_id, record.seq, record.entry_hash]]}
    first_bytes = (folder / "00000001.json").read_bytes()
    assert payload["previous"] == hashlib.sha256(first_bytes).hexdigest()

    done = run_manage("audit", "verify", env=env)
    assert done.returncode == 0, verify_output(done)
    assert "checkpoints: 2, the newest 2 of " in done.stdout and ", intact" in done.stdout


def test_verify_without_a_checkpoint_checks_the_tables_and_says_so(folder: Path) -> None:
    done = run_manage("audit", "verify", env=child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder)))
    assert done.returncode == 0, verify_output(done)
    assert f"checkpoints: none yet in {folder}" in done.stdout


def test_emptied_tables_are_named(
    folder: Path, world: dict[str, Any], submission: Submission
) -> None:
    """The issue's TRUNCATE: the tables alone then look intact; the checkpoint names every
    chain that vanished, and the command exits 1."""
    more_events(submission, 2)
    signed = signed_now()
    console_head = ChainHead.objects.get(name=CONSOLE_CHAIN)
    rows = list(ConsoleEvent.objects.all()), list(OperationAudit.objects.all())
    with restored(ConsoleEvent, rows[0]), restored(OperationAudit, rows[1]):
        empty(CONSOLE_TABLE, AUDIT_TABLE)
        assert OperationAudit.objects.count() == ConsoleEvent.objects.count() == 0
        unanchored = verify(Reading()).problems
        found = problems()
        done = run_manage("audit", "verify", env=child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder)))

    # Without a checkpoint only the console's head row notices (and it can be reset too).
    assert not any("ledger audit" in problem for problem in unanchored)
    removed = "but the table has none of its {}; they were removed"
    assert (
        f"console record: checkpoint {signed.number} signed it at seq {console_head.seq}, "
        + removed.format("entries")
    ) in found
    for task_id in world["tasks"].values():
        seq = newest_record(task_id).seq
        assert (
            f"ledger audit of task {task_id}: checkpoint {signed.number} signed it at seq "
            f"{seq}, " + removed.format("records")
        ) in found
    assert done.returncode == 1, verify_output(done)
    assert "ledger audit: 0 records, BROKEN" in done.stdout
    assert "console record: 0 entries, BROKEN" in done.stdout
    assert f"problems: {len(found)}" in done.stdout


def test_all_records_of_one_task_deleted_are_named(folder: Path, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["failed"]
    head = newest_record(task_id)
    signed = signed_now()
    rows = list(OperationAudit.objects.filter(task_id=task_id))
    with restored(OperationAudit, rows), append_only_lifted(AUDIT_TABLE):
        OperationAudit.objects.filter(task_id=task_id).delete()
        assert whole()  # every remaining chain is consistent in itself
        found = problems()
    assert found == [
        f"ledger audit of task {task_id}: checkpoint {signed.number} signed it at seq "
        f"{head.seq}, but the table has none of its records; they were removed"
    ]


def test_records_removed_from_the_end_of_a_task_chain_are_named(
    folder: Path, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    head = newest_record(task_id)
    signed_now()
    with restored(OperationAudit, [head]), append_only_lifted(AUDIT_TABLE):
        OperationAudit.objects.filter(id=head.id).delete()
        assert whole()
        found = problems()
    assert found == [
        f"ledger audit of task {task_id}: checkpoint 1 signed it at seq {head.seq}, but it "
        f"ends at seq {head.seq - 1}; records at its end were removed"
    ]


def test_a_removal_signed_by_a_later_checkpoint_is_still_named(
    folder: Path, world: dict[str, Any]
) -> None:
    """Issue 39: someone with database rights but no key removes a task's newest record and
    inserts a mark for its chain (the runtime user may); the checkpoint job, which signs the
    head a marked chain has, then signs the lower one. Before, verify held each chain to its
    newest signed head only, and passed; every head a checkpoint in effect signed holds."""
    task_id = world["tasks"]["needs_review"]
    head = newest_record(task_id)
    signed_now()
    with restored(OperationAudit, [head]), append_only_lifted(AUDIT_TABLE):
        OperationAudit.objects.filter(id=head.id).delete()
        chains.moved("ledger", task_id)
        lower = signed_now()
        found = problems()
    assert [(h.chain, h.seq) for h in lower.heads["ledger"]] == [(task_id, head.seq - 1)]
    assert found == [
        f"ledger audit of task {task_id}: checkpoint 1 signed it at seq {head.seq}, but it "
        f"ends at seq {head.seq - 1}; records at its end were removed"
    ]


def test_a_checkpoint_signs_the_heads_of_one_moment(
    folder: Path, submission: Submission, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39: a checkpoint reads the marks and the heads in one snapshot. An entry
    committed while it reads is not signed, and stays marked for the next one; read query
    after query, its head was signed though its mark was not read. Declared restores rely on
    it: what a checkpoint did not sign was written after it (``audit/rewinds.py``)."""
    before = more_events(submission, 1)[0]
    written: list[ConsoleEvent] = []
    moved_heads = checkpoints._moved_heads

    def meanwhile(*args: Any, **kwargs: Any) -> dict[str, list[Head]]:
        def write() -> None:
            try:
                written.extend(more_events(submission, 1))
            finally:
                connection.close()  # this thread's own

        writer = threading.Thread(target=write)
        writer.start()
        writer.join()
        return moved_heads(*args, **kwargs)

    monkeypatch.setattr(checkpoints, "_moved_heads", meanwhile)
    first = signed_now()
    monkeypatch.undo()
    assert len(written) == 1
    assert first.heads["console"] == [Head(CONSOLE_CHAIN, before.seq, before.entry_hash)]
    assert MovedChain.objects.filter(family="console").exists()
    second = signed_now()
    assert second.heads["console"] == [Head(CONSOLE_CHAIN, written[0].seq, written[0].entry_hash)]


def test_a_console_head_moved_back_with_its_entries_is_named(
    folder: Path, submission: Submission
) -> None:
    """The head row is writable: someone removes the last entries and sets the head to match.
    The chain is then consistent in itself; the checkpoint is not fooled."""
    *kept, removed_1, removed_2 = more_events(submission, 3)
    signed_now()
    with head_kept(), restored(ConsoleEvent, [removed_1, removed_2]):
        with append_only_lifted(CONSOLE_TABLE):
            ConsoleEvent.objects.filter(id__in=[removed_1.id, removed_2.id]).delete()
        ChainHead.objects.filter(name=CONSOLE_CHAIN).update(
            seq=kept[-1].seq, last_hash=kept[-1].entry_hash
        )
        assert whole()
        found = problems()
    assert found == [
        f"console record: checkpoint 1 signed it at seq {removed_2.seq}, but it ends at seq "
        f"{kept[-1].seq}; entries at its end were removed"
    ]


def test_a_chain_relinked_with_the_audit_key_is_named(folder: Path, world: dict[str, Any]) -> None:
    """Someone who holds the audit key changes a reason and links the rest of the chain anew:
    every link verifies, but the head no longer is the one that was signed. Marked (the
    runtime user may insert a mark), the re-linked head is signed by the next checkpoint: the
    first one still holds (issue 39; before, only the newest signed head was checked)."""
    task_id = world["tasks"]["needs_review_2"]
    chain = list(OperationAudit.objects.filter(task_id=task_id).order_by("seq"))
    originals = [OperationAudit.objects.get(id=record.id) for record in chain]
    signed_now()
    try:
        with append_only_lifted(AUDIT_TABLE):
            chain[0].reason = "a reason nobody gave"
            previous = ""
            for record in chain:
                record.prev_hash = previous
                record.entry_hash = previous = ledger_chain.entry_hash(record)
                record.save(update_fields=["reason", "prev_hash", "entry_hash"])
            assert whole()
            found = problems()
            chains.moved("ledger", task_id)
            relinked = signed_now()
            assert relinked.heads["ledger"] == [Head(task_id, chain[-1].seq, chain[-1].entry_hash)]
            assert problems() == found
    finally:
        with append_only_lifted(AUDIT_TABLE):
            for original in originals:
                original.save(update_fields=["reason", "prev_hash", "entry_hash"])
    head = chain[-1]
    assert found == [
        f"ledger audit of task {task_id}, record {head.id} (seq {head.seq}): is not what "
        "checkpoint 1 signed at this number; the chain was re-linked"
    ]


def test_an_altered_checkpoint_is_named(folder: Path, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["failed"]
    signed_now()
    path = folder / "00000001.json"
    document = json.loads(path.read_text())
    for head in document["checkpoint"]["heads"]["ledger"]:
        if head[0] == task_id:
            head[1] -= 1  # as if the chain had been one shorter
    path.write_text(json.dumps(document))
    found = problems()
    assert found == ["checkpoint 1 (00000001.json): its signature does not verify; it was altered"]
    with pytest.raises(CheckpointError, match="does not verify"):
        checkpoints.write()  # nothing is built on a checkpoint that does not verify

    path.write_text("{not json")
    assert problems() == [
        "checkpoint file 00000001.json: not a readable checkpoint "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    ]


def test_missing_and_replaced_checkpoints_are_named(folder: Path) -> None:
    for _ in range(5):
        signed_now()
    assert problems() == []
    (folder / "00000002.json").unlink()
    (folder / "00000005.json").unlink()
    assert problems() == [
        "checkpoint 2 missing from the folder (known from checkpoint 1)",
        "checkpoint 5 missing from the folder (known from the database's list of checkpoints)",
    ]
    (folder / "00000001.json").unlink()
    assert problems()[0] == (
        "checkpoints 1 to 2 missing from the folder (known from the oldest present)"
    )

    # A checkpoint replaced by another correctly signed one (of another series) is named.
    other = folder.parent / "other"
    with override_settings(ORBIT_AUDIT_CHECKPOINT_DIR=other):
        checkpoints.write(new_series="a second series, for this test")
        for _ in range(3):
            signed_now()
    (folder / "00000004.json").write_bytes((other / "00000004.json").read_bytes())
    assert "checkpoint 4 (00000004.json): belongs to another series of checkpoints" in problems()


def test_checkpoints_of_another_database_are_refused(folder: Path) -> None:
    signed_now()
    original = connection.settings_dict["NAME"]  # the label comes from the connection's settings
    connection.settings_dict["NAME"] = "another-database"
    try:
        with pytest.raises(CheckpointError, match="point ORBIT_AUDIT_CHECKPOINT_DIR"):
            checkpoints.write()
        found = checkpoints.read().problems
    finally:
        connection.settings_dict["NAME"] = original
    assert len(found) == 1 and "describes the database" in found[0]
    assert "not this one" in found[0] and "another-database" in found[0]


def test_keys_rotate_and_a_checkpoint_of_a_key_not_held_is_named(folder: Path) -> None:
    """A checkpoint is only as good as the key that checks it: another installation's key
    cannot pass for this one's; the public key alone verifies."""
    signed_now()
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    public = run_manage("audit", "public-key", env=env).stdout.split()
    assert len(public) == 1
    stranger = "A" * 43
    unknown = run_manage("audit", "verify", env={**env, "ORBIT_AUDIT_SIGNING_KEYS": stranger})
    assert unknown.returncode == 1
    assert "which this installation does not hold" in unknown.stdout
    # The new key signs, the old one's public key still verifies what it signed.
    rotated = {**env, "ORBIT_AUDIT_SIGNING_KEYS": stranger, "ORBIT_AUDIT_VERIFY_KEYS": public[0]}
    written = run_manage("audit", "checkpoint", env=rotated)
    assert "checkpoint 2 written" in written.stdout, verify_output(written)
    done = run_manage("audit", "verify", env=rotated)
    assert done.returncode == 0, verify_output(done)


def test_the_periodic_job_writes_when_heads_move_and_stops_on_sigterm(
    folder: Path, world: dict[str, Any], api: httpx.Client
) -> None:
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    job = subprocess.Popen(
        [sys.executable, "manage.py", "audit", "checkpoint", "--every", "0.2"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: (folder / "00000001.json").exists())
        time.sleep(1)  # five rounds with nothing new: no checkpoint
        assert sorted(path.name for path in folder.glob("*.json")) == ["00000001.json"]
        task_id = world["tasks"]["needs_review"]
        reviewed = post(api, task_id, "review", world["tokens"]["admin"], review_body())
        assert reviewed.status_code == 200, reviewed.text
        wait_for(lambda: (folder / "00000002.json").exists())
        payload = json.loads((folder / "00000002.json").read_text())["checkpoint"]
        assert [head[0] for head in payload["heads"]["ledger"]] == [task_id]
    finally:
        job.send_signal(signal.SIGTERM)
        stdout, stderr = job.communicate(timeout=30)
    assert job.returncode == 0, stdout + stderr
    assert "checkpoint 2 written" in stdout
    assert problems() == []


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_checkpoint_file_is_written_whole_and_never_over_another(folder: Path) -> None:
    signed = signed_now()
    assert [path.name for path in folder.iterdir() if path.name.startswith(".writing")] == []
    with pytest.raises(FileExistsError):
        checkpoints._create(signed.path, b"{}")
    assert checkpoints.read().problems == []


def test_the_periodic_job_outlives_a_failing_round(
    folder: Path, world: dict[str, Any], api: httpx.Client, tmp_path: Path
) -> None:
    """A round that fails (here: the newest checkpoint no longer verifies, so nothing may be
    built on it) is logged and tried again; once the fault is gone the job goes on by itself."""
    signed_now()
    newest = folder / "00000001.json"
    kept = newest.read_bytes()
    newest.write_text("{}")
    log = tmp_path / "job.log"
    with log.open("w") as out:
        job = subprocess.Popen(
            [sys.executable, "manage.py", "audit", "checkpoint", "--every", "0.2"],
            cwd=settings.BASE_DIR,
            env=child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder)),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: log.read_text().count("this round failed; again in") >= 2)
        assert job.poll() is None, "the job died on a failing round"
        assert "does not verify" in log.read_text()
        newest.write_bytes(kept)
        task_id = world["tasks"]["needs_review"]
        reviewed = post(api, task_id, "review", world["tokens"]["admin"], review_body())
        assert reviewed.status_code == 200, reviewed.text
        wait_for(lambda: (folder / "00000002.json").exists())
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
    assert job.returncode == 0, log.read_text()
    assert problems() == []


def test_the_explorer_names_the_newest_checkpoint(
    folder: Path, console_as: Callable[..., Any], people: dict[str, Any]
) -> None:
    written = signed_now()
    page = console_as(people["auditor"]).get("/audit")
    status = text_of(element(page.text, r'<p class="muted" id="checkpoint-status">.*?</p>'))
    assert f"Newest signed checkpoint of the chains' heads: number {written.number}," in status


# --- Issue 29: blind spots -----------------------------------------------------------------------


def written_files(path: Path) -> list[str]:
    return sorted(file.name for file in path.glob("*.json")) if path.is_dir() else []


def test_a_lost_folder_fails_verification_and_the_job_will_not_start_over_it(
    folder: Path, world: dict[str, Any]
) -> None:
    """Issue 29 (a): the folder moved away while the database lists four checkpoints, and a
    whole checkpointed chain deleted. verify used to say "none yet" and exit 0, and the job
    started a new series over the lost one."""
    for _ in range(4):
        signed = signed_now()
    task_id = world["tasks"]["failed"]
    rows = list(OperationAudit.objects.filter(task_id=task_id))
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    moved_away = folder.with_name("moved-away")
    folder.rename(moved_away)
    try:
        with restored(OperationAudit, rows), append_only_lifted(AUDIT_TABLE):
            OperationAudit.objects.filter(task_id=task_id).delete()
            done = run_manage("audit", "verify", env=env)
        job = run_manage("audit", "checkpoint", env=env)
        with pytest.raises(CheckpointError, match="holds no checkpoint"):
            checkpoints.write(force=False)  # the periodic job's round
        assert written_files(folder) == []
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        moved_away.rename(folder)

    output = verify_output(done)
    assert done.returncode == 1, output
    assert "none yet" not in output
    assert f"checkpoints: none readable in {folder}, BROKEN" in done.stdout
    assert (
        f"{folder} holds no checkpoint, but the database's list of checkpoints names "
        "checkpoints as written: the folder was lost or moved" in done.stdout
    )
    assert (
        f"checkpoints 1 to 4 of series {signed.series} missing from the folder (known from the "
        "database's list of checkpoints)" in done.stdout
    )
    assert job.returncode != 0, verify_output(job)
    assert f"the database lists checkpoints up to 4 of series {signed.series}" in job.stderr
    assert "--new-series" in job.stderr
    # Back in place, the folder names the deleted chain; nothing was written meanwhile.
    assert written_files(folder) == [f"0000000{n}.json" for n in range(1, 5)]
    assert problems() == []


def test_the_job_will_not_write_over_newest_checkpoints_that_went_missing(folder: Path) -> None:
    """Issue 29 (a): files removed from the end of the folder (or an older copy restored): the
    job refuses, rather than write another checkpoint 4 than the one the database lists."""
    for _ in range(4):
        signed_now()
    (folder / "00000004.json").unlink()
    with pytest.raises(CheckpointError, match="lists checkpoints up to 4 of its series"):
        checkpoints.write(force=False)
    assert written_files(folder) == ["00000001.json", "00000002.json", "00000003.json"]
    assert problems() == [
        "checkpoint 4 missing from the folder (known from the database's list of checkpoints)"
    ]


def test_an_operator_starts_a_new_series_over_a_lost_one_and_says_why(
    folder: Path, world: dict[str, Any]
) -> None:
    """Issue 29 (a): only an explicit command starts over, in an empty folder; its first
    checkpoint signs the reason and the series it gives up, and verification then holds."""
    for _ in range(3):
        lost = signed_now()
    shutil.rmtree(folder)
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    reason = "the checkpoint volume was destroyed (incident 42)"

    no_reason = run_manage("audit", "checkpoint", "--new-series", " ", env=env)
    assert no_reason.returncode != 0
    assert "a new series needs the reason it is started" in no_reason.stderr
    started = run_manage("audit", "checkpoint", "--new-series", reason, env=env)
    assert started.returncode == 0, verify_output(started)
    assert f"checkpoint 1 written to {folder / '00000001.json'}" in started.stdout
    payload = json.loads((folder / "00000001.json").read_text())["checkpoint"]
    assert payload["gives_up"] == [[lost.series, 3, lost.digest]]
    assert payload["reason"] == reason and payload["complete"] is True
    assert payload["series"] != lost.series
    signed = {chain: seq for chain, seq, _ in payload["heads"]["ledger"]}
    assert signed[world["tasks"]["failed"]] == newest_record(world["tasks"]["failed"]).seq

    again = run_manage("audit", "checkpoint", "--new-series", reason, env=env)
    assert again.returncode != 0 and "starts only in an empty folder" in again.stderr
    done = run_manage("audit", "verify", env=env)
    assert done.returncode == 0, verify_output(done)
    assert (
        f"this series was started over lost ones on {payload['taken_at']}: gives up series "
        f"{lost.series} (to checkpoint 3); reason: {reason}"
    ) in done.stdout
    assert checkpoints.write(force=False) is None  # the job goes on from the new series


def test_a_record_whose_clock_was_behind_is_signed_by_the_next_checkpoint(
    folder: Path, world: dict[str, Any]
) -> None:
    """Issue 29 (c): a review written by a process whose clock was 30 minutes behind fell
    before the checkpoint's window of time and was never signed; deleting it went unseen."""
    task_id = world["tasks"]["needs_review"]
    signed_now()
    with transaction.atomic():
        task = Task.objects.select_for_update().get(id=task_id)
        late = journal.write_audit(
            task=task,
            operation_id=new_id(),
            actor_id=new_id(),
            action="task.review",
            reason="written by a process whose clock is 30 minutes behind",
            evidence_ref=None,
            before=None,
            after={"state": task.state},
            now=timezone.now() - timedelta(minutes=30),
        )
    second = signed_now()
    assert second.heads["ledger"] == [Head(task_id, late.seq, late.entry_hash)]
    with restored(OperationAudit, [late]), append_only_lifted(AUDIT_TABLE):
        OperationAudit.objects.filter(id=late.id).delete()
        found = problems()
    assert found == [
        f"ledger audit of task {task_id}: checkpoint 2 signed it at seq {late.seq}, but it "
        f"ends at seq {late.seq - 1}; records at its end were removed"
    ]


def test_a_console_entry_whose_clock_was_behind_is_signed_by_the_next_checkpoint(
    folder: Path, submission: Submission
) -> None:
    """Issue 29 (c), the console's chain: its newest entry was skipped when its time fell
    before the window, so removing it with the head row moved back went unseen."""
    kept = more_events(submission, 1)[0]
    signed_now()
    late = record_event(
        "submission.sent",
        submission=submission,
        actor=None,
        note="written by a process whose clock is 30 minutes behind",
        now=timezone.now() - timedelta(minutes=30),
    )
    second = signed_now()
    assert second.heads["console"] == [Head(CONSOLE_CHAIN, late.seq, late.entry_hash)]
    with head_kept(), restored(ConsoleEvent, [late]):
        with append_only_lifted(CONSOLE_TABLE):
            ConsoleEvent.objects.filter(id=late.id).delete()
        ChainHead.objects.filter(name=CONSOLE_CHAIN).update(seq=kept.seq, last_hash=kept.entry_hash)
        found = problems()
    assert found == [
        f"console record: checkpoint 2 signed it at seq {late.seq}, but it ends at seq "
        f"{kept.seq}; entries at its end were removed"
    ]


def test_a_checkpoint_removes_the_marks_it_signed_and_a_removed_mark_is_named(
    folder: Path, world: dict[str, Any], api: httpx.Client
) -> None:
    """Issue 29 (c): what the next checkpoint signs is what the writers marked. A mark removed
    before its chain was signed would let the record go unsigned for good: verify names it."""
    signed_now()
    assert not MovedChain.objects.exists()
    task_id = world["tasks"]["needs_review"]
    reviewed = post(api, task_id, "review", world["tokens"]["admin"], review_body())
    assert reviewed.status_code == 200, reviewed.text
    record = newest_record(task_id)
    assert list(MovedChain.objects.values_list("family", "chain")) == [("ledger", task_id)]
    assert problems() == []  # not signed yet, but marked

    MovedChain.objects.filter(chain=task_id).delete()  # the runtime user may: rows, not DDL
    assert problems() == [
        f"ledger audit of task {task_id}: the record at seq {record.seq} is signed by no "
        "checkpoint, and the chain is not marked for the next one; its mark was removed"
    ]
    assert checkpoints.write(force=False) is None  # nothing marked: the job signs nothing
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    done = run_manage("audit", "checkpoint", "--complete", env=env)  # the runbook's answer
    assert done.returncode == 0, verify_output(done)
    payload = json.loads((folder / "00000002.json").read_text())["checkpoint"]
    assert payload["complete"] is True
    assert [task_id, record.seq, record.entry_hash] in payload["heads"]["ledger"]
    assert problems() == []

    chains.moved("ledger", task_id)  # a chain signed as it is: nothing more to sign
    third = signed_now()
    assert third.heads == {} and not MovedChain.objects.exists()


def test_the_first_checkpoint_after_format_1_signs_every_chain(
    folder: Path, world: dict[str, Any]
) -> None:
    """Checkpoints of format 1 chose heads by the records' times, and no record of theirs was
    marked: the first checkpoint after them lists every chain's head, whatever moved."""
    payload = {
        "format": "orbit-audit-checkpoint/1",
        "series": new_id(),
        "number": 1,
        "taken_at": format_utc(timezone.now()),
        "previous": "",
        "database": checkpoints.database_label(),
        "heads": {},
    }
    key_id, signature = signing.sign(checkpoints._message(payload))
    folder.mkdir()
    document = {"checkpoint": payload, "key_id": key_id, "signature": signature}
    (folder / "00000001.json").write_text(json.dumps(document))
    MovedChain.objects.all().delete()  # as if nothing had moved

    second = signed_now()
    assert (second.number, second.version, second.complete) == (2, 2, True)
    signed = {head.chain for head in second.heads["ledger"]}
    assert set(world["tasks"].values()) <= signed
    assert problems() == []


def test_a_row_of_the_list_written_by_hand_is_named_and_not_shown(
    folder: Path, console_as: Callable[..., Any], people: dict[str, Any]
) -> None:
    """Issue 29 (b): the runtime user inserted a checkpoint 999 into the database's list; the
    explorer showed it as the newest signed checkpoint. Its signature does not verify: verify
    names it, the explorer shows the newest one it can check, and the job is not held up."""
    written = signed_now()
    forged = WrittenCheckpoint.objects.create(
        series=written.series,
        number=999,
        digest="0" * 64,
        taken_at=datetime(2027, 1, 1, tzinfo=UTC),
        key_id=written.key_id,
        signature=written.key_id.ljust(86, "A") + "==",
    )
    try:
        assert problems() == [
            f"the database's list of checkpoints names checkpoint 999 of series "
            f"{written.series}, but the row's signature does not verify; it was written by hand"
        ]
        page = console_as(people["auditor"]).get("/audit")
        status = text_of(element(page.text, r'<p class="muted" id="checkpoint-status">.*?</p>'))
        assert f"number {written.number}," in status and "999" not in status
        warning = element(
            page.text, r'<p class="callout danger" id="checkpoint-status-unsigned">.*?</p>'
        )
        assert "numbers 999" in text_of(warning)
        assert signed_now().number == written.number + 1
    finally:
        with append_only_lifted(WRITTEN_TABLE):
            WrittenCheckpoint.objects.filter(id=forged.id).delete()
