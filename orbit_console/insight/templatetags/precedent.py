"""``{% precedent_panel namespace_id handler error_code action excluding %}``: what was decided
before on tasks of the same handler with the same last error code in the namespace (issue 43,
docs/insight.md "Precedent"), where a decision is made — the wizards' decide step, the page a
supervisor approves a proposal from (``insight/partials/precedent.html`` includes it).

Shown to a person holding a credential in the namespace, and only the decisions of the queues
that credential reads (docs/access.md): a credential limited to some queues sees nothing of the
others. It informs; nothing in it fills in or chooses anything of the decision."""

from typing import Any

from django import template
from django.utils.translation import gettext_lazy as _

from orbit_console.insight.selectors import precedent

register = template.Library()

# The outcomes counted, in the order shown, with their words (a retry's new task's ends are
# the handler's retries', shown apart).
OUTCOMES = {
    "succeeded": _("declared SUCCEEDED"),
    "failed": _("declared FAILED"),
    "retried": _("retried"),
    "rejected": _("proposal rejected"),
    "expired": _("proposal expired"),
    "withdrawn": _("proposal withdrawn"),
    "refused": _("refused by the recovery API"),
    "cancelled": _("cancelled before it was sent"),
}
REASON_CHARS = 280


@register.inclusion_tag("insight/partials/precedent_panel.html", takes_context=True)
def precedent_panel(
    context: template.Context,
    namespace_id: str,
    handler: str,
    error_code: str,
    action: str,
    excluding: str = "",
) -> dict[str, Any]:
    person = getattr(context.get("request"), "person", None)
    credential = person.credential_in(namespace_id) if person is not None else None
    if credential is None or not handler:
        return {"shown": False}
    found = precedent(
        namespace_id,
        handler,
        error_code,
        excluding=excluding,
        queue_ids=credential.queue_scope or None,
    )
    succeeded, ended = found.retry_success
    return {
        "shown": True,
        "namespace_id": namespace_id,
        "handler": handler,
        "error_code": error_code,
        "action": action,
        "since": found.since,
        "counts": [(OUTCOMES[key], found.counts[key]) for key in OUTCOMES if found.counts.get(key)],
        "decided": sum(found.counts.get(key, 0) for key in OUTCOMES),
        "decisions": [(each, OUTCOMES.get(each.outcome, each.outcome)) for each in found.decisions],
        "retries_succeeded": succeeded,
        "retries_ended": ended,
        "reason_chars": REASON_CHARS,
    }
