"""Signed checkpoints of the audit chains' heads, kept outside the database (issue 13).

The keyed links (``lib/auditkeys.py``) stop someone who can write the rows but lacks the audit
key from changing a record. They cannot show that records were removed from a chain's end, that
a whole chain or table was emptied, or that someone holding the key re-linked a chain: every
one of those leaves chains that are consistent in themselves. A checkpoint closes that gap, as
CloudTrail's digest files and Certificate Transparency's signed tree heads do: it records the
heads of the chains (number and link of each chain's newest record) at a moment, names the
checkpoint before it by digest, is signed with Ed25519 (``audit/signing.py``) and is written to
a folder outside the database. ``audit verify`` then checks that every head a checkpoint signed
is still in its table, at the same number with the same link.

A checkpoint lists the heads that moved since the one before it, not all of them: a million
tasks' heads every minute would be a hundred megabytes each time. The heads signed so far are
the checkpoints read in order, newest last. What moved is what the writers marked
(``chains.moved``, in each record's own transaction), not what a time window holds: a record
whose writer's clock was behind, or that committed late, is signed by the next checkpoint all
the same. Marks are removed only once a checkpoint on disk signed their chains. The first
checkpoint of a series, and the first of this format after checkpoints of format 1 (which chose
heads by the records' times), list every chain's head (``complete``): from there on every
record is either signed or marked, and ``audit verify`` holds the chains to that.

Each folder holds one series for one database (both named in every checkpoint). The folder is
the truth; the database lists what was written (``WrittenCheckpoint``, append-only, each row
signed) only to witness it: removing files from the folder, or the whole folder, is noticed,
and the job refuses to start a new series over a lost one. Only the operator starts one
(``write(new_series=REASON)``, ``manage.py audit checkpoint --new-series``); its first
checkpoint names, signed, the series it gives up and why.
"""

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Max
from django.utils import timezone

from orbit_console.audit import rewinds, signing
from orbit_console.audit.chains import Head, families
from orbit_console.audit.models import MovedChain, WrittenCheckpoint
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc, parse_utc
from orbit_console.lib.snapshot import one_moment

FORMAT = "orbit-audit-checkpoint/2"
VERSIONS = {"orbit-audit-checkpoint/1": 1, FORMAT: 2}
LISTED_FORMAT = "orbit-audit-checkpoint-listed/1"
# With nothing new, the periodic job still writes one this often: the series shows it ran.
IDLE_CHECKPOINT = timedelta(hours=1)
NAME_DIGITS = 8
# Marks one round reads at most: a backlog (the job was stopped for days) is signed over
# several rounds, each in bounded memory.
MARKS_PER_ROUND = 100_000
LIST_WITNESS = "the database's list of checkpoints"


class CheckpointError(Exception):
    """No checkpoint can be written: no signing key, the folder's newest checkpoint does not
    verify or belongs to another database, or checkpoints the database lists as written are
    not in the folder."""


@dataclass(frozen=True)
class GivenUp:
    """A series that a new one replaced, as far as the database listed it."""

    series: str
    number: int  # its newest listed checkpoint
    digest: str


@dataclass(frozen=True)
class Restore:
    """What a checkpoint that declares a restore signs (``manage.py audit declare-restore``):
    the database was restored from a backup that holds checkpoint ``to`` (and nothing that a
    later one signed is owed), which described the database ``from_database``."""

    to: int
    to_digest: str
    from_database: str
    reason: str


@dataclass(frozen=True)
class Checkpoint:
    number: int
    series: str
    taken_at: datetime
    previous: str  # the digest of the checkpoint before, "" for the first of a series
    database: str
    heads: dict[str, list[Head]]
    key_id: str
    signature: str
    message: bytes  # what the signature covers
    digest: str  # SHA-256 of the file's bytes
    path: Path
    version: int = 2  # 1: the heads were chosen by the records' times; 2: by the marks
    complete: bool = False  # lists the head of every chain
    gives_up: tuple[GivenUp, ...] = ()  # the first of a series started over lost ones
    reason: str = ""  # why the operator started it
    restore: Restore | None = None  # declares a restore from a backup


@dataclass(frozen=True, slots=True)
class SignedLink:
    """A link a checkpoint signed at its number in its chain. ``set_aside``: by a checkpoint a
    declared restore set aside, which the restored chain was a prefix of, not reached."""

    link: str
    number: int  # the newest checkpoint that signed it
    set_aside: bool = False


@dataclass
class Reading:
    """A folder read for verification: the checkpoints whose signatures hold, in order, and
    what is wrong with the folder, each problem by name."""

    checkpoints: list[Checkpoint] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    files: set[int] = field(default_factory=set)  # the numbers of the folder's files, all
    # Whether every record must be signed or its chain marked (``_marks_hold``).
    marks_hold: bool = False
    newest_missing: bool = False  # the list names checkpoints of the series past its newest
    # The checkpoints whose heads hold: all of them, less those a declared restore rewound
    # (the ones after the checkpoint its backup holds, up to the declaration).
    in_effect: list[Checkpoint] = field(default_factory=list)
    # Per declared restore (by its number), the checkpoints it set aside, oldest first.
    set_aside: dict[int, list[Checkpoint]] = field(default_factory=dict)

    def effective(self) -> list[Checkpoint]:
        return self.in_effect if self.in_effect or not self.checkpoints else self.checkpoints

    def signed_links(
        self, pending: Sequence[Checkpoint] = ()
    ) -> dict[str, dict[str, dict[int, SignedLink]]]:
        """Per family and chain, by seq, every link that a checkpoint in effect signed, and
        each link that a checkpoint set aside by a declared restore in effect signed below the
        declaration's own head of that chain (the restored chain was a prefix of what it
        signed, ``rewinds.py``). ``pending``: checkpoints that a declaration about to be
        written sets aside, wherever the chains reach what they signed.

        Where checkpoints in effect signed two links at one number, the first holds: a later
        checkpoint that signed another record there signed a re-linked chain."""
        links: dict[str, dict[str, dict[int, SignedLink]]] = {}

        def add(checkpoint: Checkpoint, below: Checkpoint | None, set_aside: bool) -> None:
            for key, heads in checkpoint.heads.items():
                bound = {h.chain: h.seq for h in below.heads.get(key, ())} if below else None
                chains = links.setdefault(key, {})
                for head in heads:
                    if bound is not None and head.seq >= bound.get(head.chain, 0):
                        continue
                    at = chains.setdefault(head.chain, {})
                    before = at.get(head.seq)
                    if before and not before.set_aside and before.link != head.entry_hash:
                        continue
                    at[head.seq] = SignedLink(head.entry_hash, checkpoint.number, set_aside)

        effective = self.effective()
        for checkpoint in effective:
            for aside in self.set_aside.get(checkpoint.number, ()):
                add(aside, checkpoint, True)
        for checkpoint in pending:
            add(checkpoint, None, True)
        for checkpoint in effective:  # over the set-aside ones: what holds now comes last
            add(checkpoint, None, False)
        return links

    @property
    def restores(self) -> list[Checkpoint]:
        """The checkpoints in effect that declare a restore, oldest first."""
        return [c for c in self.effective() if c.restore is not None]

    def signed_heads(self) -> dict[str, dict[str, Head]]:
        """Per family, the newest signed head of each chain."""
        signed: dict[str, dict[str, Head]] = {}
        for checkpoint in self.effective():
            for family, heads in checkpoint.heads.items():
                chains = signed.setdefault(family, {})
                for head in heads:
                    chains[head.chain] = head
        return signed

    @property
    def started_over(self) -> Checkpoint | None:
        """The first checkpoint, if the operator started its series over lost ones."""
        first = self.checkpoints[0] if self.checkpoints else None
        return first if first is not None and first.number == 1 and first.gives_up else None


def folder() -> Path:
    return Path(settings.ORBIT_AUDIT_CHECKPOINT_DIR)


def database_label() -> str:
    """The database the checkpoints describe, from the settings (not from its contents)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:{db['NAME']}"
    return f"{connection.vendor}://{db['HOST'] or 'localhost'}:{db['PORT'] or 3306}/{db['NAME']}"


def write(
    *,
    force: bool = True,
    new_series: str | None = None,
    complete: bool = False,
    restore: Restore | None = None,
    newest_expected: int | None = None,
    vet: Callable[[dict[str, list[Head]]], None] | None = None,
) -> Checkpoint | None:
    """Sign and write the next checkpoint now. With ``force=False`` (the periodic job), skip it
    when no head moved and the newest checkpoint is younger than ``IDLE_CHECKPOINT``.
    ``new_series``: the operator's reason to start a new series in an empty folder, giving up
    the series the database lists (``manage.py audit checkpoint --new-series``). ``complete``:
    sign every chain's head, marked or not (``--complete``). ``restore``: declare that the
    database was restored (``audit/restores.py``, which checked it): a complete checkpoint that
    may follow checkpoints of another database, written only if the newest is still
    ``newest_expected``. ``vet``: called with the heads about to be signed; a
    ``CheckpointError`` it raises writes nothing.

    The marks and the heads are read at one moment (``one_moment``): whatever the checkpoint
    signs was written before it, and a record past the heads the series signed was written
    after it (``rewinds.py`` orders records across chains by this)."""
    if not settings.ORBIT_AUDIT_SIGNING_KEYS:
        raise CheckpointError("ORBIT_AUDIT_SIGNING_KEYS: no signing key is configured")
    target = folder()
    target.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        newest = _newest(target, other_database=restore is not None)
        if restore is not None and (newest is None or newest.number != newest_expected):
            raise CheckpointError(
                "a checkpoint was written meanwhile: stop the checkpoint job and declare again"
            )
        gives_up = _may_write(target, newest, new_series)
        if newest is not None:
            _list(newest)  # the round that wrote it may have stopped before listing it
        complete = complete or restore is not None or _complete(newest)
        with one_moment():
            marks = list(
                MovedChain.objects.order_by("id").values_list("id", "family", "chain")[
                    :MARKS_PER_ROUND
                ]
            )
            heads = _moved_heads(newest, marks, complete=complete)
        if vet is not None:
            vet(heads)
        taken_at = timezone.now()
        if newest and not force and not heads and taken_at - newest.taken_at < IDLE_CHECKPOINT:
            _consume(marks)  # their chains' heads are the ones the newest checkpoint signed
            return None
        payload: dict[str, Any] = {
            "format": FORMAT,
            "series": newest.series if newest else new_id(),
            "number": newest.number + 1 if newest else 1,
            "taken_at": format_utc(taken_at),
            "previous": newest.digest if newest else "",
            "database": database_label(),
            "complete": complete,
            "heads": {
                key: [[h.chain, h.seq, h.entry_hash] for h in family_heads]
                for key, family_heads in heads.items()
            },
        }
        if new_series is not None:
            payload["gives_up"] = [[g.series, g.number, g.digest] for g in gives_up]
            payload["reason"] = new_series
        if restore is not None:
            payload["restore"] = {
                "to": restore.to,
                "to_digest": restore.to_digest,
                "from_database": restore.from_database,
                "reason": restore.reason,
            }
        key_id, signature = signing.sign(_message(payload))
        document = {"checkpoint": payload, "key_id": key_id, "signature": signature}
        data = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
        path = target / f"{payload['number']:0{NAME_DIGITS}d}.json"
        _create(path, data)
        checkpoint = _parse(path, data)
        _list(checkpoint)
        _consume(marks)  # only now: the file that signs their chains is on disk
        return checkpoint


def _may_write(target: Path, newest: Checkpoint | None, new_series: str | None) -> list[GivenUp]:
    """Refuse to write over a lost series; the series a new one gives up."""
    listed = listed_series()
    if new_series is not None:
        if newest is not None:
            raise CheckpointError(
                f"{target} holds checkpoints (the newest is {newest.number}): a new series "
                "starts only in an empty folder; there is nothing to start over"
            )
        if not new_series.strip():
            raise CheckpointError("a new series needs the reason it is started")
        return listed
    if newest is None and listed:
        raise CheckpointError(
            f"{target} holds no checkpoint, but the database lists {_describe(listed)} as "
            "written: the folder was lost or moved, or ORBIT_AUDIT_CHECKPOINT_DIR points "
            "elsewhere. Restore it; only if it is lost for good, start a new series with "
            "'manage.py audit checkpoint --new-series REASON' (docs/audit.md)"
        )
    ahead = next((g for g in listed if newest and g.series == newest.series), None)
    if newest is not None and ahead is not None and ahead.number > newest.number:
        raise CheckpointError(
            f"the newest checkpoint in {target} is {newest.number}, but the database lists "
            f"checkpoints up to {ahead.number} of its series as written: files were removed, "
            "or an older copy of the folder restored. Restore them (docs/audit.md)"
        )
    return []


def listed_series() -> list[GivenUp]:
    """The newest checkpoint the database lists of each series, oldest series first. A row
    whose signature does not verify was written by hand: ``audit verify`` names it, and it
    holds nothing up. (Rows from before rows were signed carry none, and count.)"""
    newest = WrittenCheckpoint.objects.values("series").annotate(number=Max("number"))
    found = []
    for series in sorted({row["series"] for row in newest}):
        rows = WrittenCheckpoint.objects.filter(series=series).order_by("-number")
        row = next((row for row in rows.iterator(chunk_size=100) if not _forged(row)), None)
        if row is not None:
            found.append((row.taken_at, GivenUp(row.series, row.number, row.digest)))
    return [given for _, given in sorted(found, key=lambda pair: pair[0])]


def _forged(row: WrittenCheckpoint) -> bool:
    return bool(row.signature) and not listed_row_verifies(row)


def _describe(listed: list[GivenUp]) -> str:
    return "; ".join(f"checkpoints up to {g.number} of series {g.series}" for g in listed)


def _complete(newest: Checkpoint | None) -> bool:
    """Whether the next checkpoint lists every chain's head: the first of a series, and the
    first after checkpoints of format 1, whose records nothing marked."""
    return newest is None or newest.version < 2


def _moved_heads(
    newest: Checkpoint | None, marks: list[tuple[int, str, str]], *, complete: bool
) -> dict[str, list[Head]]:
    """Per family, the heads the next checkpoint signs: of every chain when it is complete,
    else of the marked chains, less those the newest checkpoint signed as they are."""
    marked: dict[str, set[str]] = {}
    for _, family_key, chain in marks:
        marked.setdefault(family_key, set()).add(chain)
    already: set[tuple[str, Head]] = set()
    if newest is not None:
        already = {(key, head) for key, signed in newest.heads.items() for head in signed}
    heads: dict[str, list[Head]] = {}
    for family in families():
        if complete:
            found = family.heads(None)
        elif family.key in marked:
            found = family.heads(marked[family.key])
        else:
            continue
        moved = sorted(h for h in found if complete or (family.key, h) not in already)
        if moved:
            heads[family.key] = moved
    return heads


def _consume(marks: list[tuple[int, str, str]]) -> None:
    ids = [mark_id for mark_id, _, _ in marks]
    for start in range(0, len(ids), 1000):
        MovedChain.objects.filter(id__in=ids[start : start + 1000]).delete()


def listed_message(series: str, number: int, digest: str, taken_at: datetime) -> bytes:
    """What a row of the database's list of checkpoints signs: the console, which cannot read
    the folder, shows only rows whose signature verifies (``audit/status.py``)."""
    return _message(
        {
            "format": LISTED_FORMAT,
            "series": series,
            "number": number,
            "digest": digest,
            "taken_at": format_utc(taken_at),
        }
    )


def listed_row_verifies(row: WrittenCheckpoint) -> bool:
    """Whether ``row`` carries the checkpoint key's signature of its columns."""
    if not row.signature:
        return False
    message = listed_message(row.series, row.number, row.digest, row.taken_at)
    try:
        return signing.verifies(row.key_id, message, row.signature)
    except signing.UnknownSigningKey:
        return False


def _list(checkpoint: Checkpoint) -> None:
    """Add ``checkpoint`` to the database's list, signed, unless it is there."""
    if WrittenCheckpoint.objects.filter(
        series=checkpoint.series, number=checkpoint.number
    ).exists():
        return
    message = listed_message(
        checkpoint.series, checkpoint.number, checkpoint.digest, checkpoint.taken_at
    )
    key_id, signature = signing.sign(message)
    WrittenCheckpoint.objects.create(
        series=checkpoint.series,
        number=checkpoint.number,
        digest=checkpoint.digest,
        taken_at=checkpoint.taken_at,
        key_id=key_id,
        signature=signature,
    )


def read(label: str | None = None) -> Reading:
    """Every checkpoint of the folder, checked: signatures, numbering, each naming the one
    before, the database they describe, and the database's list of what was written.
    ``label``: the database they should describe, if not this one's (``database_label``)."""
    reading = Reading()
    signed: list[Checkpoint] = []
    for path in _files(folder()):
        reading.files.add(int(path.stem))
        try:
            checkpoint = _parse(path, path.read_bytes())
        except ValueError as error:
            reading.problems.append(f"checkpoint file {path.name}: {error}")
            continue
        where = f"checkpoint {checkpoint.number} ({path.name})"
        try:
            if not signing.verifies(checkpoint.key_id, checkpoint.message, checkpoint.signature):
                reading.problems.append(f"{where}: its signature does not verify; it was altered")
                continue
        except signing.UnknownSigningKey:
            reading.problems.append(
                f"{where}: signed with key {checkpoint.key_id}, which this installation "
                "does not hold"
            )
            continue
        signed.append(checkpoint)
    current = label if label is not None else database_label()
    before: Checkpoint | None = None
    for checkpoint in signed:
        where = f"checkpoint {checkpoint.number} ({checkpoint.path.name})"
        # A declared restore may have moved the series to a database of another name: the
        # checkpoints before it describe the one it names.
        later = [c for c in signed if c.restore is not None and c.number > checkpoint.number]
        label = later[0].restore.from_database if later and later[0].restore else current
        if checkpoint.database != label:
            reading.problems.append(
                f"{where}: describes the database {checkpoint.database}, not this one ({label})"
            )
            continue
        if before is None:
            if checkpoint.number != 1:
                reading.problems.append(_missing(1, checkpoint.number - 1, "the oldest present"))
            elif checkpoint.previous:
                reading.problems.append(f"{where}: the first checkpoint names one before it")
        elif checkpoint.series != before.series:
            reading.problems.append(f"{where}: belongs to another series of checkpoints")
            continue
        elif checkpoint.number != before.number + 1:
            reading.problems.append(
                _missing(before.number + 1, checkpoint.number - 1, f"checkpoint {before.number}")
            )
        elif checkpoint.previous != before.digest:
            reading.problems.append(
                f"{where}: does not name checkpoint {before.number} as the one before it; "
                "one of them was replaced"
            )
        reading.checkpoints.append(checkpoint)
        _take_effect(reading, checkpoint, where)
        before = checkpoint
    _hold_to_the_list(reading, before)
    reading.marks_hold = _marks_hold(reading)
    return reading


def _take_effect(reading: Reading, checkpoint: Checkpoint, where: str) -> None:
    """Add ``checkpoint`` to those in effect; a declared restore first sets aside the ones
    after the checkpoint its backup holds, and must be borne out by what they signed: the
    heads it signed are one moment of the history they describe (``rewinds.py``). It is held
    to that on every run, whoever wrote it."""
    restore = checkpoint.restore
    if restore is not None:
        held = next((c for c in reading.in_effect if c.number == restore.to), None)
        if held is None or held.digest != restore.to_digest:
            reading.problems.append(
                f"{where}: declares a restore to checkpoint {restore.to}, which is not in "
                "effect here as it signed it"
            )
        else:
            kept = [c for c in reading.in_effect if c.number <= restore.to]
            rewound = [c for c in reading.in_effect if c.number > restore.to]
            reading.problems.extend(
                f"{where}: its declared restore hides what is missing: {problem}"
                for problem in rewinds.unexplained(kept, rewound, checkpoint.heads)
            )
            reading.in_effect = kept
            reading.set_aside[checkpoint.number] = rewound
    reading.in_effect.append(checkpoint)


def _marks_hold(reading: Reading) -> bool:
    """Whether every record must be signed or its chain marked: from a complete checkpoint of
    format 2 on (it signed every chain; since then, every record was marked), as long as every
    checkpoint after it is here. A missing one is named; the records it alone signed would
    only be named again, as unmarked."""
    complete = [i for i, c in enumerate(reading.checkpoints) if c.version >= 2 and c.complete]
    if not complete or reading.newest_missing:
        return False
    since = reading.checkpoints[complete[-1] :]
    consecutive = all(b.number == a.number + 1 for a, b in pairwise(since))
    return consecutive and since[-1].number == max(reading.files)


def _hold_to_the_list(reading: Reading, newest: Checkpoint | None) -> None:
    """Every checkpoint the database lists as written must be in the folder, as listed: the
    folder's own numbering cannot tell that its newest files, or all of them, are gone. Series
    that the folder's series gave up, signed, are accounted for."""
    present = {(c.series, c.number): c for c in reading.checkpoints}
    series_here = reading.checkpoints[0].series if reading.checkpoints else None
    first = reading.started_over
    given_up = {g.series: g.number for g in first.gives_up} if first else {}
    missing: dict[str, list[int]] = {}
    for row in WrittenCheckpoint.objects.order_by("series", "number").iterator(chunk_size=5000):
        found = present.get((row.series, row.number))
        if found is not None:
            if found.digest != row.digest:
                reading.problems.append(
                    f"checkpoint {row.number} ({found.path.name}): not the checkpoint the "
                    "database lists as written; one of them was replaced"
                )
            continue
        if series_here in (row.series, None) and row.number in reading.files:
            continue  # its file is there, and the folder's own checks name what is wrong
        if newest is not None and row.series == newest.series and row.number <= newest.number:
            continue  # the folder's numbering names it
        if row.number <= given_up.get(row.series, 0):
            continue
        if _forged(row):
            reading.problems.append(
                f"{LIST_WITNESS} names checkpoint {row.number} of series {row.series}, but "
                "the row's signature does not verify; it was written by hand"
            )
            continue
        missing.setdefault(row.series, []).append(row.number)
    if missing and not reading.files:
        reading.problems.append(
            f"{folder()} holds no checkpoint, but {LIST_WITNESS} names checkpoints as "
            "written: the folder was lost or moved, or ORBIT_AUDIT_CHECKPOINT_DIR points "
            "elsewhere"
        )
    for series, numbers in missing.items():
        first_missing, last_missing = min(numbers), max(numbers)
        if series == series_here:
            reading.newest_missing = True
            reading.problems.append(_missing(first_missing, last_missing, LIST_WITNESS))
        else:
            reading.problems.append(
                _missing(first_missing, last_missing, LIST_WITNESS, series=series)
            )


def _missing(first: int, last: int, witness: str, *, series: str = "") -> str:
    which = f"checkpoint {first}" if first == last else f"checkpoints {first} to {last}"
    if series:
        which += f" of series {series}"
    return f"{which} missing from the folder (known from {witness})"


def _files(target: Path) -> list[Path]:
    if not target.is_dir():
        return []
    return sorted(
        path
        for path in target.iterdir()
        if path.suffix == ".json" and path.stem.isdigit() and len(path.stem) == NAME_DIGITS
    )


def newest_anywhere() -> Checkpoint | None:
    """The folder's newest checkpoint, whatever database it describes (a restore may have
    moved the series to a database of another name); ``CheckpointError`` if it does not
    verify."""
    return _newest(folder(), other_database=True)


def _newest(target: Path, *, other_database: bool = False) -> Checkpoint | None:
    files = _files(target)
    if not files:
        return None
    path = files[-1]
    try:
        checkpoint = _parse(path, path.read_bytes())
        valid = signing.verifies(checkpoint.key_id, checkpoint.message, checkpoint.signature)
    except (ValueError, signing.UnknownSigningKey):
        valid = False
    if not valid:
        raise CheckpointError(
            f"the newest checkpoint, {path}, does not verify: run 'manage.py audit verify'"
        )
    if checkpoint.database != database_label() and not other_database:
        raise CheckpointError(
            f"{target} holds the checkpoints of {checkpoint.database}, not of this database "
            f"({database_label()}): point ORBIT_AUDIT_CHECKPOINT_DIR at a folder of its own, or, "
            "if this database was restored from a backup of that one, declare it with "
            "'manage.py audit declare-restore' (docs/audit.md)"
        )
    return checkpoint


def _message(payload: dict[str, Any]) -> bytes:
    """What is signed: the payload as compact JSON, keys sorted."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def _parse(path: Path, data: bytes) -> Checkpoint:
    """The checkpoint in ``data``; ``ValueError`` naming what is wrong with its form."""
    try:
        document = json.loads(data, object_pairs_hook=_refuse_duplicates)
        payload = document["checkpoint"]
        version = VERSIONS.get(payload["format"])
        if version is None:
            raise ValueError(f"unknown format {payload['format']!r}")
        heads = {
            str(key): [Head(str(chain), int(seq), str(link)) for chain, seq, link in rows]
            for key, rows in payload["heads"].items()
        }
        number = int(payload["number"])
        if path.stem != f"{number:0{NAME_DIGITS}d}":
            raise ValueError(f"holds checkpoint {number}")
        return Checkpoint(
            number=number,
            series=str(payload["series"]),
            taken_at=parse_utc(str(payload["taken_at"])),
            previous=str(payload["previous"]),
            database=str(payload["database"]),
            heads=heads,
            key_id=str(document["key_id"]),
            signature=str(document["signature"]),
            message=_message(payload),
            digest=hashlib.sha256(data).hexdigest(),
            path=path,
            version=version,
            # Format 1 had no such field: its first checkpoint listed every head.
            complete=bool(payload["complete"]) if version >= 2 else number == 1,
            gives_up=tuple(
                GivenUp(str(series), int(last), str(digest))
                for series, last, digest in payload.get("gives_up", [])
            ),
            reason=str(payload.get("reason", "")),
            restore=_restore(payload.get("restore")),
        )
    except ValueError as error:
        raise ValueError(f"not a readable checkpoint ({error})") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a readable checkpoint (no {error})") from None


def _restore(declared: Any) -> Restore | None:
    if declared is None:
        return None
    return Restore(
        to=int(declared["to"]),
        to_digest=str(declared["to_digest"]),
        from_database=str(declared["from_database"]),
        reason=str(declared["reason"]),
    )


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("a name appears twice")
    return dict(pairs)


def _create(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, and never over an existing file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.link(temporary, path)  # fails if the name is taken
    finally:
        os.unlink(temporary)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    """One writer at a time per folder (two checkpoint jobs may share a volume)."""
    with open(target / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
