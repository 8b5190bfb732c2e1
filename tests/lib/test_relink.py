"""Re-linking a chain under the audit key (lib/relink.py), as the migrations to keyed links do:
an intact chain is linked anew in order; a broken one is refused, never re-sealed."""

import hashlib
from dataclasses import dataclass
from typing import Any

import pytest

from orbit_console.lib import auditkeys, strictjson
from orbit_console.lib.relink import BrokenChain, relink


@dataclass
class Row:
    id: str
    chain: str
    text: str
    prev_hash: str = ""
    entry_hash: str = ""
    key_id: str = ""


def old_content(row: Row) -> dict[str, Any]:
    return {"id": row.id, "text": row.text, "prev_hash": row.prev_hash}


def new_hash(row: Row) -> str:
    return auditkeys.link(row.key_id, strictjson.canonical({**old_content(row)}).encode())


def sha_chain(rows: list[Row]) -> list[Row]:
    previous, chain = "", None
    for row in rows:
        if row.chain != chain:
            previous, chain = "", row.chain
        row.prev_hash = previous
        content = strictjson.canonical(old_content(row)).encode()
        row.entry_hash = previous = hashlib.sha256(content).hexdigest()
    return rows


def run(rows: list[Row]) -> tuple[dict[str, str], list[str]]:
    saved: list[str] = []
    heads = relink(
        rows,
        chain_of=lambda row: row.chain,
        old_content=old_content,
        new_hash=new_hash,
        save=lambda row: saved.append(row.id),
    )
    return heads, saved


def test_an_intact_chain_is_linked_anew_under_the_current_key() -> None:
    rows = sha_chain([Row("a1", "a", "x"), Row("a2", "a", "y"), Row("b1", "b", "z")])
    heads, saved = run(rows)
    assert saved == ["a1", "a2", "b1"]
    assert {row.key_id for row in rows} == {auditkeys.current_key_id()}
    assert rows[1].prev_hash == rows[0].entry_hash and rows[2].prev_hash == ""
    assert rows[1].entry_hash == new_hash(rows[1])
    assert heads == {"a": rows[1].entry_hash, "b": rows[2].entry_hash}


@pytest.mark.parametrize("damage", ["content", "link", "gap"])
def test_a_broken_chain_is_refused_and_names_where(damage: str) -> None:
    rows = sha_chain([Row("a1", "a", "x"), Row("a2", "a", "y"), Row("a3", "a", "z")])
    if damage == "content":
        rows[1].text = "changed"
    elif damage == "link":
        rows[2].prev_hash = "0" * 64
    else:
        del rows[1]
    with pytest.raises(BrokenChain, match=r"at record a[23]"):
        run(rows)
