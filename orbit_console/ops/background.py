"""Work a server process does beside serving, on its own event loop.

``Background`` wraps the ASGI application and starts its services on the server's event loop
with the first connection the process takes (HTTP or WebSocket). Not at ASGI "lifespan"
startup: daphne, one of the two servers a worker can run (ops/workers.py), sends no lifespan
events. Each service is a coroutine function that runs until its ``stop`` event is set; one
that ends in an error is logged and started again after a pause, so a bug in one round never
silently ends the service for the process's life.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

logger = logging.getLogger("orbit.ops.background")

Service = Callable[[asyncio.Event], Awaitable[None]]
RESTART_AFTER_SECONDS = 5.0


class Background:
    def __init__(self, application: Any, services: Sequence[Service]) -> None:
        self.application = application
        self.services = tuple(services)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps weak references only

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.services and scope["type"] != "lifespan":
            self.start_on_running_loop()
        await self.application(scope, receive, send)

    def start_on_running_loop(self) -> None:
        """Start every service on this loop, once per loop (cheap when already started)."""
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return
        self.loop, self.stop = loop, asyncio.Event()
        for service in self.services:
            task = loop.create_task(self._keep_running(service))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _keep_running(self, service: Service) -> None:
        name = getattr(service, "__qualname__", repr(service))
        logger.info("background service %s started", name)
        while not self.stop.is_set():
            try:
                await service(self.stop)
            except Exception:
                logger.exception("background service %s failed; starting it again", name)
                try:
                    await asyncio.wait_for(self.stop.wait(), timeout=RESTART_AFTER_SECONDS)
                except TimeoutError:
                    continue
