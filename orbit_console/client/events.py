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

The server is not trusted. Every frame is bounded (``max_frame_bytes``; past it the connection
is closed, 1009, before the frame is read whole) and read against the stream's schema (the
AsyncAPI document, ``GET /v1/asyncapi.json``): a frame that is not JSON, a welcome or a delivery
without what it must say, is the end of the connection (``StreamLost``); an event that breaks
the schema in a delivery that can still be acknowledged raises ``MalformedEvent`` with its
proof, and the stream goes on. A server that says nothing — not even the pong to a ping — for
three heartbeats (at least 3 s, at most 30 s) is a stalled stream: ``StreamLost``.
"""

import asyncio
import collections
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

from orbit_console.client.errors import BadAnswer
from orbit_console.client.types import ID, STATES, Fields

logger = logging.getLogger("orbit.client.events")

SUBPROTOCOL = "orbit.events.v1"
OPEN_TIMEOUT_SECONDS = 10.0  # the handshake, and then the welcome
DEFAULT_MAX_FRAME_BYTES = 64 * 1024
MAX_PROOF = 200  # characters, as the AsyncAPI document says
MAX_RESUME = 100  # proofs handed back at once: the server closes a stream sent more (4400)
ACKED_KEPT = 1024  # the server's latest acknowledgements kept (``acked``): not one per event
EVENT_TYPES = frozenset({"task.accepted", "task.needs_review", "task.completed"})


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
class MalformedEvent(Exception):
    """A delivery whose event breaks the stream's schema (``reason``: ``event.task_id:
    missing``). Nothing in it can be applied, but the delivery can be acknowledged with
    ``proof`` (else it would come again, and again); the stream stays open. ``event_id`` and
    ``task_id`` are given when they could be read."""

    proof: str
    attempt: int
    reason: str
    event_id: str = ""
    task_id: str = ""

    def __str__(self) -> str:
        return f"a malformed event: {self.reason}"


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
    def from_json(cls, data: Any) -> "StreamEvent":
        """The event as the schema says it (``BadAnswer`` naming what is wrong). Members that
        the schema does not name are kept in ``extra`` when they are strings (a newer server's
        additions), and dropped otherwise."""
        fields = Fields(data, "event")
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
        extra = {
            key: value
            for key, value in fields.data.items()
            if key not in known and isinstance(value, str)
        }
        # A retry successor's: ids, since the feed reads the retry's record at them.
        for name in ("retry_of", "retry_audit_id"):
            if name in extra and not ID.fullmatch(extra[name]):
                raise BadAnswer(f"event.{name}: not an id (32 lowercase hex digits)")
        return cls(
            id=fields.id("id"),
            sequence=int(fields.decimal("sequence")),
            type=fields.choice("type", EVENT_TYPES),
            namespace_id=fields.id("namespace_id"),
            queue_id=fields.id("queue_id"),
            task_id=fields.id("task_id"),
            state=fields.choice("state", STATES),
            revision=int(fields.decimal("revision")),
            operation=fields.text("operation"),
            audit_id=fields.id("audit_id"),
            occurred_at=fields.time("occurred_at"),
            extra=extra,
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

    def __init__(self, socket: _Socket, welcome: dict[str, Any], *, max_frame_bytes: int) -> None:
        self._socket = socket
        self._max_frame_bytes = max_frame_bytes
        fields = Fields(welcome, "welcome")
        self.subscription_id: str = fields.id("subscription_id")
        self.capacity: int = fields.integer("capacity", minimum=1)
        self.lease_ms: int = fields.integer("lease_ms", minimum=1)
        self.heartbeat_ms: int = fields.integer("heartbeat_ms", minimum=1)
        # Pings twice per heartbeat (one lost ping costs nothing), but never flat out nor more
        # than 5 s apart, whatever the server asks; and a server silent for three heartbeats
        # (within 3 to 30 s) has stalled.
        self.ping_seconds = min(max(self.heartbeat_ms / 2000, 0.05), 5.0)
        self.silence_seconds = min(max(3 * self.heartbeat_ms / 1000, 3.0), 30.0)
        # proof -> still owed when acknowledged; the latest only.
        self.acked: collections.OrderedDict[str, bool] = collections.OrderedDict()
        self._beats = asyncio.create_task(self._heartbeat())

    async def __aenter__(self) -> "EventStreamConnection":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def receive(self) -> Delivery:
        """The next delivery; other frames (pongs, acknowledgements) are taken in passing. An
        error frame is the server's reason for the close that follows: ``StreamLost`` says
        both. ``MalformedEvent``: a delivery to acknowledge and set aside."""
        error = ""
        while True:
            try:
                frame = await self._frame()
            except StreamLost as lost:
                raise StreamLost(error or lost.reason, lost.code) from None
            kind = frame.get("type")
            if kind == "event":
                return self._delivery(frame)
            if kind == "acked":
                proof, owed = frame.get("proof"), frame.get("owed")
                if isinstance(proof, str) and isinstance(owed, bool):
                    self.acked[proof] = owed
                    if len(self.acked) > ACKED_KEPT:
                        self.acked.popitem(last=False)
            elif kind == "error":
                error = f"{frame.get('code')!s:.100}: {frame.get('message')!s:.500}"

    def _delivery(self, frame: dict[str, Any]) -> Delivery:
        delivery = frame.get("delivery")
        proof = delivery.get("proof") if isinstance(delivery, dict) else None
        attempt = delivery.get("attempt") if isinstance(delivery, dict) else None
        if not isinstance(proof, str) or not 0 < len(proof) <= MAX_PROOF:
            # Nothing to acknowledge it with: it cannot even be set aside.
            raise StreamLost("the server sent an event without a proof")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            attempt = 1
        try:
            event = StreamEvent.from_json(frame.get("event"))
        except BadAnswer as bad:
            data = frame.get("event")
            said = data if isinstance(data, dict) else {}
            raise MalformedEvent(
                proof, attempt, bad.reason, _id_or_blank(said, "id"), _id_or_blank(said, "task_id")
            ) from None
        return Delivery(proof=proof, attempt=attempt, event=event)

    async def ack(self, proof: str) -> None:
        await self._send({"type": "ack", "proof": proof})

    async def resume(self, proofs: list[str]) -> None:
        """Hand back held proofs: at most ``MAX_RESUME``, the last ones given (the others come
        again after their leases)."""
        if proofs:
            await self._send({"type": "resume", "proofs": proofs[-MAX_RESUME:]})

    async def close(self) -> None:
        self._beats.cancel()
        with contextlib.suppress(Exception):
            await self._socket.close()

    async def _heartbeat(self) -> None:
        with contextlib.suppress(StreamLost, asyncio.CancelledError):
            while True:
                await asyncio.sleep(self.ping_seconds)
                await self._send({"type": "ping"})

    async def _frame(self) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self.silence_seconds):
                text = await self._socket.recv()
        except TimeoutError:
            raise StreamLost(
                f"the server said nothing for {self.silence_seconds:g} s, not even a pong"
            ) from None
        except ConnectionClosed as closed:
            said = closed.rcvd or closed.sent  # sent: this side closed it (1009: too big)
            code = said.code if said is not None else None
            reason = said.reason if said is not None else "the connection broke"
            raise StreamLost(reason or "closed", code) from None
        except (OSError, WebSocketException) as broken:
            raise StreamLost(str(broken) or type(broken).__name__) from None
        return _parse(text, self._max_frame_bytes)

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
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    in_process: Callable[[dict[str, Any]], Awaitable[_Socket]] | None = None,
) -> EventStreamConnection:
    """Open a stream of ``subscription_id`` at the API of ``base_url`` (over the network), or
    through ``in_process`` (a connector of this process's ASGI application). ``origin`` is the
    Origin the handshake declares: one the server allows. No frame longer than
    ``max_frame_bytes`` is read."""
    path = f"/v1/subscriptions/{quote(subscription_id, safe='')}/events"
    query = f"capacity={capacity}"
    headers = {"Authorization": f"Bearer {token}"}
    if in_process is not None:
        socket = await in_process(
            {"path": path, "query": query, "headers": headers, "origin": origin}
        )
    else:
        socket = await _network(base_url, f"{path}?{query}", headers, origin, max_frame_bytes)
    try:
        async with asyncio.timeout(OPEN_TIMEOUT_SECONDS):
            text = await socket.recv()
        welcome = _parse(text, max_frame_bytes)
        if welcome.get("type") != "welcome":
            raise StreamLost(f"the first frame is not a welcome but {welcome.get('type')!r:.40}")
        return EventStreamConnection(socket, welcome, max_frame_bytes=max_frame_bytes)
    except BaseException as failed:
        await socket.close()
        if isinstance(failed, TimeoutError):
            raise StreamLost(f"no welcome within {OPEN_TIMEOUT_SECONDS:g} s") from None
        if isinstance(failed, StreamLost | BadAnswer):
            raise StreamLost(f"no welcome: {failed.reason}") from None
        if isinstance(failed, ConnectionClosed | OSError | WebSocketException):
            raise StreamLost(f"no welcome: {failed or type(failed).__name__}") from None
        raise


def _parse(text: str | bytes, max_frame_bytes: int) -> dict[str, Any]:
    """A frame of the server as a JSON object (frames that are not end the connection)."""
    # The network's frames are capped before they are read (max_size); the in-process ones
    # here, so that both paths take the same frames.
    if len(text) > max_frame_bytes:
        raise StreamLost(f"the server sent a frame longer than {max_frame_bytes} bytes", 1009)
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError):
        raise StreamLost("the server sent a frame that is not JSON") from None
    if not isinstance(frame, dict):
        raise StreamLost("the server sent a frame that is not an object")
    return frame


def _id_or_blank(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) and ID.fullmatch(value) else ""


async def _network(
    base_url: str, target: str, headers: dict[str, str], origin: str, max_frame_bytes: int
) -> _Socket:
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
            max_size=max_frame_bytes,
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
        try:
            done, _ = await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            getter.cancel()  # a receive that timed out must not take the next message
            raise
        if getter in done:
            return getter.result()
        getter.cancel()
        raise StreamLost("the application ended the connection")
