"""Declared restores (issue 34): the database was restored from a backup, so its audit chains
end where they ended when the backup was taken, short of what the later checkpoints signed.
Unsaid, that rewind is what ``audit verify`` must call tampering (records removed from the
chains' ends). ``manage.py audit declare-restore`` says it, signed: it writes the next
checkpoint of the series with a ``restore`` field naming the newest checkpoint the backup holds
(given, or the newest taken at or before the backup's time) and the database the series
described until then, and signs every chain's head as restored.

A declaration covers a rewind to a backup, not records missing from it (issue 39). Before it
signs, it checks that the restored database is one moment of the history the checkpoints
signed (``rewinds.py``): it holds what that checkpoint (and those before it) signed; each chain
is a prefix of what the checkpoints after it signed; and it keeps no record written after one
it lacks, as far as the checkpoints order them. A later declaration is held to the same rule
against the checkpoints in effect, an earlier declaration included (one to a checkpoint before
it sets that one aside too, and ``audit verify`` says so every time).

``audit verify`` then holds the chains to the checkpoints up to that one and to the declaration
and after it; the checkpoints in between are named as rewound by the declared restore, not as
tampering, and the declaration is held to the rule again on every run, whoever wrote it. A
rewind that nobody declared is still named as records removed.
"""

from dataclasses import dataclass
from datetime import datetime

from orbit_console.audit import checkpoints, rewinds
from orbit_console.audit.chains import Head
from orbit_console.audit.checkpoints import Checkpoint, CheckpointError, Reading, Restore
from orbit_console.audit.verify import verify
from orbit_console.lib.rfc3339 import format_utc

SHOWN_PROBLEMS = 5


@dataclass(frozen=True)
class Declared:
    checkpoint: Checkpoint  # the declaration
    to: Checkpoint  # the newest checkpoint the backup holds
    rewound: list[Checkpoint]  # the checkpoints it sets aside


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
                f"no checkpoint in effect was taken at or before {format_utc(taken_at)}: a "
                "backup older than the series cannot be declared"
            )
        held = candidates[-1]
    else:
        found = next((c for c in in_effect if c.number == to), None)
        if found is None:
            raise CheckpointError(f"checkpoint {to} is {_not_in_effect(reading, to, newest)}")
        held = found
    if held.number == newest.number:
        raise CheckpointError(
            f"checkpoint {held.number} is the newest: nothing was rewound, nothing to declare"
        )
    kept = [c for c in in_effect if c.number <= held.number]
    rewound = [c for c in in_effect if c.number > held.number]
    upto = Reading(checkpoints=kept, in_effect=list(kept), set_aside=reading.set_aside)
    missing = verify(upto, pending=rewound).problems
    if missing:
        raise CheckpointError(
            f"this database does not hold what checkpoint {held.number} signed, or not as the "
            f"checkpoints after it signed it, so it was not restored from a backup holding it "
            f"({len(missing)} problem(s)): " + "; ".join(missing[:SHOWN_PROBLEMS])
        )

    def borne_out(heads: dict[str, list[Head]]) -> None:
        """The heads the declaration signs must be one moment of the history, rewound."""
        if unexplained := rewinds.unexplained(kept, rewound, heads):
            raise CheckpointError(
                "this database is not one moment of the history the checkpoints signed, so no "
                "backup holds it: a declaration would hide what it lacks "
                f"({len(unexplained)} problem(s)): " + "; ".join(unexplained[:SHOWN_PROBLEMS])
            )

    written = checkpoints.write(
        force=True,
        restore=Restore(held.number, held.digest, newest.database, reason),
        newest_expected=newest.number,
        vet=borne_out,
    )
    if written is None:  # forced: never
        raise CheckpointError("the declaration was not written")
    return Declared(written, held, rewound)


def _not_in_effect(reading: Reading, number: int | None, newest: Checkpoint) -> str:
    """Why checkpoint ``number`` cannot be the one a backup holds."""
    by = next((n for n, aside in reading.set_aside.items() if number in numbers(aside)), None)
    if by is not None:
        return (
            f"set aside by the declared restore of checkpoint {by}: a backup holding it holds "
            "what that restore rewound"
        )
    return f"not one of this series (checkpoints 1 to {newest.number})"


def describe(declaration: Checkpoint, reading: Reading) -> str:
    """One line for ``audit verify`` about a declared restore in effect."""
    restore = declaration.restore
    if restore is None:
        return ""
    aside = reading.set_aside.get(declaration.number, [])
    moved = (
        f"; the series described {restore.from_database} before it"
        if restore.from_database != declaration.database
        else ""
    )
    earlier = [c.number for c in aside if c.restore is not None]
    again = f"; it rewinds past the declared restore of {spans(earlier)} as well" if earlier else ""
    return (
        f"declared restore: checkpoint {declaration.number} of {format_utc(declaration.taken_at)} "
        f"declares the database restored from a backup holding checkpoint {restore.to}; what "
        f"{spans(numbers(aside)) if aside else 'none'} signed after it was rewound by the "
        f"restore, not tampered with{again}{moved}; reason: {restore.reason}"
    )


def numbers(found: list[Checkpoint]) -> list[int]:
    return [c.number for c in found]


def spans(found: list[int]) -> str:
    """``checkpoint 4``, ``checkpoints 4 to 6``, ``checkpoints 2 to 3, 7``."""
    runs: list[list[int]] = []
    for number in found:
        if runs and runs[-1][-1] + 1 == number:
            runs[-1].append(number)
        else:
            runs.append([number])
    said = ", ".join(f"{run[0]} to {run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs)
    return f"checkpoint {said}" if len(found) == 1 else f"checkpoints {said}"
