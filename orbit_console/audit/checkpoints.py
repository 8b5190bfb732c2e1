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

A checkpoint lists the heads that moved since the one before it (the chains with a record in
its window), not all of them: a million tasks' heads every minute would be a hundred megabytes
each time. The heads signed so far are the checkpoints read in order, newest last. The window
starts ``WINDOW_SLACK`` before the previous checkpoint was taken, so that a record committed up
to that long after its own timestamp is still covered; a record committed later than that is
covered when its chain next moves.

Each folder holds one series for one database (both named in every checkpoint); the database
also lists what was written (``WrittenCheckpoint``), so that removing the newest files from the
folder is noticed too.
"""

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from orbit_console.audit import signing
from orbit_console.audit.chains import Head, families
from orbit_console.audit.models import WrittenCheckpoint
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc, parse_utc

FORMAT = "orbit-audit-checkpoint/1"
WINDOW_SLACK = timedelta(minutes=10)
# With nothing new, the periodic job still writes one this often: the series shows it ran.
IDLE_CHECKPOINT = timedelta(hours=1)
NAME_DIGITS = 8


class CheckpointError(Exception):
    """No checkpoint can be written: no signing key, or the folder's newest checkpoint does not
    verify, or the folder belongs to another database."""


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


@dataclass
class Reading:
    """A folder read for verification: the checkpoints whose signatures hold, in order, and
    what is wrong with the folder, each problem by name."""

    checkpoints: list[Checkpoint] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def signed_heads(self) -> dict[str, dict[str, Head]]:
        """Per family, the newest signed head of each chain."""
        signed: dict[str, dict[str, Head]] = {}
        for checkpoint in self.checkpoints:
            for family, heads in checkpoint.heads.items():
                chains = signed.setdefault(family, {})
                for head in heads:
                    chains[head.chain] = head
        return signed


def folder() -> Path:
    return Path(settings.ORBIT_AUDIT_CHECKPOINT_DIR)


def database_label() -> str:
    """The database the checkpoints describe, from the settings (not from its contents)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:{db['NAME']}"
    return f"{connection.vendor}://{db['HOST'] or 'localhost'}:{db['PORT'] or 3306}/{db['NAME']}"


def write(*, force: bool = True) -> Checkpoint | None:
    """Sign and write the next checkpoint now. With ``force=False`` (the periodic job), skip it
    when no head moved and the newest checkpoint is younger than ``IDLE_CHECKPOINT``."""
    if not settings.ORBIT_AUDIT_SIGNING_KEYS:
        raise CheckpointError("ORBIT_AUDIT_SIGNING_KEYS: no signing key is configured")
    target = folder()
    target.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        newest = _newest(target)
        taken_at = timezone.now()
        since = newest.taken_at - WINDOW_SLACK if newest else None
        # What the newest checkpoint signed need not be signed again (the window overlaps it).
        already: set[tuple[str, Head]] = set()
        if newest is not None:
            already = {(key, head) for key, signed in newest.heads.items() for head in signed}
        heads: dict[str, list[Head]] = {}
        for family in families():
            moved = sorted(h for h in family.heads(since) if (family.key, h) not in already)
            if moved:
                heads[family.key] = moved
        if newest and not force and not heads and taken_at - newest.taken_at < IDLE_CHECKPOINT:
            return None
        payload: dict[str, Any] = {
            "format": FORMAT,
            "series": newest.series if newest else new_id(),
            "number": newest.number + 1 if newest else 1,
            "taken_at": format_utc(taken_at),
            "previous": newest.digest if newest else "",
            "database": database_label(),
            "heads": {
                key: [[h.chain, h.seq, h.entry_hash] for h in family_heads]
                for key, family_heads in heads.items()
            },
        }
        key_id, signature = signing.sign(_message(payload))
        document = {"checkpoint": payload, "key_id": key_id, "signature": signature}
        data = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
        path = target / f"{payload['number']:0{NAME_DIGITS}d}.json"
        _create(path, data)
        checkpoint = _parse(path, data)
        WrittenCheckpoint.objects.create(
            series=checkpoint.series,
            number=checkpoint.number,
            digest=checkpoint.digest,
            taken_at=checkpoint.taken_at,
        )
        return checkpoint


def read() -> Reading:
    """Every checkpoint of the folder, checked: signatures, numbering, each naming the one
    before, the database they describe, and the database's list of what was written."""
    reading = Reading()
    label = database_label()
    before: Checkpoint | None = None
    for path in _files(folder()):
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
        before = checkpoint
    if before is not None:
        listed = WrittenCheckpoint.objects.filter(series=before.series).order_by("-number").first()
        if listed is not None and listed.number > before.number:
            reading.problems.append(
                _missing(before.number + 1, listed.number, "the database's list of checkpoints")
            )
    return reading


def _missing(first: int, last: int, witness: str) -> str:
    which = f"checkpoint {first}" if first == last else f"checkpoints {first} to {last}"
    return f"{which} missing from the folder (known from {witness})"


def _files(target: Path) -> list[Path]:
    if not target.is_dir():
        return []
    return sorted(
        path
        for path in target.iterdir()
        if path.suffix == ".json" and path.stem.isdigit() and len(path.stem) == NAME_DIGITS
    )


def _newest(target: Path) -> Checkpoint | None:
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
    if checkpoint.database != database_label():
        raise CheckpointError(
            f"{target} holds the checkpoints of {checkpoint.database}, not of this database "
            f"({database_label()}): point ORBIT_AUDIT_CHECKPOINT_DIR at a folder of its own"
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
        if payload["format"] != FORMAT:
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
        )
    except ValueError as error:
        raise ValueError(f"not a readable checkpoint ({error})") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a readable checkpoint (no {error})") from None


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
