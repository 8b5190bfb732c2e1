"""``manage.py evidence``: a namespace's rule for evidence references and their links.

    evidence set NAMESPACE --pattern 'INC-(\\d+)' --example INC-1234 \\
        [--link 'https://tracker.example.com/browse/INC-{1}']
    evidence show NAMESPACE
    evidence clear NAMESPACE
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from orbit_console.decisions.evidence import (
    PolicyRefused,
    evidence_policy_clear,
    evidence_policy_set,
    policy_for,
)


class Command(BaseCommand):
    help = "Set, show or clear a namespace's evidence-reference policy."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", choices=["set", "show", "clear"])
        parser.add_argument("namespace")
        parser.add_argument("--pattern", default="")
        parser.add_argument("--example", default="")
        parser.add_argument("--link", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = options["namespace"]
        if options["verb"] == "set":
            try:
                evidence_policy_set(
                    namespace_id=namespace,
                    pattern=options["pattern"],
                    example=options["example"],
                    link_template=options["link"],
                )
            except PolicyRefused as error:
                raise CommandError(str(error)) from error
        elif options["verb"] == "clear":
            evidence_policy_clear(namespace_id=namespace)
        policy = policy_for(namespace)
        if policy is None:
            self.stdout.write(f"{namespace}: no policy")
        else:
            self.stdout.write(
                f"{namespace}: pattern {policy.pattern} example {policy.example} "
                f"link {policy.link_template or '-'}"
            )
