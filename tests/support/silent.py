"""A TCP server that accepts connections and never says a word: a database or a Redis that is
paused or hung, for the tests of bounded time (issue 14)."""

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SilentServer:
    port: int
    held: list[socket.socket] = field(default_factory=list)  # the connections it accepted

    def as_channel_layer(self) -> dict[str, Any]:
        """``CHANNEL_LAYERS`` with Redis here, configured as production configures it (no
        client-side read timeout, settings.py): a channel layer that hangs."""
        host = {"address": f"redis://127.0.0.1:{self.port}/0", "socket_timeout": None}
        return {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [host]},
            }
        }


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    listener = socket.create_server(("127.0.0.1", 0))
    server = SilentServer(port=listener.getsockname()[1])

    def accept_and_say_nothing() -> None:
        with contextlib.suppress(OSError):
            while True:
                server.held.append(listener.accept()[0])

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    try:
        yield server
    finally:
        listener.close()
        for connection in server.held:
            connection.close()
