"""What a notification says, in a given language: a title, a few lines of facts and the link.
The same words serve the menu, email and the Slack payload."""

import re
from typing import Any

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from orbit_console.notifications.kinds import title
from orbit_console.notifications.models import Notification
from orbit_console.people.accounts import marked

COUNT_LABELS = {
    "applied": "Applied",
    "deduplicated": "Applied before (deduplicated)",
    "changed": "Changed since selected",
    "refused": "Refused by the recovery API",
    "failed": "Failed: no definite answer in time",
    "cancelled": "Cancelled before it was sent",
    "skipped": "Not eligible",
    "taken": "Already decided for this revision",
    "open": gettext_noop("Still open"),
}


# Whatever breaks a line, or is no text (C0 and C1 controls, Unicode's line and paragraph
# separators): a fact shown as one line stays one, whatever a person typed into it.
_LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(text: str) -> str:
    """``text`` on one line: each run of line breaks and control characters becomes a space.
    A rejection's reason with "\nBy: ..." in it can then not pass for a line of its own."""
    return _LINE_BREAKING.sub(" ", text).strip()


def link(notification: Notification) -> str:
    """The page it is about, absolute (``CONSOLE_BASE_URL``)."""
    if not notification.path:
        return ""
    return settings.CONSOLE_BASE_URL.rstrip("/") + notification.path


def lines(notification: Notification) -> list[str]:
    """The facts, one line each (``one_line``), in the active language."""
    data: dict[str, Any] = notification.data
    found: list[str] = []
    if notification.task_id:
        found.append(_("Task: %(id)s") % {"id": notification.task_id})
    if notification.batch_id:
        found.append(_("Batch: %(id)s") % {"id": notification.batch_id})
    if notification.submission_id:
        found.append(_("Decision: %(id)s") % {"id": notification.submission_id})
    if notification.namespace_id:
        found.append(_("Namespace: %(id)s") % {"id": notification.namespace_id})
    if data.get("items") is not None:
        found.append(_("Tasks selected: %(n)s") % {"n": data["items"]})
    if data.get("by"):
        found.append(_("By: %(name)s") % {"name": marked(data["by"], bool(data.get("by_company")))})
    if data.get("reason"):
        found.append(_("Reason: %(reason)s") % {"reason": data["reason"]})
    if data.get("evidence"):
        found.append(_("Evidence: %(ref)s") % {"ref": data["evidence"]})
        if data.get("evidence_link"):
            found.append(_("Evidence link: %(url)s") % {"url": data["evidence_link"]})
    if data.get("expires_at") and notification.kind.endswith((".waiting", ".reminder")):
        found.append(_("Expires: %(when)s") % {"when": data["expires_at"]})
    for key, count in sorted((data.get("counts") or {}).items()):
        found.append(f"{_(COUNT_LABELS.get(key, key))}: {count}")
    if data.get("minutes") is not None:
        found.append(_("Unknown for %(n)s minutes") % {"n": data["minutes"]})
    if data.get("first_break"):
        found.append(_("First break: %(where)s") % {"where": data["first_break"]})
    if data.get("last_checkpoint_at"):
        found.append(_("Last checkpoint: %(when)s") % {"when": data["last_checkpoint_at"]})
    if data.get("handler"):
        found.append(_("Handler: %(handler)s") % {"handler": data["handler"]})
    if data.get("waiting_since"):
        found.append(_("Waiting since: %(when)s") % {"when": data["waiting_since"]})
    if data.get("objective"):
        found.append(_("Objective: decide within %(objective)s") % {"objective": data["objective"]})
    if data.get("deadline"):
        found.append(_("Deadline: %(when)s") % {"when": data["deadline"]})
    if data.get("waiting") is not None:
        found.append(_("Tasks waiting in review: %(n)s") % {"n": data["waiting"]})
    if data.get("stalled_since"):
        found.append(_("No decision since: %(when)s") % {"when": data["stalled_since"]})
    if data.get("last_decision_at"):
        found.append(_("Last decision: %(when)s") % {"when": data["last_decision_at"]})
    if data.get("stall_after"):
        found.append(_("Stall alarm after: %(after)s") % {"after": data["stall_after"]})
    return [one_line(line) for line in found]


def rendered(notification: Notification, language: str) -> tuple[str, list[str]]:
    """Title and lines in ``language``."""
    with translation.override(language):
        return title(notification.kind), lines(notification)
