"""The append-only hash chains that ``manage.py audit`` verifies and checkpoints.

The apps that keep chains register a ``Family`` of them when they are ready (the ledger: one
chain per task; the console: one chain), so that this app reads them without importing either.
Every family is checked the same way (``audit/verify.py``): numbered from 1 without gaps, each
link naming the one before, each link the HMAC of its record under the audit key it names
(``lib/auditkeys.py``).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


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

    def heads(self, since: datetime | None) -> Iterator[Head]:
        """The head of every chain with a record created at or after ``since`` (every chain
        when ``None``)."""
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


def register(family: Family) -> None:
    _families[family.key] = family


def families() -> list[Family]:
    """The registered families, in registration order."""
    return list(_families.values())
