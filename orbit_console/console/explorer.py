"""The audit explorer's reads: the console's append-only record, filtered, keyset-paged and
streamed for export in bounded memory."""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signing
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce, Lower
from django.utils.translation import gettext as _

from orbit_console.decisions.evidence import link_for, policy_for
from orbit_console.decisions.models import Approval, ConsoleEvent, EvidencePolicy
from orbit_console.lib import csvcells, notes
from orbit_console.lib.keyset import older_than
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.people.accounts import company_names

PAGE_SIZE = 50
EXPORT_BATCH = 1000
ID_LENGTH = 32
_CURSOR_SALT = "orbit.console.explorer"


@dataclass(frozen=True)
class Filters:
    """What the reader asked for, within the scope of the reader's credentials (``scopes``:
    per namespace, the queues its credential is limited to, empty for the whole namespace),
    never taken from the request (console/access.py)."""

    scopes: tuple[tuple[str, frozenset[str]], ...] = ()
    person: str = ""
    kind: str = ""
    outcome: str = ""
    task_id: str = ""
    queue_id: str = ""
    since: datetime | None = None
    until: datetime | None = None

    def describe(self) -> dict[str, str]:
        described = {
            name: value
            for name, value in vars(self).items()
            if value and name not in ("since", "until", "scopes")
        }
        if self.since:
            described["since"] = format_utc(self.since)
        if self.until:
            described["until"] = format_utc(self.until)
        return described


def _in_scope(filters: Filters) -> QuerySet[ConsoleEvent]:
    scope = Q(pk__in=[])  # no credential: nothing
    for namespace_id, queues in filters.scopes:
        if namespace_id:
            scope |= Q(namespace_id=namespace_id, **({"queue_id__in": queues} if queues else {}))
    return ConsoleEvent.objects.filter(scope)


def _id_or_start(field: str, value: str) -> Q:
    """A whole id, or every id that starts with ``value`` — as a range of the index (hex ids:
    "g" comes after every digit), which both databases walk without a scan."""
    if len(value) == ID_LENGTH:
        return Q(**{field: value})
    return Q(**{f"{field}__gte": value, f"{field}__lt": value + "g"})


def ambiguous(filters: Filters) -> dict[str, list[str]]:
    """The id filters given as a start that more than one id in the reader's scope begins
    with, each with (some of) those ids: the reader must type more of it."""
    found = {}
    for field in ("task_id", "queue_id"):
        value = getattr(filters, field)
        if value and len(value) < ID_LENGTH:
            ids = _in_scope(filters).filter(_id_or_start(field, value))
            distinct = list(ids.order_by(field).values_list(field, flat=True).distinct()[:6])
            if len(distinct) > 1:
                found[field] = distinct
    return found


def events(filters: Filters) -> QuerySet[ConsoleEvent]:
    """The entries, with what each one needs to be read on its own (``Decision``): the
    decision's author's name, batch and proposal as columns of the same query (no user rows
    built: an export reads 100 000s of entries), its body from the joined submission,
    proposal or batch; the approvers are read per page or export batch (``with_approvers``)."""
    rows = (
        _in_scope(filters)
        .select_related("actor", "submission", "proposal", "batch")
        .annotate(
            author_name=Coalesce(
                "submission__created_by__username",
                "proposal__proposed_by__username",
                "batch__created_by__username",
            ),
            batch_of=Coalesce("batch_id", "submission__batch_item__batch_id"),
            proposal_of=Coalesce("proposal_id", "submission__proposal_id"),
        )
    )
    if filters.person:
        # In any case, also under MySQL's binary collation (where LIKE keeps case). An entry
        # the console wrote itself (a batch's sends, the reconciler's) belongs to the person
        # whose decision it carries out: filtering by person finds it (``Decision.person``).
        person = filters.person.lower()
        rows = rows.alias(
            actor_name=Lower("actor__username"), author_lower=Lower("author_name")
        ).filter(
            Q(actor_name__startswith=person)
            | Q(actor__isnull=True, author_lower__startswith=person)
        )
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    if filters.outcome:
        rows = rows.filter(submission__state=filters.outcome)
    if filters.task_id:
        rows = rows.filter(_id_or_start("task_id", filters.task_id))
    if filters.queue_id:
        rows = rows.filter(_id_or_start("queue_id", filters.queue_id))
    if filters.since:
        rows = rows.filter(created_at__gte=filters.since)
    if filters.until:
        rows = rows.filter(created_at__lt=filters.until)
    return rows


def page(filters: Filters, cursor: str | None) -> tuple[list[ConsoleEvent], str | None]:
    """One page, newest first; ``cursor`` continues after the last entry of the previous one."""
    rows = events(filters)
    if cursor:
        try:
            created_at, event_id = signing.loads(cursor, salt=_CURSOR_SALT)
            rows = rows.filter(older_than(datetime.fromisoformat(created_at), event_id))
        except (signing.BadSignature, ValueError, TypeError):
            pass  # a broken cursor starts again from the newest
    entries = list(rows.order_by("-created_at", "-id")[: PAGE_SIZE + 1])
    if len(entries) <= PAGE_SIZE:
        return with_approvers(entries), None
    entries = with_approvers(entries[:PAGE_SIZE])
    last = entries[-1]
    return entries, signing.dumps([last.created_at.isoformat(), last.id], salt=_CURSOR_SALT)


@lru_cache(maxsize=16)  # one decision's entries (stored, sent, receipt...) share its body
def _json(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def with_approvers(entries: list[ConsoleEvent]) -> list[ConsoleEvent]:
    """The entries, each with the names of the supervisors who approved its decision (its
    proposal's or its batch's approvals), read in one query for all of them."""
    proposals = {e.proposal_of for e in entries if e.proposal_of}  # type: ignore[attr-defined]
    batches = {e.batch_of for e in entries if e.batch_of}  # type: ignore[attr-defined]
    names: dict[tuple[str, str], list[str]] = {}
    if proposals or batches:
        approvals = (
            Approval.objects.filter(Q(proposal_id__in=proposals) | Q(batch_id__in=batches))
            .order_by("created_at", "id")
            .values_list("proposal_id", "batch_id", "approver__username")
        )
        for proposal_id, batch_id, name in approvals:
            key = ("proposal", proposal_id) if proposal_id else ("batch", batch_id)
            names.setdefault(key, []).append(name)
    for entry in entries:
        entry.approved_by = tuple(  # type: ignore[attr-defined]
            names.get(("proposal", entry.proposal_of), [])  # type: ignore[attr-defined]
            or names.get(("batch", entry.batch_of), [])  # type: ignore[attr-defined]
        )
    # Which of the people named are company accounts, marked wherever they are named.
    named = {name for found in names.values() for name in found}
    for entry in entries:
        named.add(getattr(entry, "author_name", None) or "")
        named.add(entry.actor.get_username() if entry.actor is not None else "")
    company = company_names(named)
    for entry in entries:
        entry.company_names = company  # type: ignore[attr-defined]
    return entries


@dataclass(frozen=True)
class Decision:
    """What an entry of the record is about, read from the decision it belongs to (its
    submission, proposal or batch) when it is read: the record itself is append-only and is
    never rewritten. ``person`` is whose act it is — the entry's actor, or, for what the
    console did on its own (a batch's sends, the reconciler), the author of the decision it
    carried out (``by_console``); ``approved_by`` names the supervisors whose approval sent it."""

    person: str
    by_console: bool
    approved_by: tuple[str, ...]
    company: frozenset[str]  # those of the names above that are company accounts
    batch_id: str
    reason: str
    evidence_ref: str
    outcome: str
    body: str


def decision(event: ConsoleEvent) -> Decision:
    """What ``event`` is about; ``event`` comes from ``events`` and ``with_approvers``."""
    submission, proposal, batch = event.submission, event.proposal, event.batch
    author: str = getattr(event, "author_name", None) or ""
    actor = event.actor.get_username() if event.actor is not None else author
    if submission is not None:
        body = submission.body
    elif proposal is not None:
        body = proposal.body
    else:
        body = batch.decision if batch is not None else ""
    fields = _json(body)
    return Decision(
        person=actor,
        by_console=event.actor is None and bool(actor),
        approved_by=tuple(getattr(event, "approved_by", ())),
        company=getattr(event, "company_names", frozenset()),
        batch_id=getattr(event, "batch_of", None) or "",
        reason=str(fields.get("reason", "")),
        evidence_ref=str(fields.get("evidence_ref", "")),
        outcome=str(fields.get("outcome", "")),
        body=body,
    )


def readable_note(note: str) -> str:
    """A note for people. An export's note, which the console stores as JSON (its format,
    filter and time), reads "CSV export · filter: person = ana"; other notes the system wrote
    in the reader's language (``notes.shown``); a person's note as they wrote it."""
    fields = _json(note) if note.startswith("{") else {}
    if not fields:
        return notes.shown(note)
    parts = []
    if fields.get("format"):
        parts.append(_("%(format)s export") % {"format": str(fields["format"]).upper()})
    if "filter" in fields:
        described = fields["filter"] if isinstance(fields["filter"], dict) else {}
        shown = ", ".join(f"{name} = {value}" for name, value in described.items())
        parts.append(_("filter: %(filter)s") % {"filter": shown} if shown else _("no filter"))
    known = ("format", "filter", "exported_at")
    parts.extend(f"{name}: {value}" for name, value in fields.items() if name not in known)
    return " · ".join(parts)


EXPORT_FIELDS = [
    "seq",
    "id",
    "created_at",
    "kind",
    "actor",
    "person",
    "approved_by",
    "task_id",
    "queue_id",
    "submission_id",
    "submission_state",
    "audit_id",
    "proposal_id",
    "batch_id",
    "reason",
    "evidence_ref",
    "evidence_url",
    "decided_outcome",
    "body",
    "note",
    "prev_hash",
    "entry_hash",
]


# An export is read outside the console, in no language of its own: a company account's name
# carries this mark there (docs/sign-in.md), as the pages' badge does.
COMPANY_MARK = " (company)"


def as_row(event: ConsoleEvent) -> dict[str, Any]:
    submission = event.submission
    decided = decision(event)

    def shown(name: str) -> str:
        return f"{name}{COMPANY_MARK}" if name in decided.company else name

    return {
        "seq": event.seq,
        "id": event.id,
        "created_at": format_utc(event.created_at),
        "kind": event.kind,
        "actor": shown(event.actor.get_username()) if event.actor is not None else "",
        "person": shown(decided.person),
        "approved_by": ", ".join(shown(name) for name in decided.approved_by),
        "task_id": event.task_id,
        "queue_id": event.queue_id,
        "submission_id": event.submission_id or "",
        "submission_state": submission.state if submission is not None else "",
        "audit_id": submission.audit_id if submission is not None else "",
        "proposal_id": event.proposal_id or "",
        "batch_id": decided.batch_id,
        "reason": decided.reason,
        "evidence_ref": decided.evidence_ref,
        "evidence_url": getattr(event, "evidence_url", ""),
        "decided_outcome": decided.outcome,
        "body": decided.body,
        "note": event.note,
        "prev_hash": event.prev_hash,
        "entry_hash": event.entry_hash,
    }


def _batch(
    filters: Filters,
    position: tuple[datetime, str] | None,
    policies: dict[str, EvidencePolicy | None],
) -> list[ConsoleEvent]:
    rows = events(filters)
    if position is not None:
        rows = rows.filter(older_than(*position))
    batch = with_approvers(list(rows.order_by("-created_at", "-id")[:EXPORT_BATCH]))
    with_evidence_links(batch, policies)
    return batch


def with_evidence_links(
    batch: list[ConsoleEvent], policies: dict[str, EvidencePolicy | None]
) -> None:
    """Sets ``evidence_url`` on each entry: the link its evidence reference makes under its
    namespace's policy (docs/notifications.md, "Evidence that links"), "" without one. Each
    namespace's policy is read once per export (``policies``)."""
    for event in batch:
        reference = decision(event).evidence_ref
        url = ""
        if reference:
            if event.namespace_id not in policies:
                policies[event.namespace_id] = policy_for(event.namespace_id)
            policy = policies[event.namespace_id]
            url = link_for(policy, reference) if policy is not None else ""
        event.evidence_url = url  # type: ignore[attr-defined]


async def stream(filters: Filters, render: Any) -> AsyncIterator[str]:
    """Every matching entry, newest first, fetched in keyset batches so that an export of any
    size holds one batch in memory at a time."""
    position: tuple[datetime, str] | None = None
    policies: dict[str, EvidencePolicy | None] = {}
    header = render.header()
    if header:
        yield header
    while True:
        batch = await sync_to_async(_batch)(filters, position, policies)
        if not batch:
            return
        yield "".join(render.line(as_row(event)) for event in batch)
        position = (batch[-1].created_at, batch[-1].id)


class CsvRender:
    content_type = "text/csv; charset=utf-8"
    extension = "csv"

    def header(self) -> str:
        return csvcells.lines([EXPORT_FIELDS])

    def line(self, row: dict[str, Any]) -> str:
        return csvcells.lines([[row[name] for name in EXPORT_FIELDS]])


class JsonLinesRender:
    content_type = "application/x-ndjson"
    extension = "jsonl"

    def header(self) -> str:
        return ""

    def line(self, row: dict[str, Any]) -> str:
        return json.dumps(row, ensure_ascii=False) + "\n"
