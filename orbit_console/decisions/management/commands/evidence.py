"""``manage.py evidence``: a namespace's rule for evidence references and their links.

    evidence set NAMESPACE --pattern 'INC-(\\d+)' --example INC-1234 \\
        [--link 'https://tracker.example.com/browse/INC-{1}']
    evidence show [NAMESPACE]     (without one: every policy)
    evidence clear NAMESPACE

NAMESPACE is an id or an exact name (``lib/namespaces.py``). A policy kept under a namespace
the console does not know checks nothing (before issue 41, ``set`` kept a name typed for the
namespace as its id): ``show`` marks it; ``set`` and ``clear`` with the text it is kept under
replace or remove it.
"""

from collections.abc import Iterable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from orbit_console.decisions.evidence import (
    PolicyRefused,
    compiled,
    evidence_policy_clear,
    evidence_policy_set,
)
from orbit_console.decisions.models import EvidencePolicy
from orbit_console.lib.namespaces import NamespaceNotFound, Namespaces
from orbit_console.people.namespaces import known_namespaces

UNKNOWN = "UNKNOWN NAMESPACE: checks nothing; set it again by the namespace's id or name, or clear"
UNCHECKED = "NOT CHECKED: RE2 cannot match this pattern; set it again"


class Command(BaseCommand):
    help = "Set, show or clear a namespace's evidence-reference policy."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", choices=["set", "show", "clear"])
        parser.add_argument("namespace", nargs="?", help="an id or an exact name")
        parser.add_argument("--pattern", default="")
        parser.add_argument("--example", default="")
        parser.add_argument("--link", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        verb, typed = options["verb"], options["namespace"]
        known = known_namespaces()
        if typed is None:
            if verb != "show":
                raise CommandError(f"evidence {verb} takes a namespace (an id or a name)")
            self._show(EvidencePolicy.objects.order_by("namespace_id"), known)
            return
        try:
            namespace_id = known.id_of(typed)
        except NamespaceNotFound:
            # A policy kept under the very text typed, which names no namespace: clear is
            # how it goes; anything else shows it, marked, and fails as for any unknown.
            stray = EvidencePolicy.objects.filter(namespace_id=typed)
            if verb == "clear" and stray.exists():
                evidence_policy_clear(namespace_id=typed)
                self.stdout.write(f"{typed}: cleared the policy kept under an unknown namespace")
                return
            self._show(stray, known)
            raise
        # What was kept under the text typed (a name, before issue 41) meant this namespace.
        if verb == "set":
            try:
                evidence_policy_set(
                    namespace_id=namespace_id,
                    pattern=options["pattern"],
                    example=options["example"],
                    link_template=options["link"],
                    replacing=[typed],
                )
            except PolicyRefused as error:
                raise CommandError(str(error)) from error
        elif verb == "clear":
            evidence_policy_clear(namespace_id=namespace_id, replacing=[typed])
        policies = EvidencePolicy.objects.filter(namespace_id__in={namespace_id, typed})
        if not self._show(policies, known):
            self.stdout.write(f"{known.described(namespace_id)}: no policy")

    def _show(self, policies: Iterable[EvidencePolicy], known: Namespaces) -> int:
        """Write each policy, marking one kept under an unknown namespace and one RE2 cannot
        match; how many were written."""
        written = list(policies)
        for policy in written:
            marks = [UNKNOWN] * (policy.namespace_id not in known)
            marks += [UNCHECKED] * (compiled(policy) is None)
            self.stdout.write(
                f"{known.described(policy.namespace_id)}: pattern {policy.pattern} "
                f"example {policy.example} link {policy.link_template or '-'}"
                + "".join(f"  [{mark}]" for mark in marks)
            )
        return len(written)
