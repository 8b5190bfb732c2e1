"""WebSockets during a database outage (issue 14), and when their session ends.

Channels reads the session, hence the database, before a consumer runs (its auth middleware),
and the consumers read the person next: with the database away either raises, and the
handshake used to fail with an HTTP 500. ``OutageGuard`` wraps the WebSocket application: an
outage before the socket was accepted accepts it and closes it at once with
``CLOSE_UNAVAILABLE``, which the page explains ("live updates paused, retrying…") and retries
after (``static/js/console.js``). An outage after the socket was accepted ends it as before.
"""

import asyncio
import hashlib
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from orbit_console.lib.live import CLOSE_UNAUTHENTICATED, CLOSE_UNAVAILABLE
from orbit_console.ops.middleware import OUTAGES
from orbit_console.ops.sessions import session_expiry

logger = logging.getLogger("orbit.ops")


class OutageGuard:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        accepted = False

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal accepted
            if message["type"] in ("websocket.accept", "websocket.close"):
                accepted = True  # the handshake is answered: nothing more for us to say
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except OUTAGES:
            if accepted:
                raise
            logger.error("database unavailable: a socket is closed as paused", exc_info=True)
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE})


class SessionWatch:
    """Close the console's sockets with ``CLOSE_UNAUTHENTICATED`` when they have no session, and
    once the session they opened with has ended: expired, idle, signed out elsewhere, or its
    row deleted. Wraps the routes inside Channels' session authentication.

    A socket refused before its handshake is answered reaches the page as 1006 (which the ws
    extension retries for ever, "reconnecting…"); so it is accepted first and closed with the
    code, and the page says "signed out" with a way to sign in (``static/js/console.js``). An
    open socket looks at its session's row when the row says it ends, and every
    ``SESSION_RECHECK_SECONDS`` in case it was ended early; a database that cannot be read
    meanwhile ends nothing (the next look decides)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        user = scope.get("user")
        session = scope.get("session")
        key = getattr(session, "session_key", None)
        if user is None or not user.is_authenticated or key is None:
            message = await receive()
            if message["type"] == "websocket.connect":
                await send({"type": "websocket.accept"})
                await send({"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED})
            return
        await _Watched(self.app, key).run(scope, receive, send)


class _Watched:
    """One socket and the watch over its session."""

    def __init__(self, app: Any, session_key: str) -> None:
        self.app = app
        self.session_key = session_key
        self.ended = asyncio.Event()
        self.closed = False
        self.watch: asyncio.Task[None] | None = None

    async def run(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        pending: asyncio.Future[Any] | None = None

        async def watched_receive() -> Any:
            nonlocal pending
            if pending is None:
                pending = asyncio.ensure_future(receive())
            ended = asyncio.ensure_future(self.ended.wait())
            try:
                await asyncio.wait({pending, ended}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                ended.cancel()
            if pending.done():
                message, pending = pending.result(), None
                return message
            return {"type": "websocket.disconnect", "code": CLOSE_UNAUTHENTICATED}

        async def watched_send(message: dict[str, Any]) -> None:
            if self.closed:
                return  # the session ended: the socket is closed, nothing more goes out
            if message["type"] == "websocket.close":
                self.closed = True
            await send(message)
            if message["type"] == "websocket.accept" and self.watch is None:
                self.watch = asyncio.create_task(self._watch(send))

        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            if self.watch is not None:
                self.watch.cancel()
            if pending is not None:
                pending.cancel()

    async def _watch(self, send: Any) -> None:
        """Until the session ends: its row's end and every ``SESSION_RECHECK_SECONDS``, or at
        once when told on the channel layer that it was ended (``end_sessions``: sign out
        everywhere, an administrator, the identity provider's back-channel logout)."""
        looks = asyncio.create_task(self._look())
        told = asyncio.create_task(self._listen())
        try:
            await asyncio.wait({looks, told}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            looks.cancel()
            told.cancel()
        if not self.closed:
            self.closed = True
            await send({"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED})
        self.ended.set()

    async def _listen(self) -> None:
        layer = get_channel_layer()
        if layer is None:
            await asyncio.Event().wait()  # no layer: the looks alone decide
        assert layer is not None  # noqa: S101 -- for the type checker
        channel = await layer.new_channel()
        group = session_group(self.session_key)
        await layer.group_add(group, channel)
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == SESSION_ENDED:
                    return
        finally:
            await layer.group_discard(group, channel)

    async def _look(self) -> None:
        while True:
            try:
                expiry = await database_sync_to_async(session_expiry)(self.session_key)
            except Exception:
                # The database is away: every open socket meets it; the outage is logged where
                # requests meet it, not here once per socket and look.
                logger.debug("a socket's session could not be read", exc_info=True)
                await asyncio.sleep(settings.SESSION_RECHECK_SECONDS)
                continue
            if expiry is None:
                return
            left = (expiry - timezone.now()).total_seconds()
            await asyncio.sleep(max(0.05, min(float(settings.SESSION_RECHECK_SECONDS), left)))


SESSION_ENDED = "session.ended"


def session_group(session_key: str) -> str:
    """The channel-layer group of one session's sockets (named by a hash: the key is a
    secret, and Redis's keys are not)."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def end_sessions(session_keys: list[str]) -> int:
    """End these sessions now: their rows go (the next request of theirs is signed out), and
    once that is committed their open sockets are told and close with
    ``CLOSE_UNAUTHENTICATED`` (every process's, through the channel layer). How many rows
    went."""
    from django.contrib.sessions.models import Session
    from django.db import transaction

    keys = [key for key in session_keys if key]
    if not keys:
        return 0
    deleted, _ = Session.objects.filter(session_key__in=keys).delete()

    def tell() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        for key in keys:
            try:
                async_to_sync(layer.group_send)(session_group(key), {"type": SESSION_ENDED})
            except Exception:  # the rows are gone: the sockets' own looks end them soon
                logger.warning("a socket could not be told its session ended", exc_info=True)

    transaction.on_commit(tell)
    return deleted
