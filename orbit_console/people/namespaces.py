"""The namespaces the console knows, for the commands that name one (``lib/namespaces.py``):
what it keeps per namespace — webhook endpoints, evidence policies — is kept under an id
of one of them (issue 41).

With the embedded API the console knows the ledger's namespaces. With an external Orbit it
knows those its people hold credentials in (named as the API named them when each was
stored) and those the deployment names (``CONSOLE_NAMESPACE_NAMES``): the recovery API lists
no namespaces, so a namespace nobody works in yet is made known by naming it there.
"""

from django.conf import settings

from orbit_console.lib.namespaces import Namespaces
from orbit_console.people.models import OrbitCredential


def known_namespaces() -> Namespaces:
    """The namespaces the console knows, with their names (the ledger's: oldest first)."""
    if settings.ORBIT_API_EMBEDDED:
        from orbit_console.ledger.lifecycle import namespace_names

        return Namespaces(namespace_names())
    held = OrbitCredential.objects.exclude(namespace_id="").order_by("namespace_id")
    found = list(held.values_list("namespace_id", "namespace_name").distinct())
    return Namespaces(found + [(id_, "") for id_ in settings.CONSOLE_NAMESPACE_NAMES])


def id_of_namespace(named: str) -> str:
    """The id of the namespace an administrator named by its id or exact name."""
    return known_namespaces().id_of(named)
