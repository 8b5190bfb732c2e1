"""Re-linking an audit chain under the audit key, once, when an installation moves from plain
SHA-256 links to keyed ones (the migrations ``ledger 0003`` and ``console 0006``).

Each chain is first checked with the links it was written with: a chain that is already broken
is never re-sealed under the key (the migration stops and says where). Then every record is
linked anew, in order, under the current key. Only the migrations call this: they lift the
append-only triggers around it.
"""

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from orbit_console.lib import auditkeys, strictjson

type Content = Callable[[Any], dict[str, Any]]


class BrokenChain(RuntimeError):
    pass


def relink(
    records: Iterable[Any],
    *,
    chain_of: Callable[[Any], str],
    old_content: Content,
    new_hash: Callable[[Any], str],
    save: Callable[[Any], None],
) -> dict[str, str]:
    """Check and re-link ``records`` (ordered by chain, then sequence); the new last link of
    each chain."""
    key_id = auditkeys.current_key_id()
    chain: str | None = None
    old_previous = new_previous = ""
    heads: dict[str, str] = {}
    for record in records:
        if chain_of(record) != chain:
            chain, old_previous, new_previous = chain_of(record), "", ""
        old_link = hashlib.sha256(strictjson.canonical(old_content(record)).encode()).hexdigest()
        if record.prev_hash != old_previous or record.entry_hash != old_link:
            raise BrokenChain(
                f"the audit chain {chain} is broken at record {record.id}: run "
                "`manage.py audit verify` with the previous version and repair it first"
            )
        old_previous = record.entry_hash
        record.prev_hash, record.key_id = new_previous, key_id
        record.entry_hash = new_hash(record)
        save(record)
        new_previous = heads[chain] = record.entry_hash
    return heads
