"""Timeline entries: the platform's operations and the console's own events of one task, in
one shape, rendered by one partial (``timeline/partials/entry.html``) for the page and for
live pushes alike."""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.utils.translation import gettext_lazy as _

from orbit_console.client import OperationDetail
from orbit_console.decisions.models import EVENT_LABELS, ConsoleEvent
from orbit_console.lib.rfc3339 import format_utc, parse_utc
from orbit_console.people.person import is_company_actor

ACTION_LABELS = {
    "task.accepted": _("Accepted"),
    "task.execution_result": _("Execution result"),
    "task.cancelled": _("Cancelled"),
    "task.review": _("Reviewed"),
    "task.retry": _("Retried"),
}


@dataclass
class Entry:
    key: str  # unique across sources: "op-<audit id>" or "ev-<event id>"
    source: str  # "platform" or "console"
    kind: str
    created_at: datetime
    actor: str
    actor_id: str = ""
    reason: str = ""
    evidence_ref: str = ""
    before: Any = None
    after: Any = None
    note: str = ""
    submission_id: str = ""
    proposal_id: str = ""
    batch_id: str = ""  # the batch the decision is part of (docs/bulk.md)
    # A console entry with no actor: the author of the decision the console carried out.
    on_behalf_of: str = ""
    # Company accounts are marked wherever they are named (docs/sign-in.md).
    actor_company: bool = False
    on_behalf_company: bool = False
    changes: list[tuple[str, str, str]] = field(default_factory=list)  # (what, before, after)
    new_task_id: str = ""
    source_task_id: str = ""
    detail: Any = None

    @property
    def label(self) -> str:
        labels = ACTION_LABELS if self.source == "platform" else EVENT_LABELS
        return str(labels.get(self.kind, self.kind))

    @property
    def company_names(self) -> frozenset[str]:
        """Those of the entry's people that are company accounts (``{{ name|named_in }}``)."""
        return frozenset(
            name
            for name, company in (
                (self.actor, self.actor_company),
                (self.on_behalf_of, self.on_behalf_company),
            )
            if company
        )

    @property
    def sort_key(self) -> str:
        """Orders entries as text, in Python and in the page's script alike: the time in UTC with
        all six fraction digits (``format_utc`` drops trailing zeros, and "00.5Z" sorts before
        "00Z" as text), then the key, which breaks ties."""
        return f"{self.created_at.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%f}Z|{self.key}"

    @property
    def timestamp(self) -> str:
        return format_utc(self.created_at)


def _changes(before: Any, after: Any) -> list[tuple[str, str, str]]:
    """A readable before → after of the task's state and revision, and of any other fact the
    operation recorded."""
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    rows = []
    for name in ("state", "revision"):
        # Only what the operation says it changed: a retry records the source's state before
        # and nothing of it after (the source stays as it was), which read "state FAILED → —".
        if name in after:
            rows.append((name, str(before.get(name, "—")), str(after[name])))
    for name, value in after.items():
        if name in ("state", "revision", "retry_task_id", "source_task_id", "retry_of"):
            continue
        rows.append((name, str(before.get(name, "—")), _scalar(value)))
    return rows


def _scalar(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def from_operation(
    operation: dict[str, Any] | OperationDetail, actor_names: dict[str, str]
) -> Entry:
    """An entry for a platform operation, from the API's detail or a live message."""
    data = _operation_dict(operation)
    after = data.get("after")
    after_dict = after if isinstance(after, dict) else {}
    actor_id = data["actor_id"]
    return Entry(
        key=f"op-{data['id']}",
        source="platform",
        kind=data["action"],
        created_at=parse_utc(data["created_at"])
        if isinstance(data["created_at"], str)
        else data["created_at"],
        actor=actor_names.get(actor_id, ""),
        actor_id=actor_id,
        actor_company=is_company_actor(actor_id),
        reason=data.get("reason") or "",
        evidence_ref=data.get("evidence_ref") or "",
        before=data.get("before"),
        after=after,
        changes=_changes(data.get("before"), after),
        new_task_id=after_dict.get("retry_task_id", "") if data["action"] == "task.retry" else "",
        source_task_id=after_dict.get("retry_of", ""),
        detail=data,
    )


def _operation_dict(operation: dict[str, Any] | OperationDetail) -> dict[str, Any]:
    if isinstance(operation, dict):
        return operation
    data = {
        "id": operation.id,
        "task_id": operation.task_id,
        "operation_id": operation.operation_id,
        "actor_id": operation.actor_id,
        "action": operation.action,
        "created_at": format_utc(operation.created_at),
        "reason": operation.reason,
        "before": operation.before,
        "after": operation.after,
    }
    if operation.evidence_ref is not None:
        data["evidence_ref"] = operation.evidence_ref
    return data


def from_event(event: ConsoleEvent | dict[str, Any]) -> Entry:
    """An entry for one of the console's own events, from the row or a live message."""
    data = event.as_message_data() if isinstance(event, ConsoleEvent) else event
    return Entry(
        key=f"ev-{data['id']}",
        source="console",
        kind=data["kind"],
        created_at=parse_utc(data["created_at"]),
        actor=data.get("actor") or "",
        on_behalf_of=data.get("for") or "",
        actor_company=bool(data.get("actor_company")),
        on_behalf_company=bool(data.get("for_company")),
        note=data.get("note") or "",
        submission_id=data.get("submission_id") or "",
        proposal_id=data.get("proposal_id") or "",
        batch_id=data.get("batch_id") or "",
    )


def merged(entries: list[Entry]) -> list[Entry]:
    """Newest first, by (time, key): the same order the page keeps when entries arrive live."""
    unique = {entry.key: entry for entry in entries}
    return sorted(unique.values(), key=lambda entry: entry.sort_key, reverse=True)
