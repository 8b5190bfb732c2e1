"""Sockets that stay authorised: what a socket may push is asked again while it is open, not
only when it connects (the timeline's sockets first, then every socket of the console).

A consumer mixes ``Rechecked`` in, says what it asks (``still_allowed``: the same rule as its
page, read afresh) and how often (``recheck_seconds``), calls ``start_rechecking`` once it has
joined its groups and ``stop_rechecking`` when it disconnects, and asks ``may_push`` before every
push. Then:

- the question is asked again every ``recheck_seconds``, pushes or not;
- a push never goes out on an answer older than twice that: it asks first;
- a refusal leaves the socket's groups at once (``leave``) and closes it with 4403, so that no
  push already on its way goes out on the earlier answer while the server is closing it.
"""

import asyncio
import time
from typing import Any

from orbit_console.lib.live import CLOSE_FORBIDDEN


class Rechecked:
    """Mixed into an ``AsyncWebsocketConsumer`` (it needs ``close``)."""

    refused = False
    checked_at = 0.0  # time.monotonic() of the last allowed answer
    _rechecking: "asyncio.Task[None] | None" = None

    def recheck_seconds(self) -> float:
        raise NotImplementedError

    async def still_allowed(self) -> bool:
        """Whether the person may still see what this socket pushes, asked afresh."""
        raise NotImplementedError

    async def leave(self) -> None:
        """Leave the socket's groups (refused: nothing more may reach it)."""

    def fresh(self) -> bool:
        """Whether the last allowed answer is recent enough to push on."""
        return time.monotonic() - self.checked_at < 2 * self.recheck_seconds()

    def start_rechecking(self) -> None:
        """From a connect that was just allowed: that answer counts as the first check."""
        self.checked_at = time.monotonic()
        self._rechecking = asyncio.create_task(self._recheck_forever())

    def stop_rechecking(self) -> None:
        if self._rechecking is not None:
            self._rechecking.cancel()
            self._rechecking = None

    async def may_push(self) -> bool:
        if not self.refused and (self.fresh() or await self._allowed()):
            return not self.refused
        await self.refuse()
        return False

    async def refuse(self) -> None:
        if self.refused:
            return
        self.refused = True
        await self.leave()
        close: Any = getattr(self, "close")  # noqa: B009 -- the consumer's, mixed in
        await close(code=CLOSE_FORBIDDEN)

    async def _allowed(self) -> bool:
        allowed = await self.still_allowed()
        if allowed:
            self.checked_at = time.monotonic()
        return allowed

    async def _recheck_forever(self) -> None:
        while True:
            await asyncio.sleep(self.recheck_seconds())
            if not await self._allowed():
                await self.refuse()
                return
