"""How alike two account names look: a Unicode confusables skeleton (UTS #39) after case folding.

A company person's name is made at their first sign-in from what the provider says
(``preferred_username``); it must not look like the name of anyone already here:
``\u0455upervisor`` (a Cyrillic dze), ``Supervisor`` or a full-width ``supervisor`` beside
``supervisor`` would read the same in the header, the approvals queue, the record and the
notifications. Two names collide when their skeletons are equal (``collides``); a name made at
sign-in is one whose skeleton no other account's has (``signin/placement.py``), and ``console
user`` refuses a new name that collides.

The skeleton is the one UTS #39 defines — NFD, each character replaced by its prototype in
Unicode's ``confusables.txt``, NFD again — taken after NFKC case folding (``Supervisor`` and
``supervisor`` are one name to a reader). The data is Unicode's, as the maintained
``confusable-homoglyphs`` package ships it; that package offers no skeleton (only "is this
string mixed-script and confusable"), and keeps each line of ``confusables.txt`` as an
undirected pair, so the prototypes are recovered here: the file maps every source character to
one prototype and never maps a prototype, so each group of look-alikes is a star around its
prototype — the group's one multi-character member when it has one, else the member alike to
every other. Two-member groups have no centre to find; either member stands for both, which
gives the same equalities. (ICU's ``SpoofChecker`` computes skeletons too, but needs ICU's C++
library, which a fresh machine lacks; docs/sign-in.md says why this one.)
"""

import unicodedata
from functools import cache

# Names are at most 150 characters (Django's user name); a claim is cut long before any cost.
MAX_COMPARED = 300
_LRM = "\u200e"  # the data's rendering of right-to-left text carries these marks


@cache
def _prototypes() -> dict[str, str]:
    """Every confusable character's prototype (a character or a short sequence)."""
    from confusable_homoglyphs.confusables import confusables_data

    alike: dict[str, set[str]] = {}
    for text, entries in confusables_data.items():
        one = text.replace(_LRM, "")
        for entry in entries:
            other = str(entry["c"]).replace(_LRM, "")
            if one and other and one != other:
                alike.setdefault(one, set()).add(other)
                alike.setdefault(other, set()).add(one)
    prototype: dict[str, str] = {}
    for start in alike:
        if start in prototype:
            continue
        group, stack = {start}, [start]
        while stack:
            for other in alike[stack.pop()]:
                if other not in group:
                    group.add(other)
                    stack.append(other)
        sequences = [member for member in group if len(member) > 1]
        centres = [member for member in group if len(alike[member]) == len(group) - 1]
        chosen = sequences[0] if sequences else min((len(group) > 2 and centres) or group)
        for member in group:
            prototype[member] = chosen
    # A sequence's characters are prototypes themselves; map them as a single one would be
    # mapped (the same choice of stand-in for a two-member group).
    return {
        member: "".join(prototype.get(char, char) if len(char) == 1 else char for char in chosen)
        for member, chosen in prototype.items()
        if len(member) == 1
    }


def skeleton(name: str) -> str:
    """What ``name`` looks like: equal for names a reader cannot tell apart. Folded again after
    the first skeleton, whose prototypes may be capitals (``0`` → ``O``): so ``0perator`` looks
    like ``operator`` as it does to a reader."""
    once = _skeleton(unicodedata.normalize("NFKC", name[:MAX_COMPARED]).casefold())
    return _skeleton(once.casefold())


def _skeleton(text: str) -> str:
    """UTS #39's skeleton: NFD, every character by its prototype, NFD."""
    table = _prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(table.get(char, char) for char in decomposed))


def collides(name: str, others: list[str]) -> list[str]:
    """Those of ``others`` that look like ``name`` (itself excepted)."""
    own = skeleton(name)
    return [other for other in others if other != name and skeleton(other) == own]
