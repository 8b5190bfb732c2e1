"""The live timeline of one task: ``/ws/tasks/<task_id>/timeline``.

A thin consumer: authenticate (the session), authorise (the recovery API, with the person's
own credential: of several, the first the API allows for this task), join the task's group,
and push each new entry as the same partial the page renders. The socket delivers only what
the person may read over HTTP: authorisation is checked against the API on connect and again
every ``TIMELINE_RECHECK_SECONDS`` (one answer shared by the sockets of one credential on one
task, verdicts.py); a push never goes out on an answer older than twice that, and a refusal
closes the socket (``lib/rechecked.py``, which every socket of the console shares).
"""

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from orbit_console.lib.ids import is_id
from orbit_console.lib.live import (
    CLOSE_FORBIDDEN,
    join_or_close,
    signed_in_or_close,
    task_group,
)
from orbit_console.lib.readers import reader_of
from orbit_console.lib.rechecked import Rechecked
from orbit_console.ops.metrics import WEBSOCKETS_OPEN
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import Person, actor_names, load_person
from orbit_console.timeline import watcher
from orbit_console.timeline.entries import from_event, from_operation
from orbit_console.timeline.render import render_push
from orbit_console.timeline.verdicts import VERDICTS

logger = logging.getLogger("orbit.timeline")


class TaskTimelineConsumer(Rechecked, AsyncWebsocketConsumer):
    person: Person
    task_id: str
    credential: OrbitCredential | None = None  # the one the socket reads with, once allowed

    async def connect(self) -> None:
        user = await signed_in_or_close(self)
        if user is None:
            return
        task_id = self.scope["url_route"]["kwargs"]["task_id"]
        person = await database_sync_to_async(load_person)(user)
        if not is_id(task_id) or person is None or not person.can("tasks:audit:read"):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.person, self.task_id = person, task_id
        if not await self._authorised():
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.language, self.zone = reader_of(self.scope)
        if not await join_or_close(self, task_group(task_id)):
            return
        self.group = task_group(task_id)
        self.start_rechecking()
        if not settings.ORBIT_API_EMBEDDED and self.credential is not None:
            await watcher.watch(task_id, self.credential, self.channel_layer)
        await self.accept()
        WEBSOCKETS_OPEN.labels(consumer="timeline").inc()
        self.counted = True

    async def disconnect(self, code: int) -> None:
        if getattr(self, "counted", False):
            WEBSOCKETS_OPEN.labels(consumer="timeline").dec()
            self.counted = False
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.stop_rechecking()
            if not settings.ORBIT_API_EMBEDDED:
                watcher.unwatch(self.task_id)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page only listens; anything it sends is ignored."""

    # --- Authorisation ------------------------------------------------------------------------

    async def _authorised(self) -> bool:
        """Can this person read this task's operations over HTTP? On connect every credential
        of theirs is asked at once and the socket keeps the first allowed; later, that one.
        The answer is shared with the person's other sockets on the task (verdicts.py)."""
        period = self._period()
        candidates = self.person.credentials if self.credential is None else (self.credential,)
        verdicts = await asyncio.gather(
            *(VERDICTS.check(c, self.task_id, max_age=period) for c in candidates)
        )
        for credential, verdict in zip(candidates, verdicts, strict=True):
            if verdict.fresh(2 * period):
                self.credential = credential
                return True
        return False

    # What Rechecked asks: the verdicts are shared by the person's sockets on the task.

    def recheck_seconds(self) -> float:
        return self._period()

    async def still_allowed(self) -> bool:
        return await self._authorised()

    def fresh(self) -> bool:
        return self.credential is not None and VERDICTS.known(self.credential, self.task_id).fresh(
            2 * self._period()
        )

    async def leave(self) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    @staticmethod
    def _period() -> float:
        return float(settings.TIMELINE_RECHECK_SECONDS)

    # --- Pushes -------------------------------------------------------------------------------

    async def ledger_operation(self, message: dict[str, Any]) -> None:
        operation = message["operation"]
        if operation.get("task_id") != self.task_id or not await self.may_push():
            return
        names = await actor_names({operation["actor_id"]})
        await self.send(
            text_data=render_push(
                from_operation(operation, names), language=self.language, zone=self.zone
            )
        )

    async def console_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        if event.get("task_id") != self.task_id or not await self.may_push():
            return
        await self.send(
            text_data=render_push(from_event(event), language=self.language, zone=self.zone)
        )
