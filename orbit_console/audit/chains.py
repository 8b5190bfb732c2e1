"""The append-only hash chains that ``manage.py audit`` verifies and checkpoints.

The apps that keep chains register a ``Family`` of them when they are ready (the ledger: one
chain per task; the console: one chain), so that this app reads them without importing either.
Every family is checked the same way (``audit/verify.py``): numbered from 1 without gaps, each
link naming the one before, each link the HMAC of its record under the audit key it names
(``lib/auditkeys.py``).

Whoever appends a record marks its chain as moved (``moved``), in the same transaction: that is
how the checkpoint job finds what to sign. Not the records' times: a writer's clock can be
behind, and a record committed late would fall before any window of time.
"""

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Protocol

from orbit_console.audit.models import MovedChain
from orbit_console.lib.rows import Rows


@dataclass(frozen=True, slots=True)
class Link:
    """One record of a chain as verification sees it. ``relinked`` is the link computed again
    from the record's content, ``None`` when the record names an audit key not held."""

    chain: str
    id: str
    seq: int
    prev_hash: str
    entry_hash: str
    relinked: str | None


@dataclass(frozen=True, slots=True, order=True)
class Head:
    """The newest record of a chain: its number and its link."""

    chain: str
    seq: int
    entry_hash: str


class Family(Protocol):
    """Chains of one kind of record."""

    key: str  # names the family in checkpoints: never change it
    title: str  # names it in reports: "ledger audit"
    unit: str  # what its records are called: "records"

    def links(self) -> Iterator[Link]:
        """Every record, ordered by chain, then by number; memory stays bounded."""
        ...

    def heads(self, chains: Collection[str] | None) -> Iterator[Head]:
        """The head of each of ``chains`` that has records (of every chain when ``None``)."""
        ...

    def declared_heads(self) -> Iterator[Head]:
        """The heads the family keeps in rows of its own, if it keeps any."""
        ...

    def where(self, link: Link) -> str:
        """A record named in a report: ``ledger audit of task T, record R (seq 3)``."""
        ...

    def chain_name(self, chain: str) -> str:
        """A chain named in a report: ``ledger audit of task T``."""
        ...


_families: dict[str, Family] = {}
_MOVED = Rows(MovedChain)


def moved(family_key: str, chain: str) -> None:
    """Mark ``chain`` of the family ``family_key`` as moved: call it in the transaction that
    appends to the chain, so that the mark and the record are committed together. (Plain SQL,
    lib/rows.py: every decision appends.)"""
    _MOVED.insert(MovedChain(family=family_key, chain=chain))


def register(family: Family) -> None:
    _families[family.key] = family


def families() -> list[Family]:
    """The registered families, in registration order."""
    return list(_families.values())
