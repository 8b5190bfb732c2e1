"""The supervisors' approvals queue, live: ``/ws/approvals``.

New proposals appear and decided ones disappear without a reload. Only supervisors connect;
the role is re-read from the database on every push, so a person who loses it stops receiving.
"""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string
from django.utils import timezone, translation

from orbit_console.client import OutcomeUnknown
from orbit_console.console.access import can_read_task
from orbit_console.console.models import Proposal
from orbit_console.console.people import SUPERVISOR, Person, load_person
from orbit_console.console.proposals import APPROVALS_GROUP, visible_proposals
from orbit_console.lib.live import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED, CLOSE_UNAVAILABLE, join
from orbit_console.ops.metrics import WEBSOCKETS_OPEN
from orbit_console.timeline.render import cookies_of, language_of, zone_of_scope


class ApprovalsConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        if not await self._is_supervisor():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        cookies = cookies_of(self.scope)
        self.language = language_of(self.scope, cookies)
        self.zone = zone_of_scope(cookies)
        if not await join(self.channel_layer, APPROVALS_GROUP, self.channel_name):
            await self.accept()  # a close code needs an open socket: the page then retries
            await self.close(code=CLOSE_UNAVAILABLE)
            return
        self.joined = True
        await self.accept()
        WEBSOCKETS_OPEN.labels(consumer="approvals").inc()
        self.counted = True

    async def disconnect(self, code: int) -> None:
        if getattr(self, "counted", False):
            WEBSOCKETS_OPEN.labels(consumer="approvals").dec()
            self.counted = False
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    @database_sync_to_async
    def _is_supervisor(self) -> bool:
        return self.user.groups.filter(name=SUPERVISOR).exists()

    @database_sync_to_async
    def _push(self, proposal_id: str) -> tuple[Person | None, Proposal | None]:
        """The person if still a supervisor, and the proposal if it is one their queue shows
        (their namespaces'): one trip to the database thread per push."""
        person = load_person(self.user)
        if person is None or not person.has_role(SUPERVISOR):
            return None, None
        proposals = visible_proposals(person).select_related("proposed_by")
        return person, proposals.filter(id=proposal_id).first()

    async def approvals_changed(self, message: dict[str, Any]) -> None:
        person, proposal = await self._push(message["proposal_id"])
        if person is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if proposal is None:
            return
        try:
            if not await can_read_task(person, proposal.task_id):  # console/access.py
                return
        except OutcomeUnknown:
            return  # fail closed: the page's next load shows it, once the API answers
        with translation.override(self.language), timezone.override(self.zone):
            context = {"proposal": proposal, "viewer_id": self.user.pk}
            html = render_to_string("console/partials/proposal_push.html", context)
        await self.send(text_data=html)
