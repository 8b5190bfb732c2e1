"""The auditors' pages: the explorer over the console's record, its streamed export, and the
platform's operation detail as a readable before → after."""

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from orbit_console.audit.status import chain_status
from orbit_console.console import explorer
from orbit_console.console.forms import ExplorerFilters
from orbit_console.console.views.common import arender, console_view, requires_role, task_client
from orbit_console.decisions.models import ConsoleEvent
from orbit_console.decisions.submissions import record_export
from orbit_console.lib.ids import is_id
from orbit_console.people.person import AUDITOR, SUPERVISOR, Person, actor_names

RENDERS: dict[str, type[explorer.CsvRender] | type[explorer.JsonLinesRender]] = {
    "csv": explorer.CsvRender,
    "jsonl": explorer.JsonLinesRender,
}


async def _filters(request: HttpRequest) -> tuple[ExplorerFilters, explorer.Filters | None]:
    """The filters, or ``None`` when they do not validate (the form then shows why): an id start
    shared by several ids is refused with some of them. Whatever was asked, only what the
    reader's credentials cover is read."""
    form, filters = _read_filters(request)
    if filters is None:
        return form, None
    shared = await sync_to_async(explorer.ambiguous)(filters)
    for field, ids in shared.items():
        form.add_error(
            field,
            _("Several ids start with %(start)s (%(some)s…): type more of it.")
            % {"start": (start := getattr(filters, field)), "some": _distinct_starts(start, ids)},
        )
    return form, None if shared else filters


def _distinct_starts(start: str, ids: list[str]) -> str:
    """The ids, each cut just past the start they share (four more characters)."""
    return ", ".join(dict.fromkeys(i[: len(start) + 4] for i in ids))


def _read_filters(request: HttpRequest) -> tuple[ExplorerFilters, explorer.Filters | None]:
    form = ExplorerFilters(request.GET or None)
    if request.GET and not form.is_valid():
        return form, None
    data = form.cleaned_data if request.GET else {}
    person: Person = request.person  # type: ignore[attr-defined]
    return form, explorer.Filters(
        scopes=tuple((c.namespace_id, c.queue_scope) for c in person.credentials),
        person=data.get("person") or "",
        kind=data.get("kind") or "",
        outcome=data.get("outcome") or "",
        task_id=data.get("task_id") or "",
        queue_id=data.get("queue_id") or "",
        since=data.get("since"),
        until=data.get("until"),
    )


@require_GET
@vary_on_headers("HX-Request")  # the fragment and the page share a URL (hx-push-url)
@console_view
@requires_role(AUDITOR, SUPERVISOR)
async def explorer_page(request: HttpRequest) -> HttpResponse:
    form, filters = await _filters(request)
    entries: list[ConsoleEvent] = []
    rows: list[tuple[ConsoleEvent, explorer.Decision]] = []
    next_cursor: str | None = None
    if filters is not None:
        entries, next_cursor = await sync_to_async(explorer.page)(
            filters, request.GET.get("cursor")
        )
        rows = await sync_to_async(lambda: [(e, explorer.decision(e)) for e in entries])()
    # Only what carries the checkpoint key's signature: rows written by hand are named, not shown.
    status = await sync_to_async(chain_status)()
    query = request.GET.copy()
    query.pop("cursor", None)
    context = {
        "form": form,
        "entries": entries,
        "rows": rows,
        "next_query": _with(query, cursor=next_cursor) if next_cursor else None,
        "export_query": query.urlencode(),
        "status": status,
        "verification": status.verification,
        "checkpoint": status.checkpoint,
        "filtered": bool(request.GET),
    }
    template = "console/audit.html#results" if request.htmx else "console/audit.html"  # type: ignore[attr-defined]
    return await arender(request, template, context)


def _with(query: Any, **values: str) -> str:
    query = query.copy()
    for name, value in values.items():
        query[name] = value
    return query.urlencode()


@require_GET
@console_view
@requires_role(AUDITOR, SUPERVISOR)
async def export(request: HttpRequest, fmt: str) -> HttpResponseBase:
    render = RENDERS.get(fmt)
    if render is None:
        raise Http404("no such format")
    form, filters = await _filters(request)
    if filters is None:
        context = {"form": form, "entries": []}
        return await arender(request, "console/audit.html", context, status=400)
    now = timezone.now()
    person: Person = request.person  # type: ignore[attr-defined]
    note = json.dumps(
        {"format": fmt, "filter": filters.describe(), "exported_at": now.isoformat()},
        ensure_ascii=False,
        sort_keys=True,
    )
    await sync_to_async(record_export)(
        actor=person.user,  # type: ignore[arg-type]
        note=note,
        namespace_ids=person.namespaces,
    )
    response = StreamingHttpResponse(
        explorer.stream(filters, render()), content_type=render.content_type
    )
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = (
        f'attachment; filename="orbit-console-audit-{stamp}.{render.extension}"'
    )
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@console_view
async def operation_detail(request: HttpRequest, task_id: str, audit_id: str) -> HttpResponse:
    """The platform's record of one operation, with before → after as a readable diff."""
    if not is_id(task_id) or not is_id(audit_id):
        raise Http404("no such operation")
    async with await task_client(request, task_id) as orbit:
        operation = await orbit.get_task_operation(task_id, audit_id)
    before = operation.before if isinstance(operation.before, dict) else {}
    after = operation.after if isinstance(operation.after, dict) else {}
    rows = [
        (name, before.get(name, None), after.get(name, None), before.get(name) != after.get(name))
        for name in list(dict.fromkeys([*before, *after]))
    ]
    names = await actor_names({operation.actor_id})
    context = {
        "operation": operation,
        "rows": rows,
        "task_id": task_id,
        "actor": names.get(operation.actor_id, ""),
    }
    return await arender(request, "console/operation.html", context)
