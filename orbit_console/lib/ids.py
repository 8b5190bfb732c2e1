"""Identifiers of the ledger: 32 lowercase hexadecimal characters (C5)."""

import re
import secrets

_ID = re.compile(r"[0-9a-f]{32}")


def new_id() -> str:
    return secrets.token_hex(16)


def is_id(value: object) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def new_request_id() -> str:
    return secrets.token_hex(16)
