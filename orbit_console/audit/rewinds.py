"""What a declared restore must bear out (issue 39): that the restored database is one moment of
the history the checkpoints signed — that history rewound, not that history with records taken
out of it.

A backup is a consistent cut: it holds every record committed before one moment and none
committed after it. What orders records is:

- within a chain, the sequence numbers (and the links, which no one without the audit key can
  forge): a chain is a prefix of itself at any later time;
- across chains, the checkpoints. A checkpoint reads the marks and the heads at one moment (one
  snapshot, ``checkpoints.write``): a record it signed (at or below a head it signed) was
  committed before that moment; a record past where the checkpoints up to it left its chain
  was committed after it, since every record is marked in its own transaction and its mark
  stays until a checkpoint has signed its chain.

Commit times are not used: a record's time is its writer's clock, which may be behind (issue
29), and what is missing has no time to compare with. So the order across chains is as fine as
the checkpoint period: among records committed between two checkpoints, none is known to come
before another.

The rule, held against the checkpoints in effect when the restore is declared, in order: those
up to the one the backup holds (``kept``) and those after it (``rewound``). The restored
database

1. holds what every kept checkpoint signed: each chain reaches the head they signed, with its
   link;
2. holds each chain as a prefix of what the rewound checkpoints signed: where it reaches a head
   one of them signed, it has that link (checked here at the restored heads; below them,
   ``audit verify`` and the declaration walk the records);
3. keeps nothing committed after a record it lacks: if κ is the first rewound checkpoint that
   signed a record the database lacks, the database was cut before κ's moment, so every chain
   ends at or before where the checkpoints up to κ left it.

A database that passes is what a backup taken between checkpoint κ-1 and κ would hold, as far
as anything signed can tell; one that fails cannot be: a declaration would hide what it lacks.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from orbit_console.audit.chains import Head, families


class Signed(Protocol):
    """A checkpoint, as far as this rule reads it."""

    @property
    def number(self) -> int: ...

    @property
    def heads(self) -> dict[str, list[Head]]: ...


def unexplained(
    kept: Sequence[Signed], rewound: Sequence[Signed], restored: Mapping[str, Iterable[Head]]
) -> list[str]:
    """What in ``restored`` (per family, the head of every chain the database holds) no
    restore to ``kept[-1]`` explains, each named; empty when it is a cut of the history."""
    ends = {key: {head.chain: head for head in heads} for key, heads in restored.items()}

    def end(key: str, chain: str) -> Head:
        return ends.get(key, {}).get(chain) or Head(chain, 0, "")

    # Per chain, the newest head the checkpoints read so far signed, and which one signed it.
    signed: dict[tuple[str, str], tuple[Head, int]] = {}
    for checkpoint in kept:
        for key, heads in checkpoint.heads.items():
            for head in heads:
                signed[key, head.chain] = (head, checkpoint.number)
    problems: list[str] = []
    backup = kept[-1].number if kept else 0
    for (key, chain), (head, number) in sorted(signed.items()):
        at = end(key, chain)
        if at.seq < head.seq:
            problems.append(
                f"{_name(key, chain)}: checkpoint {number} signed it at seq {head.seq}, but the "
                f"restored database ends it at seq {at.seq}; a backup holding checkpoint "
                f"{backup} holds it"
            )
        elif at.seq == head.seq and at.entry_hash != head.entry_hash:
            problems.append(
                f"{_name(key, chain)}: its record at seq {head.seq} is not what checkpoint "
                f"{number} signed at this number; the chain was re-linked"
            )

    kappa: Signed | None = None  # the first rewound checkpoint that signed what is missing
    lacking: tuple[str, Head, Head] | None = None  # one of those: its head signed, its end
    for checkpoint in rewound:
        for key, heads in sorted(checkpoint.heads.items()):
            for head in sorted(heads):
                at = end(key, head.chain)
                if at.seq == head.seq and at.entry_hash != head.entry_hash:
                    problems.append(
                        f"{_name(key, head.chain)}: its record at seq {head.seq} is not what "
                        f"checkpoint {checkpoint.number} signed at this number; {NOT_A_PREFIX}"
                    )
                if kappa is None:
                    signed[key, head.chain] = (head, checkpoint.number)
                    if lacking is None and at.seq < head.seq:
                        lacking = (key, head, at)
        if kappa is None and lacking is not None:
            kappa = checkpoint  # every head it signed is in ``signed``: where it left each chain
    if kappa is None or lacking is None:
        return problems
    lacking_key, missing, missing_at = lacking
    gone = (
        f"{_name(lacking_key, missing.chain)} from seq {missing_at.seq + 1} to {missing.seq}"
        if missing_at.seq + 1 < missing.seq
        else f"{_name(lacking_key, missing.chain)} at seq {missing.seq}"
    )
    for key, chains in sorted(ends.items()):
        for chain, at in sorted(chains.items()):
            bound = signed.get((key, chain))
            limit = bound[0].seq if bound else 0
            if at.seq > limit:
                left = f"at seq {limit}" if limit else "before its first record"
                problems.append(
                    f"{_name(key, chain)}: the restored database keeps it to seq {at.seq}, but "
                    f"checkpoint {kappa.number} left it {left}, and signed {gone}, which the "
                    "restored database lacks: it keeps what was written after what it lacks, "
                    "as no backup does; what it lacks was removed, not rewound"
                )
    return problems


NOT_A_PREFIX = (
    "the restored chain is not the one the checkpoints signed (written to after the restore and "
    "before it was declared, or re-linked)"
)


def _name(key: str, chain: str) -> str:
    family = next((f for f in families() if f.key == key), None)
    return family.chain_name(chain) if family is not None else f"{key} chain {chain}"
