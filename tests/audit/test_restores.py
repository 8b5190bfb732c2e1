"""Declared restores (issue 34, drill 3's fast subset): a database restored from a backup ends
its chains where the backup did, short of what later checkpoints signed. ``manage.py audit
declare-restore`` says so, signed, and ``audit verify`` then names the rewind as a declared
restore and passes; the same rewind undeclared is still named as records removed, and fails.

The restore is played on the test database: the entries made after the backup's checkpoint are
removed, the console's head row moved back and the list's row of the later checkpoint removed,
as the backup holds them (the triggers lifted for that moment, as in test_checkpoints.py). The
rows are put back afterwards.
"""

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from orbit_console.audit import restores
from orbit_console.audit.checkpoints import CheckpointError
from orbit_console.audit.models import WrittenCheckpoint
from orbit_console.decisions.chain import CONSOLE_CHAIN
from orbit_console.decisions.models import ChainHead, ConsoleEvent, Submission
from tests.audit.conftest import (
    CONSOLE_TABLE,
    WRITTEN_TABLE,
    append_only_lifted,
    more_events,
)
from tests.audit.test_checkpoints import folder, head_kept, problems, restored, signed_now

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
