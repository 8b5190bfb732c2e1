"""A client of Orbit's event stream, ``orbit.events.v1`` (I3; docs/events.md): one WebSocket to
one subscription.

``open_stream`` connects over the network (``wss://`` or ``ws://`` beside the API's base URL)
or, for the embedded API of this very process, hands the connection to the process's ASGI
application without the network (as ``client/inprocess.py`` does for HTTP): the same
handshake, Origin check, authentication and frames either way.

The connection sends the heartbeats itself. ``receive`` gives the next delivery; the caller
acknowledges it (``ack``) only after its own transaction committed, and on a new connection
hands back (``resume``) the proofs of deliveries it held but did not finish. A handshake that
is refused raises ``StreamRefused`` with the API's status and code (404: the server has no
stream, E1); a connection that breaks raises ``StreamLost``.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from orbit_console.lib.rfc3339 import parse_utc

logger = logging.getLogger("orbit.client.events")

SUBPROTOCOL = "orbit.events.v1"
OPEN_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class StreamRefused(Exception):
    """The handshake was answered with an error: ``status`` and the envelope's ``code``."""

    status: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


@dataclass(frozen=True)
class StreamLost(Exception):
    """The open stream ended: closed by the server (``code``, and its ``error`` frame's text),
    or the connection broke."""

    reason: str
    code: int | None = None

    def __str__(self) -> str:
        return f"stream lost ({self.code}): {self.reason}"


@dataclass(frozen=True)
class StreamEvent:
    """An event as the stream told it: a prompt to read the task and its audit again (I3)."""

    id: str
    sequence: int
    type: str
    namespace_id: str
    queue_id: str
    task_id: str
    state: str
    revision: int
    operation: str
    audit_id: str
    occurred_at: datetime
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "StreamEvent":
        known = {
            "id",
            "sequence",
            "type",
            "namespace_id",
            "queue_id",
            "task_id",
            "state",
            "revision",
            "operation",
            "audit_id",
            "occurred_at",
        }
        return cls(
            id=data["id"],
            sequence=int(data["sequence"]),
            type=data["type"],
            namespace_id=data["namespace_id"],
            queue_id=data["queue_id"],
            task_id=data["task_id"],
            state=data["state"],
            revision=int(data["revision"]),
            operation=data["operation"],
            audit_id=data["audit_id"],
            occurred_at=parse_utc(data["occurred_at"]),
            extra={key: value for key, value in data.items() if key not in known},
        )


@dataclass(frozen=True)
class Delivery:
    proof: str
    attempt: int
    event: StreamEvent


class _Socket(Protocol):
    async def send(self, text: str) -> None: ...
    async def recv(self) -> str: ...
    async def close(self) -> None: ...


class EventStreamConnection:
    """An open stream. Use as ``async with await open_stream(...) as stream:``."""

    def __init__(self, socket: _Socket, welcome: dict[str, Any]) -> None:
        self._socket = socket
        self.subscription_id: str = welcome["subscription_id"]
        self.capacity: int = welcome["capacity"]
        self.lease_ms: int = welcome["lease_ms"]
        self.heartbeat_ms: int = welcome["heartbeat_ms"]
        self.acked: dict[str, bool] = {}  # proof -> still owed when acknowledged
        self._beats = asyncio.create_task(self._heartbeat())

    async def __aenter__(self) -> "EventStreamConnection":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def receive(self) -> Delivery:
        """The next delivery; other frames (pongs, acknowledgements) are taken in passing. An
        error frame is the server's reason for the close that follows: ``StreamLost`` says
        both."""
        error = ""
        while True:
            try:
                frame = await self._frame()
            except StreamLost as lost:
                raise StreamLost(error or lost.reason, lost.code) from None
            kind = frame.get("type")
            if kind == "event":
                delivery = frame["delivery"]
                return Delivery(
                    proof=delivery["proof"],
                    attempt=delivery["attempt"],
                    event=StreamEvent.from_json(frame["event"]),
                )
            if kind == "acked":
                self.acked[frame["proof"]] = frame["owed"]
            elif kind == "error":
                error = f"{frame.get('code')}: {frame.get('message')}"

    async def ack(self, proof: str) -> None:
        await self._send({"type": "ack", "proof": proof})

    async def resume(self, proofs: list[str]) -> None:
        if proofs:
            await self._send({"type": "resume", "proofs": proofs})

    async def close(self) -> None:
        self._beats.cancel()
        with contextlib.suppress(Exception):
            await self._socket.close()

    async def _heartbeat(self) -> None:
        interval = self.heartbeat_ms / 2000  # twice per period: one lost ping costs nothing
        with contextlib.suppress(StreamLost, asyncio.CancelledError):
            while True:
                await asyncio.sleep(interval)
                await self._send({"type": "ping"})

    async def _frame(self) -> dict[str, Any]:
        try:
            text = await self._socket.recv()
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
            reason = closed.rcvd.reason if closed.rcvd is not None else "the connection broke"
            raise StreamLost(reason or "closed", code) from None
        except (OSError, WebSocketException) as broken:
            raise StreamLost(str(broken) or type(broken).__name__) from None
        frame = json.loads(text)
        if not isinstance(frame, dict):
            raise StreamLost("the server sent a frame that is not an object")
        return frame

    async def _send(self, frame: dict[str, Any]) -> None:
        try:
            await self._socket.send(json.dumps(frame))
        except (ConnectionClosed, OSError, WebSocketException) as broken:
            raise StreamLost(str(broken) or type(broken).__name__) from None


async def open_stream(
    base_url: str,
    token: str,
    subscription_id: str,
    *,
    origin: str,
    capacity: int = 8,
    in_process: Callable[[dict[str, Any]], Awaitable[_Socket]] | None = None,
) -> EventStreamConnection:
    """Open a stream of ``subscription_id`` at the API of ``base_url`` (over the network), or
    through ``in_process`` (a connector of this process's ASGI application). ``origin`` is the
    Origin the handshake declares: one the server allows."""
    path = f"/v1/subscriptions/{quote(subscription_id, safe='')}/events"
    query = f"capacity={capacity}"
    headers = {"Authorization": f"Bearer {token}"}
    if in_process is not None:
        socket = await in_process(
            {"path": path, "query": query, "headers": headers, "origin": origin}
        )
    else:
        socket = await _network(base_url, f"{path}?{query}", headers, origin)
    try:
        welcome = json.loads(await socket.recv())
    except Exception as failed:
        await socket.close()
        raise StreamLost(f"no welcome: {failed}") from None
    if not isinstance(welcome, dict) or welcome.get("type") != "welcome":
        await socket.close()
        raise StreamLost(f"no welcome: {welcome!r:.200}")
    return EventStreamConnection(socket, welcome)


async def _network(base_url: str, target: str, headers: dict[str, str], origin: str) -> _Socket:
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    url = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}{target}"
    try:
        connection = await ws_connect(
            url,
            subprotocols=[websockets.Subprotocol(SUBPROTOCOL)],
            additional_headers=headers,
            origin=websockets.Origin(origin),
            open_timeout=OPEN_TIMEOUT_SECONDS,
            max_size=2**20,
        )
    except InvalidStatus as refused:
        raise _refused(refused.response.status_code, bytes(refused.response.body or b"")) from None
    except (OSError, TimeoutError, WebSocketException) as failed:
        raise StreamLost(f"could not connect: {failed}") from None
    return _NetworkSocket(connection)


class _NetworkSocket:
    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection

    async def send(self, text: str) -> None:
        await self._connection.send(text)

    async def recv(self) -> str:
        return await self._connection.recv(decode=True)

    async def close(self) -> None:
        await self._connection.close()


def _refused(status: int, body: bytes) -> StreamRefused:
    try:
        error = json.loads(body or b"{}").get("error", {})
    except (ValueError, AttributeError):
        error = {}
    if not isinstance(error, dict):
        error = {}
    code = error.get("code") or ("NOT_FOUND" if status == 404 else "REFUSED")
    return StreamRefused(status, str(code), str(error.get("message") or "refused"))


class InProcessSocket:
    """A WebSocket to an ASGI application of this process, through queues: what a server does
    with a connection, without the network."""

    def __init__(
        self, application: Callable[..., Coroutine[Any, Any, None]], scope: dict[str, Any]
    ) -> None:
        self._to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._closed = False
        self._task: asyncio.Task[None] = asyncio.create_task(
            application(scope, self._to_app.get, self._from_app.put)
        )

    async def open(self) -> "InProcessSocket":
        await self._to_app.put({"type": "websocket.connect"})
        message = await self._next()
        if message["type"] == "websocket.accept":
            return self
        if message["type"] == "websocket.http.response.start":
            body = b""
            while True:
                part = await self._next()
                body += part.get("body", b"")
                if not part.get("more_body"):
                    break
            await self.close()
            raise _refused(message["status"], body)
        await self.close()
        raise StreamRefused(403, "REFUSED", "the handshake was refused")

    async def send(self, text: str) -> None:
        if self._closed:
            raise StreamLost("closed")
        await self._to_app.put({"type": "websocket.receive", "text": text})

    async def recv(self) -> str:
        message = await self._next()
        if message["type"] == "websocket.send":
            return str(message.get("text") or "")
        self._closed = True
        raise StreamLost(message.get("reason") or "closed", message.get("code"))

    async def close(self) -> None:
        if not self._task.done():
            await self._to_app.put({"type": "websocket.disconnect", "code": 1000})
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, timeout=5)
        self._closed = True

    async def _next(self) -> dict[str, Any]:
        getter = asyncio.ensure_future(self._from_app.get())
        done, _ = await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        getter.cancel()
        raise StreamLost("the application ended the connection")
