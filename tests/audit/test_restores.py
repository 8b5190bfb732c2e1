"""Declared restores (issue 34, drill 3's fast subset): a database restored from a backup ends
its chains where the backup did, short of what later checkpoints signed. ``manage.py audit
declare-restore`` says so, signed, and ``audit verify`` then names the rewind as a declared
restore and passes; the same rewind undeclared is still named as records removed, and fails.

A declaration is accepted only for one moment of the history, rewound (issue 39 item 2,
``audit/rewinds.py``): a database that keeps what was written after something it lacks, or
whose chains are not prefixes of what the set-aside checkpoints signed, is no backup, and a
declaration would hide what it lacks. Each such shape is refused here, by the command, and
named by ``audit verify`` when a declaration was written without the check.

The restore is played on the test database: the entries made after the backup's checkpoint are
removed, the console's head row moved back and the list's row of the later checkpoint removed,
as the backup holds them (the triggers lifted for that moment, as in test_checkpoints.py). The
rows are put back afterwards.
"""

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from orbit_console.audit import checkpoints, restores
from orbit_console.audit.chains import Head
from orbit_console.audit.checkpoints import CheckpointError, Restore
from orbit_console.audit.models import WrittenCheckpoint
from orbit_console.decisions.chain import CONSOLE_CHAIN
from orbit_console.decisions.models import ChainHead, ConsoleEvent, Submission
from orbit_console.ledger.models import OperationAudit
from tests.audit.conftest import (
    AUDIT_TABLE,
    CONSOLE_TABLE,
    WRITTEN_TABLE,
    append_only_lifted,
    more_events,
    verify_output,
)
from tests.audit.test_checkpoints import folder, head_kept, problems, restored, signed_now
from tests.support.servers import child_env, run_manage
from tests.support.worlds import new_task

__all__ = ["folder"]  # the fixture, shared with test_checkpoints.py


def audit(*args: str) -> tuple[int, str]:
    """``manage.py audit ARGS`` in this process (the suite's fast subset: no process start),
    its exit code and output."""
    out = io.StringIO()
    try:
        call_command("audit", *args, stdout=out, stderr=out)
    except SystemExit as leaving:
        return int(leaving.code or 0), out.getvalue()
    except CommandError as error:
        return 1, out.getvalue() + str(error)
    return 0, out.getvalue()


@contextmanager
def restored_from_backup(
    kept: ConsoleEvent, after: list[ConsoleEvent], checkpoint: int
) -> Iterator[None]:
    """The database as a backup taken at checkpoint ``checkpoint - 1`` holds it: ``after``
    gone, the head at ``kept``, checkpoint ``checkpoint`` not listed."""
    # The list's row is not put back: the declaration lists that checkpoint again (it is in the
    # folder), and the folder fixture empties the list afterwards.
    with head_kept(), restored(ConsoleEvent, after):
        with append_only_lifted(CONSOLE_TABLE, WRITTEN_TABLE):
            ConsoleEvent.objects.filter(id__in=[e.id for e in after]).delete()
            WrittenCheckpoint.objects.filter(number=checkpoint).delete()
        ChainHead.objects.filter(name=CONSOLE_CHAIN).update(seq=kept.seq, last_hash=kept.entry_hash)
        yield


def test_a_declared_restore_passes_verify_and_an_undeclared_rewind_fails(
    folder: Path, submission: Submission
) -> None:
    *_, kept = more_events(submission, 2)
    signed_now()  # checkpoint 1: the backup is taken just after it
    after = more_events(submission, 2)
    signed_now()  # checkpoint 2: signs what the restore will not hold
    with restored_from_backup(kept, after, 2):
        code, undeclared = audit("verify")
        assert code == 1, undeclared
        assert (
            f"console record: checkpoint 2 signed it at seq {after[-1].seq}, but it ends at seq "
            f"{kept.seq}; entries at its end were removed"
        ) in undeclared
        assert "declared restore" not in undeclared

        code, declared = audit("declare-restore", "--checkpoint", "1", "--reason", "disk lost")
        assert code == 0, declared
        assert "checkpoint 3 written" in declared
        assert "restored from a backup holding checkpoint 1" in declared

        code, done = audit("verify")
        assert code == 0, done
        assert "checkpoints: 3, the newest 3 of " in done
        assert (
            "declares the database restored from a backup holding checkpoint 1; what "
            "checkpoint 2 signed after it was rewound by the restore, not tampered with; "
            "reason: disk lost"
        ) in done
        assert "problems" not in done

        # After the declaration, removing what it signed is tampering again.
        with restored(ConsoleEvent, [kept]), append_only_lifted(CONSOLE_TABLE):
            ConsoleEvent.objects.filter(id=kept.id).delete()
            found = problems()
        assert (
            f"console record: checkpoint 3 signed it at seq {kept.seq}, but it ends at seq "
            f"{kept.seq - 1}; entries at its end were removed"
        ) in found


def test_a_restore_that_lacks_what_its_checkpoint_signed_is_not_declared(
    folder: Path, submission: Submission
) -> None:
    *_, older, kept = more_events(submission, 3)
    signed_now()  # checkpoint 1 signs ``kept``
    after = more_events(submission, 1)
    signed_now()
    with restored_from_backup(older, [kept, *after], 2):
        with pytest.raises(CheckpointError, match="does not hold what checkpoint 1 signed"):
            restores.declare(reason="a backup older than it says", to=1)
        with pytest.raises(CheckpointError, match="checkpoint 2 is the newest"):
            restores.declare(reason="nothing rewound", to=2)
        found = problems()
    assert len(found) == 1 and "entries at its end were removed" in found[0]
    assert "declared restore" not in " ".join(found)


def written_after_a_new_chain(
    world: dict[str, Any], submission: Submission
) -> tuple[list[OperationAudit], ConsoleEvent]:
    """Checkpoint 1; then task X's whole chain, signed by checkpoint 2; then an entry of the
    console's record written after it (a proposal's, say), signed by checkpoint 3."""
    signed_now()
    task_x = new_task(world, "failed")
    signed_now()
    later = more_events(submission, 1)[0]
    signed_now()
    return list(OperationAudit.objects.filter(task_id=task_x).order_by("seq")), later


@contextmanager
def removed(rows: list[OperationAudit]) -> Iterator[None]:
    """``rows`` deleted (as only someone with DDL rights can), put back afterwards."""
    with restored(OperationAudit, rows):
        with append_only_lifted(AUDIT_TABLE):
            OperationAudit.objects.filter(id__in=[row.id for row in rows]).delete()
        yield


def kept_after(chain: list[OperationAudit], later: ConsoleEvent, *, by: int) -> str:
    """How the rule names ``later``, kept while ``chain`` (signed by checkpoint ``by``) is
    gone."""
    return (
        f"console record: the restored database keeps it to seq {later.seq}, but checkpoint "
        f"{by} left it at seq {later.seq - 1}, and signed ledger audit of task "
        f"{chain[0].task_id} from seq 1 to {chain[-1].seq}, which the restored database lacks: "
        "it keeps what was written after what it lacks, as no backup does; what it lacks was "
        "removed, not rewound"
    )


def test_a_declaration_cannot_hide_a_chain_removed_while_what_came_after_it_stays(
    folder: Path, world: dict[str, Any], submission: Submission
) -> None:
    """Issue 39 item 2, end to end: task X's whole chain, written after checkpoint 1, removed
    while an entry written after it stays. Before, ``declare-restore --checkpoint 1`` was
    accepted (the database holds what checkpoint 1 signed) and ``audit verify`` then passed.
    The commands run as processes on the suite's database (MariaDB in CI's MariaDB leg): the
    declaration is refused, naming what was kept and what is missing, and verify names the
    removal. The same database cut before the entry too is a backup's, and is declared."""
    chain, later = written_after_a_new_chain(world, submission)
    env = child_env(ORBIT_AUDIT_CHECKPOINT_DIR=str(folder))
    with removed(chain):
        declared = run_manage(
            "audit", "declare-restore", "--checkpoint", "1", "--reason", "told it was restored",
            env=env,
        )  # fmt: skip
        done = run_manage("audit", "verify", env=env)
        assert declared.returncode == 1, verify_output(declared)
        assert "this database is not one moment of the history" in declared.stderr
        assert kept_after(chain, later, by=2) in declared.stderr
        assert not (folder / "00000004.json").exists()
        assert done.returncode == 1, verify_output(done)
        assert (
            f"ledger audit of task {chain[0].task_id}: checkpoint 2 signed it at seq "
            f"{chain[-1].seq}, but the table has none of its records; they were removed"
        ) in done.stdout
        assert "declared restore" not in done.stdout

        # A backup taken before the entry was written holds neither: that is declared.
        kept = ConsoleEvent.objects.get(seq=later.seq - 1)
        with head_kept(), restored(ConsoleEvent, [later]):
            with append_only_lifted(CONSOLE_TABLE):
                ConsoleEvent.objects.filter(id=later.id).delete()
            ChainHead.objects.filter(name=CONSOLE_CHAIN).update(
                seq=kept.seq, last_hash=kept.entry_hash
            )
            code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "disk lost")
            assert code == 0, out
            assert "set aside as rewound: checkpoints 2 to 3" in out
            assert problems() == []


def test_verify_names_a_declaration_that_hides_what_is_missing(
    folder: Path, world: dict[str, Any], submission: Submission
) -> None:
    """A declaration written without the rule — by the version before issue 39, or by hand
    by someone holding the signing key — is held to it on every run of ``audit verify``."""
    chain, later = written_after_a_new_chain(world, submission)
    first = checkpoints.read().checkpoints[0]
    with removed(chain):
        checkpoints.write(
            restore=Restore(1, first.digest, checkpoints.database_label(), "by hand"),
            newest_expected=3,
        )
        found = problems()
    assert found == [
        "checkpoint 4 (00000004.json): its declared restore hides what is missing: "
        + kept_after(chain, later, by=2)
    ]


def test_a_second_declaration_is_held_to_what_was_signed_since_the_first(
    folder: Path, world: dict[str, Any], submission: Submission
) -> None:
    """Issue 39 item 2: after a declared restore, the console goes on; task Y's chain is then
    removed while what came after it stays. Declared again to the same checkpoint (or to the
    first declaration), it was accepted before. Both are refused now; a real second restore,
    to a moment after the first declaration, is declared and named on every run."""
    *_, kept = more_events(submission, 1)
    signed_now()  # 1
    after = more_events(submission, 1)
    signed_now()  # 2
    with restored_from_backup(kept, after, 2):
        code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "first")
        assert code == 0 and "checkpoint 3 written" in out, out
        code, out = audit("declare-restore", "--checkpoint", "2", "--reason", "rewound")
        assert code == 1, out
        assert "checkpoint 2 is set aside by the declared restore of checkpoint 3" in out
        task_y = new_task(world, "failed")
        signed_now()  # 4 signs Y
        later = more_events(submission, 1)
        signed_now()  # 5
        chain = list(OperationAudit.objects.filter(task_id=task_y).order_by("seq"))
        try:
            with removed(chain):
                for to in ("1", "3"):
                    code, out = audit("declare-restore", "--checkpoint", to, "--reason", "again")
                    assert code == 1, out
                    assert kept_after(chain, later[0], by=4) in out
                assert not (folder / "00000006.json").exists()

                # The database as it was when the first declaration was written.
                with head_kept(), restored(ConsoleEvent, later):
                    with append_only_lifted(CONSOLE_TABLE):
                        ConsoleEvent.objects.filter(id=later[0].id).delete()
                    ChainHead.objects.filter(name=CONSOLE_CHAIN).update(
                        seq=kept.seq, last_hash=kept.entry_hash
                    )
                    code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "again")
                    assert code == 0, out
                    assert "(the declared restore of checkpoint 3 among them)" in out
                    code, out = audit("verify")
                    assert code == 0, out
                    assert (
                        "declares the database restored from a backup holding checkpoint 1; "
                        "what checkpoints 3 to 5 signed after it was rewound by the restore, not "
                        "tampered with; it rewinds past the declared restore of checkpoint 3 as "
                        "well; reason: again"
                    ) in out
        finally:
            with append_only_lifted(CONSOLE_TABLE):  # the backup did not hold them
                ConsoleEvent.objects.filter(id__in=[e.id for e in later]).delete()


def test_a_chain_written_to_after_the_restore_is_not_declared(
    folder: Path, submission: Submission
) -> None:
    """Every chain must be a prefix of what the set-aside checkpoints signed: a console that
    ran on the restored database before the declaration wrote other entries at the numbers
    they signed, indistinguishable from a chain rewritten by someone holding the audit key."""
    *_, kept = more_events(submission, 1)
    signed_now()
    after = more_events(submission, 2)
    signed = signed_now()  # signs the console at after[-1]
    with restored_from_backup(kept, after, 2):
        written = more_events(submission, 3)
        try:
            code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "restored")
        finally:
            with append_only_lifted(CONSOLE_TABLE):
                ConsoleEvent.objects.filter(id__in=[e.id for e in written]).delete()
    assert code == 1, out
    assert signed.heads["console"] == [Head(CONSOLE_CHAIN, after[-1].seq, after[-1].entry_hash)]
    assert (
        f"console record, entry {written[1].id} (seq {written[1].seq}): is not what checkpoint 2 "
        "signed at this number, which a declared restore set aside; the restored chain is not "
        "the one the checkpoints signed (written to after the restore and before it was "
        "declared, or re-linked)"
    ) in out


def test_a_checkpoint_is_named_by_its_digits(tmp_path: Path) -> None:
    """Names where numbers go, and numbers no file name holds: refused by the command's
    parser, before anything is read or written."""
    with override_settings(ORBIT_AUDIT_CHECKPOINT_DIR=tmp_path / "checkpoints"):
        for given in ["latest", "+1", " 1", "1_0", "\u0661", "-1", "1e3", "123456789", "9" * 5000]:
            code, out = audit("declare-restore", "--checkpoint", given, "--reason", "r")
            assert code == 1 and "is not a checkpoint's number (1 to 8 digits)" in out, given
    assert not (tmp_path / "checkpoints").exists()


def test_what_no_declaration_may_name_is_refused_and_writes_nothing(
    folder: Path, world: dict[str, Any], submission: Submission
) -> None:
    """Checkpoints that do not exist, or were set aside; a record removed inside a chain;
    a forged checkpoint in the folder, its newest or in the middle."""
    chain, _ = written_after_a_new_chain(world, submission)
    for number in ("0", "4", "99999999"):
        code, out = audit("declare-restore", "--checkpoint", number, "--reason", "r")
        assert code == 1 and "not one of this series (checkpoints 1 to 3)" in out, out
    with removed([chain[0]]):  # inside X's chain: what follows it stays
        code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "r")
    assert code == 1 and f"(seq {chain[1].seq}): expected seq 1; records before it" in out

    second = folder / "00000002.json"
    genuine = second.read_bytes()
    second.write_bytes(genuine.replace(b'"complete":false', b'"complete":true'))
    code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "r")
    assert code == 1 and "its signature does not verify; it was altered" in out, out
    second.write_bytes(genuine)
    forged = folder / "99999999.json"
    forged.write_bytes((folder / "00000003.json").read_bytes())
    code, out = audit("declare-restore", "--checkpoint", "1", "--reason", "r")
    assert code == 1 and "99999999.json, does not verify" in out, out
    forged.unlink()
    assert sorted(path.name for path in folder.glob("*.json"))[-1] == "00000003.json"
