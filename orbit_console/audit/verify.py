"""Verification of the audit chains, on their own and against the signed checkpoints.

Each chain must be numbered from 1 without gaps, each record must name the link of the one
before it, and each link must be the HMAC of its record under the key it names. Then every head
a checkpoint signed must still be there: the chain still reaches the newest, and the record at
each number a checkpoint signed still has the link that was signed. That finds what the chains
alone cannot: records removed from the end of a chain (with or without the head row moved
back), a chain or a table emptied, and a chain re-linked by someone who holds the audit key.
Every signed head counts, not only the newest: the checkpoint job signs whatever head a marked
chain has, so after records were removed (and a mark inserted by hand) a later checkpoint may
sign a lower head, or a re-linked one; the earlier ones still hold. Only a declared restore
sets checkpoints aside (``audit/restores.py``), and the chains it restored must still be
prefixes of what those signed.

Since checkpoints of format 2, every record is either signed or its chain is marked for the
next checkpoint (``audit/checkpoints.py``): a record that is neither lost its mark, and could be
removed unseen later, so it is named too.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from orbit_console.audit import checkpoints, rewinds
from orbit_console.audit.chains import Family, Head, Link, families
from orbit_console.audit.checkpoints import Checkpoint, Reading, SignedLink
from orbit_console.audit.models import MovedChain


@dataclass
class FamilyReport:
    title: str
    unit: str
    checked: int = 0
    problems: list[str] = field(default_factory=list)
    # The chains with records past their signed head: (the signed seq, 0 if none; the end).
    unsigned: dict[str, tuple[int, Head]] = field(default_factory=dict)


@dataclass
class Report:
    families: list[FamilyReport]
    checkpoints: Reading

    @property
    def problems(self) -> list[str]:
        found = [problem for family in self.families for problem in family.problems]
        return found + self.checkpoints.problems

    @property
    def checked(self) -> int:
        return sum(family.checked for family in self.families)


def verify(reading: Reading, *, pending: Sequence[Checkpoint] = ()) -> Report:
    """Walk every registered family's chains and hold them against ``reading``'s heads.
    ``pending``: checkpoints that a declared restore about to be written sets aside; the
    chains must be prefixes of what they signed (``audit/restores.py``)."""
    signed = reading.signed_links(pending)
    reports = [
        _verify_family(family, signed.get(family.key, {}), unsigned=reading.marks_hold)
        for family in families()
    ]
    if reading.marks_hold:
        _hold_to_the_marks(dict(zip(families(), reports, strict=True)))
    return Report(reports, reading)


def _hold_to_the_marks(reports: dict[Family, FamilyReport]) -> None:
    """Every record past its chain's signed head must have its chain marked. The marks are read
    after the chains, and a mark goes only after a checkpoint signed its chain (the job writes
    the file first): so a chain unmarked now is either signed by a checkpoint newer than the
    ones this run read, or its mark was removed."""
    if not any(report.unsigned for report in reports.values()):
        return
    marked = set(MovedChain.objects.values_list("family", "chain").distinct().iterator())
    pending = {
        family: {
            chain: end
            for chain, end in report.unsigned.items()
            if (family.key, chain) not in marked
        }
        for family, report in reports.items()
    }
    if not any(pending.values()):
        return
    later = checkpoints.read().signed_heads()
    for family, unmarked in pending.items():
        signed_now = later.get(family.key, {})
        for chain, (signed_seq, end) in sorted(unmarked.items()):
            newer = signed_now.get(chain)
            if newer is not None and newer.seq >= end.seq:
                continue
            which = (
                f"the record at seq {end.seq} is"
                if signed_seq + 1 == end.seq
                else f"the records at seq {signed_seq + 1} to {end.seq} are"
            )
            reports[family].problems.append(
                f"{family.chain_name(chain)}: {which} signed by no checkpoint, and the chain is "
                "not marked for the next one; its mark was removed"
            )


def _verify_family(
    family: Family, signed: dict[str, dict[int, SignedLink]], *, unsigned: bool = False
) -> FamilyReport:
    """``signed``: per chain, by seq, the links the checkpoints signed: each must be the
    record's at that number, and the chain must reach the newest in effect. ``unsigned``:
    collect the chains with records past their signed head."""
    report = FamilyReport(family.title, family.unit)
    unseen = {chain for chain, links in signed.items() if _target(links) is not None}
    ends: dict[str, Head] = {}
    chain: str | None = None
    links: dict[int, SignedLink] = {}
    target: tuple[int, SignedLink] | None = None
    last: Head | None = None
    broken = relinked = False
    expected, previous = 1, ""

    def close() -> None:
        """The chain that just ended must reach the head its checkpoint signed."""
        if chain is None or last is None:
            return
        ends[chain] = last
        if unsigned and (target is None or last.seq > target[0]):
            report.unsigned[chain] = (target[0] if target else 0, last)
        if target is not None and last.seq < target[0]:
            report.problems.append(
                f"{family.chain_name(chain)}: checkpoint {target[1].number} signed it at seq "
                f"{target[0]}, but it ends at seq {last.seq}; {family.unit} at its end were "
                "removed"
            )

    for link in family.links():
        if link.chain != chain:
            close()
            chain, links = link.chain, signed.get(link.chain, {})
            target = _target(links)
            unseen.discard(link.chain)
            broken = relinked = False
            expected, previous = 1, ""
        report.checked += 1
        last = Head(link.chain, link.seq, link.entry_hash)
        at = links.get(link.seq)
        if not relinked and at is not None and at.link != link.entry_hash:
            report.problems.append(
                f"{family.where(link)}: is not what checkpoint {at.number} signed at this "
                + (
                    f"number, which a declared restore set aside; {rewinds.NOT_A_PREFIX}"
                    if at.set_aside
                    else "number; the chain was re-linked"
                )
            )
            relinked = True  # one per chain: the links after it differ as well
        if not broken and (problem := _break(link, expected, previous, family.unit)):
            report.problems.append(f"{family.where(link)}: {problem}")
            broken = True  # one break per chain: what follows it says nothing new
        expected, previous = link.seq + 1, link.entry_hash
    close()

    for gone in sorted(unseen):
        seq, at = _target(signed[gone]) or (0, SignedLink("", 0))
        report.problems.append(
            f"{family.chain_name(gone)}: checkpoint {at.number} signed it at seq {seq}, but "
            f"the table has none of its {family.unit}; they were removed"
        )
    for declared in family.declared_heads():
        end = ends.get(declared.chain, Head(declared.chain, 0, ""))
        if (end.seq, end.entry_hash) != (declared.seq, declared.entry_hash):
            report.problems.append(
                f"{family.chain_name(declared.chain)}: the chain ends at seq {end.seq} but its "
                f"head says {declared.seq}; {family.unit} at the end were removed"
            )
    return report


def _target(links: dict[int, SignedLink]) -> tuple[int, SignedLink] | None:
    """The newest link a checkpoint in effect signed: the chain must reach it."""
    return max(
        ((seq, at) for seq, at in links.items() if not at.set_aside),
        key=lambda pair: pair[0],
        default=None,
    )


def _break(link: Link, expected: int, previous: str, unit: str) -> str | None:
    """What is wrong with ``link`` within its own chain, if anything."""
    if link.seq != expected:
        return f"expected seq {expected}; {unit} before it are missing"
    if link.prev_hash != previous:
        return "does not link to the one before it"
    if link.relinked is None:
        return "names an audit key this installation does not hold"
    if link.relinked != link.entry_hash:
        return "its content does not match its hash; it was changed"
    return None
