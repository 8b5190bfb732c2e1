"""The console's live lists.

Every socket stays authorised as its page would be (``lib/rechecked.py``, as the timeline's):
the person is read again from the database every ``CONSOLE_ACCESS_SECONDS``, and before any
push on an answer older than twice that; a person who no longer may see the page — their
role, their credential or their account taken away — is closed out with 4403 and gets no
further push.

- The supervisors' approvals queue, ``/ws/approvals``: new proposals and batches appear and
  decided ones disappear without a reload. Only supervisors connect, and stay.
- A batch's progress, ``/ws/batches/<id>``: counts, rate and latest items as they land.
- A person's decisions, ``/ws/decisions``: what each led to, as it moves (I2).
- The work queue's rows, ``/ws/queue?rows=<token>``: a row whose task moves (reviewed,
  retried, settled) says so at once. The page names its rows in a signed token (``rows_token``:
  the tasks the API listed to this person); the socket follows those tasks' groups, and every
  push is checked against the API first (``console/access.py``), as a page load would be.
"""

import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.core import signing
from django.db.models import Count, Q
from django.template.loader import render_to_string
from django.utils import timezone, translation

from orbit_console.client import OutcomeUnknown
from orbit_console.decisions.batches import (
    awaiting_approval,
    batch_group,
    seen_by,
    visible_batches,
)
from orbit_console.decisions.models import Batch, BatchState, Proposal, Submission
from orbit_console.decisions.proposals import APPROVALS_GROUP, visible_proposals
from orbit_console.lib.ids import is_id
from orbit_console.lib.live import (
    CLOSE_FORBIDDEN,
    join_or_close,
    person_group,
    signed_in_or_close,
    task_group,
)
from orbit_console.lib.readers import reader_of
from orbit_console.lib.rechecked import Rechecked
from orbit_console.ops.metrics import WEBSOCKETS_OPEN
from orbit_console.people.access import can_read_task
from orbit_console.people.accounts import accounts_of, mark_company
from orbit_console.people.person import SUPERVISOR, Person, person_now

logger = logging.getLogger("orbit.console.live")


class _Console(Rechecked, AsyncWebsocketConsumer):
    """A console socket that stays authorised: ``still_allowed`` reads the person afresh
    (``person_now``) and applies its page's rule (``allows``)."""

    user: Any
    person: Person

    def recheck_seconds(self) -> float:
        return float(settings.CONSOLE_ACCESS_SECONDS)

    async def still_allowed(self) -> bool:
        person = await database_sync_to_async(person_now)(self.user.pk)
        if person is None or not await self.allows(person):
            return False
        self.person = person
        return True

    async def allows(self, person: Person) -> bool:
        """Whether the page this socket belongs to would show itself to ``person``."""
        raise NotImplementedError


class _OneGroupConsumer(_Console):
    """A page's socket that follows one group, renders in the reader's language and zone, and
    is counted while open (``orbit_websockets_open``)."""

    kind = ""
    group = ""

    async def open_on(self, group: str) -> None:
        self.language, self.zone = reader_of(self.scope)
        if not await join_or_close(self, group):
            return
        self.group = group
        await self.accept()
        WEBSOCKETS_OPEN.labels(consumer=self.kind).inc()
        self.start_rechecking()

    async def leave(self) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.stop_rechecking()
        if self.group:
            WEBSOCKETS_OPEN.labels(consumer=self.kind).dec()
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = ""

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens; anything it sends is ignored."""


class ApprovalsConsumer(_OneGroupConsumer):
    kind = "approvals"

    async def connect(self) -> None:
        user = await signed_in_or_close(self)
        if user is None:
            return
        self.user = user
        if not await self.still_allowed():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.open_on(APPROVALS_GROUP)

    async def allows(self, person: Person) -> bool:
        return person.has_role(SUPERVISOR)

    @database_sync_to_async
    def _push(self, person: Person, proposal_id: str) -> Proposal | None:
        """The proposal if it is one the person's queue shows (their namespaces'), with what
        its row needs read now (whose it is, whether company sign-in made its proposer)."""
        proposals = visible_proposals(person).select_related("proposed_by")
        proposals = proposals.annotate(approved=Count("approvals"))
        proposal = proposals.filter(id=proposal_id).first()
        if proposal is not None:
            mark_company([proposal.proposed_by])
            self.viewer_ids = accounts_of(person.user.pk)
        return proposal

    async def approvals_changed(self, message: dict[str, Any]) -> None:
        if not await self.may_push():
            return
        person = self.person
        proposal = await self._push(person, message["proposal_id"])
        if proposal is None:
            return
        try:
            if not await can_read_task(person, proposal.task_id):  # console/access.py
                return
        except OutcomeUnknown:
            return  # fail closed: the page's next load shows it, once the API answers
        with translation.override(self.language), timezone.override(self.zone):
            context = {"proposal": proposal, "viewer_ids": self.viewer_ids}
            html = render_to_string("console/partials/proposal_push.html", context)
        await self.send(text_data=html)

    @database_sync_to_async
    def _batch_push(self, person: Person, batch_id: str) -> Batch | None:
        """As ``_push``, for a batch: the batch if the person sees it (its namespace's
        credential reads every one of its tasks)."""
        batch = visible_batches(person.namespaces).filter(id=batch_id).first()
        if batch is None or not seen_by(person, batch):
            return None
        if batch.state != BatchState.PROPOSED:
            return batch  # decided: its row goes
        self.viewer_ids = accounts_of(person.user.pk)
        found = next((b for b in awaiting_approval(person) if b.id == batch_id), None)
        if found is not None:
            mark_company([found.created_by])
        return found

    async def approvals_batch(self, message: dict[str, Any]) -> None:
        """A batch was proposed (its row appears), approved once more (its row, counted again)
        or decided (its row goes)."""
        if not await self.may_push():
            return
        batch = await self._batch_push(self.person, message["batch_id"])
        if batch is None:
            return
        with translation.override(self.language), timezone.override(self.zone):
            context = {"batch": batch, "viewer_ids": getattr(self, "viewer_ids", {self.user.pk})}
            html = await database_sync_to_async(render_to_string)(
                "console/partials/batch_push.html", context
            )
        await self.send(text_data=html)


# --- The work queue's rows ----------------------------------------------------------------------

_ROWS_SALT = "orbit.console.queue.rows"
MAX_ROWS = 100


def rows_token(user_id: int, task_ids: list[str]) -> str:
    """What the work queue shows this person, signed for its socket."""
    return signing.dumps([user_id, task_ids[:MAX_ROWS]], salt=_ROWS_SALT, compress=True)


def rows_of(token: str, user_id: int) -> list[str] | None:
    """The task ids of a token this server signed for this person (within a session's
    lifetime); ``None`` for any other."""
    try:
        owner, task_ids = signing.loads(token, salt=_ROWS_SALT, max_age=settings.SESSION_COOKIE_AGE)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if owner != user_id or not isinstance(task_ids, list):
        return None
    if len(task_ids) > MAX_ROWS or not all(isinstance(t, str) and is_id(t) for t in task_ids):
        return None
    return task_ids


class QueueRowsConsumer(_Console):
    """``/ws/queue``: open while the person holds a credential (the work queue's rule); each
    row's push is then checked against the API with their credentials as they are now."""

    async def connect(self) -> None:
        user = await signed_in_or_close(self)
        if user is None:
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("ascii", "replace"))
        rows = rows_of((query.get("rows") or [""])[0], user.pk)
        self.user = user
        if rows is None or not await self.still_allowed():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.rows = set(rows)
        self.language, self.zone = reader_of(self.scope)
        self.groups_joined: list[str] = []
        for task_id in rows:
            if not await join_or_close(self, task_group(task_id)):
                return
            self.groups_joined.append(task_group(task_id))
        await self.accept()
        WEBSOCKETS_OPEN.labels(consumer="queue").inc()
        self.counted = True
        self.start_rechecking()

    async def allows(self, person: Person) -> bool:
        return bool(person.credentials)

    async def leave(self) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.stop_rechecking()
        if getattr(self, "counted", False):
            WEBSOCKETS_OPEN.labels(consumer="queue").dec()
            self.counted = False
        await self.leave()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens; anything it sends is ignored."""

    async def _may_show(self, task_id: str) -> bool:
        """One of the person's credentials reads the task, as the API answered within
        ``CONSOLE_ACCESS_SECONDS`` (asked now when older): never a push on a stale verdict,
        and none while the API does not answer (fail closed)."""
        if task_id not in self.rows or not await self.may_push():
            return False
        try:
            return await can_read_task(self.person, task_id)
        except OutcomeUnknown:
            return False

    async def ledger_operation(self, message: dict[str, Any]) -> None:
        operation = message["operation"]
        task_id = operation.get("task_id", "")
        after = operation.get("after") or {}
        if "state" not in after and "retry_task_id" not in after:
            return  # not a move of the row's task (a successor's own acceptance, say)
        if not await self._may_show(task_id):
            return
        context = {
            "task_id": task_id,
            "state": after.get("state", ""),
            "revision": after.get("revision", ""),
            "retry_task_id": after.get("retry_task_id", ""),
        }
        with translation.override(self.language), timezone.override(self.zone):
            html = render_to_string("console/partials/row_live.html", context)
        await self.send(text_data=html)

    async def console_event(self, message: dict[str, Any]) -> None:
        """The console's own events change no task; the platform's entry of a decision does."""


# --- A person's decisions ------------------------------------------------------------------------


class DecisionsConsumer(_OneGroupConsumer):
    """``/ws/decisions``: the person's own decisions page. When what one of their decisions led
    to moves (``decisions/followups.py`` tells the person's group), its row is pushed again,
    whole, in the reader's language; the decision is read from the database as it now stands,
    so a push never says more than the page would."""

    kind = "decisions"

    async def connect(self) -> None:
        user = await signed_in_or_close(self)
        if user is None:
            return
        self.user = user
        if not await self.still_allowed():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.open_on(person_group(user.pk))

    async def allows(self, person: Person) -> bool:
        return True  # their own decisions, while they may sign in

    async def decision_followed(self, message: dict[str, Any]) -> None:
        if not await self.may_push():
            return
        html = await self._row(message["submission_id"])
        if html:
            await self.send(text_data=html)

    @database_sync_to_async
    def _row(self, submission_id: str) -> str:
        submission = (
            Submission.objects.select_related("followup", "sent_as", "batch_item")
            .filter(id=submission_id, created_by_id=self.user.pk)
            .first()
        )
        if submission is None:
            return ""  # another's decision this person sent: not on their page
        with translation.override(self.language), timezone.override(self.zone):
            return render_to_string(
                "console/partials/decision_row.html", {"submission": submission, "push": True}
            )

    async def decision_proposal(self, message: dict[str, Any]) -> None:
        """A proposal of theirs was made, approved once more or decided: its row in "Waiting
        for approval" comes, is counted again, or goes."""
        if not await self.may_push():
            return
        html = await self._waiting(proposal_id=message["proposal_id"])
        if html:
            await self.send(text_data=html)

    async def decision_batch(self, message: dict[str, Any]) -> None:
        """As ``decision_proposal``, for a batch of theirs."""
        if not await self.may_push():
            return
        html = await self._waiting(batch_id=message["batch_id"])
        if html:
            await self.send(text_data=html)

    @database_sync_to_async
    def _waiting(self, *, proposal_id: str = "", batch_id: str = "") -> str:
        now = timezone.now()
        context: dict[str, Any] = {"proposal": None, "batch": None}
        if proposal_id:
            proposal = (
                Proposal.objects.filter(id=proposal_id, proposed_by_id=self.user.pk)
                .annotate(approved=Count("approvals"))
                .first()
            )
            if proposal is None:
                return ""
            context["proposal"] = proposal
            context["gone"] = not proposal.is_pending or proposal.expires_at <= now
        else:
            batch = (
                Batch.objects.filter(id=batch_id, created_by_id=self.user.pk)
                .annotate(
                    eligible=Count("items", filter=Q(items__ineligible=""), distinct=True),
                    approved=Count("approvals", distinct=True),
                )
                .first()
            )
            if batch is None or batch.state == BatchState.DRAFT:
                return ""
            context["batch"] = batch
            context["gone"] = batch.state != BatchState.PROPOSED
        with translation.override(self.language), timezone.override(self.zone):
            return render_to_string("console/partials/waiting_row.html", context)


# --- A batch's progress -------------------------------------------------------------------------


class BatchProgressConsumer(_Console):
    """``/ws/batches/<id>``: the batch page's state, counts, rate, time left and latest items,
    pushed as the batch is approved or rejected and as the worker settles its items
    (docs/bulk.md). The current state is sent on connecting, so a page that reconnects after a
    drop catches up at once. The worker runs where its pushes reach this socket
    (decisions/batchworker.py ``sends_here``)."""

    last = ""

    async def connect(self) -> None:
        user = await signed_in_or_close(self)
        if user is None:
            return
        self.user = user
        self.batch_id = self.scope["url_route"]["kwargs"]["batch_id"]
        if not is_id(self.batch_id) or not await self.still_allowed():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.language, self.zone = reader_of(self.scope)
        if not await join_or_close(self, batch_group(self.batch_id)):
            return
        self.joined = True
        await self.accept()
        WEBSOCKETS_OPEN.labels(consumer="batch").inc()
        self.counted = True
        self.start_rechecking()
        await self.batch_progress({})

    async def allows(self, person: Person) -> bool:
        return await self._visible(person)

    async def leave(self) -> None:
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(batch_group(self.batch_id), self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.stop_rechecking()
        if getattr(self, "counted", False):
            WEBSOCKETS_OPEN.labels(consumer="batch").dec()
            self.counted = False
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(batch_group(self.batch_id), self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens."""

    @database_sync_to_async
    def _visible(self, person: Person) -> bool:
        """As the batch's page: its namespace's credential reads every one of its tasks."""
        batch = visible_batches(person.namespaces).filter(id=self.batch_id).first()
        return batch is not None and seen_by(person, batch)

    @database_sync_to_async
    def _render(self) -> str:
        """The progress fragment."""
        from orbit_console.console.views.batches import progress_context

        batch = Batch.objects.get(id=self.batch_id)
        with translation.override(self.language), timezone.override(self.zone):
            return render_to_string("console/partials/batch_progress.html", progress_context(batch))

    async def batch_progress(self, message: dict[str, Any]) -> None:
        """Send the fragment when it changed (pushes come faster than what they show)."""
        if not await self.may_push():
            return
        html = await self._render()
        if html != self.last:
            self.last = html
            await self.send(text_data=html)
