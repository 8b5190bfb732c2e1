"""Identifiers of the ledger: 32 lowercase hexadecimal characters (C5).

A new id is time-ordered: 12 hex digits of the Unix time in milliseconds, then 20 random hex
digits (80 bits from ``secrets``). The ledger's tables are clustered by their primary key on
MySQL/MariaDB, so ids in the order they are made put every new row at the end of its table, and
the rows a busy ledger touches (the tasks and audit records of the last minutes) share a few hot
pages instead of being scattered over a table that no longer fits in memory. Clients still treat
ids as opaque (C5 promises only the shape); nothing in the ledger orders by them except as a tie
breaker. Request ids are not stored as keys and stay wholly random.
"""

import re
import secrets
import time

_ID = re.compile(r"[0-9a-f]{32}")


def new_id() -> str:
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"


def is_id(value: object) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def new_request_id() -> str:
    return secrets.token_hex(16)
