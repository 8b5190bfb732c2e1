"""Naming a namespace on the command line (issue 41: a name typed where an id was expected was
stored as the id, and nothing was ever delivered or checked).

Every command that takes a namespace resolves it here, the same way: its id, else the one
namespace with exactly that name — the API's or the deployment's (``CONSOLE_NAMESPACE_NAMES``);
case and spaces count, as ``console user`` has always matched. A name that no namespace has,
or that several have, stops the command with an error (exit status 1) that says which, lists
the namespaces known when they are few, and points at one that differs only in case or spaces.

Which namespaces are known is the caller's to say: the embedded ledger's for the commands that
act in it (``ledger.lifecycle.namespace_named``), the console's (``people/namespaces.py``) for
what the console keeps per namespace.
"""

from collections.abc import Iterable, Iterator

from django.conf import settings
from django.core.management.base import CommandError

# Up to this many known namespaces are listed in the error; past it, where to find them.
SHORT_LIST = 10


class NamespaceNotFound(CommandError):
    """No namespace goes by the text given, or several do: the message says which."""


class NamespaceAmbiguous(NamespaceNotFound):
    """Several namespaces go by the name given (company sign-in tells this apart from none:
    a rule may name a namespace before it exists, never one of several)."""


class Namespaces:
    """The namespaces a command knows, each with its names: the (id, name) pairs given (a
    namespace may come with several names, or "") and the deployment's names for them."""

    def __init__(self, known: Iterable[tuple[str, str]]) -> None:
        self.names: dict[str, list[str]] = {}
        configured = settings.CONSOLE_NAMESPACE_NAMES
        for id_, name in known:
            held = self.names.setdefault(id_, [])
            for each in (configured.get(id_, ""), name):
                if each and each not in held:
                    held.append(each)

    def __contains__(self, id_: object) -> bool:
        return id_ in self.names

    def __iter__(self) -> Iterator[str]:
        """The ids, in the order they were given."""
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def id_of(self, named: str) -> str:
        """The id of the namespace ``named`` names: its id, else its exact name."""
        if named in self.names:
            return named
        ids = sorted(id_ for id_, held in self.names.items() if named in held)
        if len(ids) == 1:
            return ids[0]
        if ids:
            raise NamespaceAmbiguous(
                f"several namespaces are named {named!r} ({', '.join(ids)}): pass the id of one"
            )
        raise NamespaceNotFound(f"no namespace {named!r}: {self._hint(named)}")

    def described(self, id_: str) -> str:
        """A namespace as errors and listings show it: its names, then its id."""
        names = self.names.get(id_, [])
        return f"{' / '.join(repr(name) for name in names)} ({id_})" if names else id_

    def _hint(self, named: str) -> str:
        loose = named.strip().casefold()
        close = [
            self.described(id_)
            for id_, held in self.names.items()
            if loose in {id_.casefold(), *(name.strip().casefold() for name in held)}
        ]
        if close:
            return f"names and ids are matched exactly; did you mean {' or '.join(close)}?"
        if not self.names:
            return "no namespace is known"
        if len(self.names) > SHORT_LIST:
            return (
                f"pass an id or an exact name of one of the {len(self.names)} namespaces known "
                "(manage.py console namespaces lists them)"
            )
        return "pass an id or an exact name of one of " + "; ".join(map(self.described, self))
