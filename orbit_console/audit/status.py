"""What the console shows about the audit chains, from records it can check (issue 29).

``manage.py audit verify`` signs its result with the checkpoint key (``audit/signing.py``) and
records it (``ChainVerification``); the checkpoint job signs each row of the list of checkpoints
it wrote (``WrittenCheckpoint``). Both tables are append-only, but whoever holds the runtime
database rights can still insert rows into them. The console's web process holds no private
key (in production only the checkpoint job does): it checks each row's signature with the
public keys (``ORBIT_AUDIT_VERIFY_KEYS``), shows only rows that verify, and says when newer rows
do not.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime

from orbit_console.audit import checkpoints, signing
from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.audit.verify import Report
from orbit_console.lib.rfc3339 import format_utc, parse_utc

VERIFICATION_FORMAT = "orbit-audit-verification/1"
# Rows the page reads, newest first. Rows written by hand can push the signed ones out of this
# window; the page then shows no result, and says why.
LOOK_BACK = 20


@dataclass(frozen=True)
class Verified:
    """A verification whose signature holds: what ``audit verify`` found."""

    ran_at: datetime
    ok: bool
    checked: int
    problems: int
    first_break: str
    checkpoint: int | None  # the newest checkpoint it held the chains to


@dataclass(frozen=True)
class Listed:
    """A checkpoint the database lists, whose row's signature holds."""

    number: int
    taken_at: datetime


@dataclass(frozen=True)
class ChainStatus:
    can_check: bool  # this process holds a key that checks signatures
    verification: Verified | None = None
    # The newest verification row newer than ``verification`` whose signature does not hold.
    unsigned_verification: datetime | None = None
    checkpoint: Listed | None = None
    # Rows of the list newer than ``checkpoint`` whose signature does not hold.
    unsigned_checkpoints: list[int] = field(default_factory=list)


def record(report: Report, ran_at: datetime) -> ChainVerification | None:
    """Sign and record ``report`` for the console. ``None`` when this process holds no
    signing key (an auditor's machine with the public keys only): an unsigned result would be
    worth no more than one written by hand."""
    if not signing.can_sign():
        return None
    problems = report.problems
    newest = report.checkpoints.checkpoints[-1] if report.checkpoints.checkpoints else None
    statement = json.dumps(
        {
            "format": VERIFICATION_FORMAT,
            "ran_at": format_utc(ran_at),
            "ok": not problems,
            "checked": report.checked,
            "problems": len(problems),
            "first_break": problems[0] if problems else "",
            "database": checkpoints.database_label(),
            "checkpoint": None
            if newest is None
            else {"series": newest.series, "number": newest.number, "digest": newest.digest},
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    key_id, signature = signing.sign(statement.encode())
    return ChainVerification.objects.create(
        ran_at=ran_at,
        ok=not problems,
        checked=report.checked,
        first_break=problems[0] if problems else "",
        statement=statement,
        key_id=key_id,
        signature=signature,
    )


def verified(row: ChainVerification) -> Verified | None:
    """What ``row`` says, if its signature holds and its columns say the same."""
    if not row.signature or not row.statement:
        return None
    try:
        if not signing.verifies(row.key_id, row.statement.encode(), row.signature):
            return None
        data = json.loads(row.statement)
        if data["format"] != VERIFICATION_FORMAT:
            return None
        said = Verified(
            ran_at=parse_utc(data["ran_at"]),
            ok=data["ok"] is True,
            checked=int(data["checked"]),
            problems=int(data["problems"]),
            first_break=str(data["first_break"]),
            checkpoint=None if data["checkpoint"] is None else int(data["checkpoint"]["number"]),
        )
    except (signing.UnknownSigningKey, ValueError, KeyError, TypeError):
        return None
    # A signed statement copied into a row dated later would otherwise pass for a newer run.
    if (row.ran_at, row.ok, row.checked) != (said.ran_at, said.ok, said.checked):
        return None
    return said


def chain_status() -> ChainStatus:
    """The newest verification and checkpoint whose signatures hold, and the newer rows whose
    signatures do not."""
    if not signing.can_verify():
        return ChainStatus(can_check=False)
    verification, unsigned_verification = None, None
    for row in ChainVerification.objects.order_by("-ran_at", "-id")[:LOOK_BACK]:
        verification = verified(row)
        if verification is not None:
            break
        if unsigned_verification is None:
            unsigned_verification = row.ran_at
    checkpoint, unsigned_checkpoints = None, []
    for listed in WrittenCheckpoint.objects.order_by("-taken_at", "-number")[:LOOK_BACK]:
        if checkpoints.listed_row_verifies(listed):
            checkpoint = Listed(listed.number, listed.taken_at)
            break
        unsigned_checkpoints.append(listed.number)
    return ChainStatus(
        can_check=True,
        verification=verification,
        unsigned_verification=unsigned_verification,
        checkpoint=checkpoint,
        unsigned_checkpoints=unsigned_checkpoints,
    )
