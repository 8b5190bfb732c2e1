"""Identifiers of the ledger: 32 lowercase hexadecimal characters (C5).

A new id begins with two hex digits of the hour it was made in (the hour since the Unix epoch,
modulo 256: a cycle of about ten and a half days), then 30 random hex digits (120 bits from
``secrets``). The ledger's tables are clustered by their primary key on MySQL/MariaDB: with
wholly random ids every new row (a task, an audit record, an idempotency record, a result
event) landed on a random page of a table that no longer fits in memory. With the hour first,
the rows made in one hour share 1/256 of each table, a few hot pages however large the table
grows, and the first eight characters the console shows of an id still tell ids apart (the
hour's two and six random ones; ids are found by their start, docs/audit.md). Clients treat
ids as opaque (C5 promises only the shape). Request ids are not stored as keys and stay
wholly random.
"""

import re
import secrets
import time

_ID = re.compile(r"[0-9a-f]{32}")
HOURS_IN_CYCLE = 256


def hour_prefix(unix_seconds: float) -> str:
    return f"{int(unix_seconds // 3600) % HOURS_IN_CYCLE:02x}"


def new_id() -> str:
    return hour_prefix(time.time()) + secrets.token_hex(15)


def is_id(value: object) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def new_request_id() -> str:
    return secrets.token_hex(16)
