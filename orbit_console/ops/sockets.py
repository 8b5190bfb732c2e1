"""WebSockets during a database outage (issue 14).

Channels reads the session, hence the database, before a consumer runs (its auth middleware),
and the consumers read the person next: with the database away either raises, and the
handshake used to fail with an HTTP 500. ``OutageGuard`` wraps the WebSocket application: an
outage before the socket was accepted accepts it and closes it at once with
``CLOSE_UNAVAILABLE``, which the page explains ("live updates paused, retrying…") and retries
after (``static/js/console.js``). An outage after the socket was accepted ends it as before.
"""

import logging
from typing import Any

from orbit_console.lib.live import CLOSE_UNAVAILABLE
from orbit_console.ops.middleware import OUTAGES

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
