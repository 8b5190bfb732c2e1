"""``/ws/notifications``: the unread count of the person's notifications menu, live.

Behind the same Origin check, session authentication and session watch as every console socket
(``asgi.py``, ``ops/sockets.py``). The socket sends the count once it is open — so a page that
reconnects after a drop has the count as it is — and again whenever the person's group hears
that a notification of theirs was written or read. The person is read again every
``CONSOLE_ACCESS_SECONDS`` (``lib/rechecked.py``): a deactivated account is closed out (4403).
"""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string
from django.utils import translation

from orbit_console.lib.live import join_or_close, signed_in_or_close
from orbit_console.lib.readers import reader_of
from orbit_console.lib.rechecked import Rechecked
from orbit_console.notifications.outbox import person_group
from orbit_console.notifications.selectors import unread_count
from orbit_console.people.person import person_now


class NotificationsConsumer(Rechecked, AsyncWebsocketConsumer):
    group = ""
    user: Any
    language = ""

    def recheck_seconds(self) -> float:
        return float(settings.CONSOLE_ACCESS_SECONDS)

    async def still_allowed(self) -> bool:
        return await database_sync_to_async(person_now)(self.user.pk) is not None

    async def connect(self) -> None:
        user = await signed_in_or_close(self)
        if user is None:
            return
        self.user = user
        self.language, _zone = reader_of(self.scope)  # the count is said in the page's language
        group = person_group(user.pk)
        if not await join_or_close(self, group):
            return
        self.group = group
        await self.accept()
        self.start_rechecking()
        await self._send_count()

    async def leave(self) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.stop_rechecking()
        await self.leave()
        self.group = ""

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The menu only listens."""

    async def notifications_changed(self, message: dict[str, Any]) -> None:
        if await self.may_push():
            await self._send_count()

    async def _send_count(self) -> None:
        count = await database_sync_to_async(unread_count)(self.user.pk)
        with translation.override(self.language):
            html = render_to_string("notifications/partials/count.html", {"unread": count})
        await self.send(text_data=html)
