from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from orbit_console.console.views.session import session_state
from orbit_console.people.person import load_person

ROLE_NAMES = {"operator": _("Operator"), "supervisor": _("Supervisor"), "auditor": _("Auditor")}


def person(request: HttpRequest) -> dict[str, object]:
    """The signed-in person (set by ``console_view``; read here for a page no console view
    served, such as a 404 for an unknown address) and their roles, for the page header."""
    current = getattr(request, "person", None)
    if current is None and hasattr(request, "user"):
        current = load_person(request.user)
    if current is None:
        return {"person": None, "person_roles": ""}
    roles = ", ".join(str(ROLE_NAMES[role]) for role in sorted(current.roles) if role in ROLE_NAMES)
    # The counts of the navigation (what waits for approval, what is unread) are not here:
    # every template rendered with a request, each htmx fragment too, would count them. The
    # header counts them where it renders ({% nav_waiting %}, {% unread_count %}).
    return {"person": current, "person_roles": roles}


def session(request: HttpRequest) -> dict[str, object]:
    """When the signed-in person's session ends, for the page's warning before it does
    (``base.html``, ``static/js/console.js``; docs/console.md, "Sessions and drafts")."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"session_state": None}
    return {"session_state": session_state(request)}
