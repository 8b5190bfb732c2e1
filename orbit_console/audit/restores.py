"""Declared restores (issue 34): the database was restored from a backup, so its audit chains
end where they ended when the backup was taken, short of what the later checkpoints signed.
Unsaid, that rewind is what ``audit verify`` must call tampering (records removed from the
chains' ends). ``manage.py audit declare-restore`` says it, signed: it writes the next
checkpoint of the series with a ``restore`` field naming the newest checkpoint the backup holds
(given, or the newest taken at or before the backup's time) and the database the series
described until then, and signs every chain's head as restored. Before it signs, it checks that
the restored database holds everything that checkpoint (and those before it) signed: a
declaration covers a rewind to a backup, not records missing from it.

``audit verify`` then holds the chains to the checkpoints up to that one and to the declaration
and after it; the checkpoints in between are named as rewound by the declared restore, not as
tampering. A rewind that nobody declared is still named as records removed.
"""

from dataclasses import dataclass
from datetime import datetime

from orbit_console.audit import checkpoints
from orbit_console.audit.checkpoints import Checkpoint, CheckpointError, Reading, Restore
from orbit_console.audit.verify import verify
from orbit_console.lib.rfc3339 import format_utc

SHOWN_PROBLEMS = 5


@dataclass(frozen=True)
class Declared:
    checkpoint: Checkpoint  # the declaration
    to: Checkpoint  # the newest checkpoint the backup holds
    rewound: list[int]  # the numbers of the checkpoints it sets aside


def declare(*, reason: str, to: int | None = None, taken_at: datetime | None = None) -> Declared:
    """Declare that the database was restored from a backup holding checkpoint ``to``, or
    taken at ``taken_at``; ``CheckpointError`` says why not."""
    if not reason.strip():
        raise CheckpointError("a declared restore needs its reason (--reason)")
    if (to is None) == (taken_at is None):
        raise CheckpointError(
            "name the backup's checkpoint (--checkpoint) or its time (--taken-at)"
        )
    newest = checkpoints.newest_anywhere()
    if newest is None:
        raise CheckpointError(
            f"{checkpoints.folder()} holds no checkpoint: there is nothing to restore against"
        )
    reading = checkpoints.read(label=newest.database)
    if reading.problems:
        raise CheckpointError(
            "the checkpoint folder has problems of its own; run 'manage.py audit verify': "
            + "; ".join(reading.problems[:SHOWN_PROBLEMS])
        )
    in_effect = reading.effective()
    if taken_at is not None:
        candidates = [c for c in in_effect if c.taken_at <= taken_at]
        if not candidates:
            raise CheckpointError(
                f"no checkpoint was taken at or before {format_utc(taken_at)}: a backup older "
                "than the series cannot be declared"
            )
        held = candidates[-1]
    else:
        found = next((c for c in in_effect if c.number == to), None)
        if found is None:
            raise CheckpointError(f"checkpoint {to} is not one of this series in effect")
        held = found
    if held.number == newest.number:
        raise CheckpointError(
            f"checkpoint {held.number} is the newest: nothing was rewound, nothing to declare"
        )
    upto = Reading(checkpoints=[c for c in in_effect if c.number <= held.number])
    upto.in_effect = list(upto.checkpoints)
    missing = verify(upto).problems
    if missing:
        raise CheckpointError(
            f"this database does not hold what checkpoint {held.number} signed, so it was not "
            f"restored from a backup holding it ({len(missing)} problem(s)): "
            + "; ".join(missing[:SHOWN_PROBLEMS])
        )
    written = checkpoints.write(
        force=True,
        restore=Restore(held.number, held.digest, newest.database, reason),
        newest_expected=newest.number,
    )
    if written is None:  # forced: never
        raise CheckpointError("the declaration was not written")
    rewound = [c.number for c in in_effect if c.number > held.number]
    return Declared(written, held, rewound)


def describe(declaration: Checkpoint, reading: Reading) -> str:
    """One line for ``audit verify`` about a declared restore in effect."""
    restore = declaration.restore
    if restore is None:
        return ""
    rewound = [c.number for c in reading.checkpoints if restore.to < c.number < declaration.number]
    span = (
        "none"
        if not rewound
        else f"checkpoint {rewound[0]}"
        if len(rewound) == 1
        else f"checkpoints {rewound[0]} to {rewound[-1]}"
    )
    moved = (
        f"; the series described {restore.from_database} before it"
        if restore.from_database != declaration.database
        else ""
    )
    return (
        f"declared restore: checkpoint {declaration.number} of {format_utc(declaration.taken_at)} "
        f"declares the database restored from a backup holding checkpoint {restore.to}; what "
        f"{span} signed after it was rewound by the restore, not tampered with{moved}; "
        f"reason: {restore.reason}"
    )
