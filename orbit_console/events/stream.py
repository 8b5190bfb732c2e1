"""The event stream's WebSocket, ``/v1/subscriptions/{id}/events``, subprotocol
``orbit.events.v1`` (I3; the frames: docs/events.md and ``/v1/asyncapi.json``).

The handshake is judged in the recovery API's order (O3): the Origin (an allowed one, before
anything else: ``origins.EventOriginValidator``), 401 the bearer token, 403 ``events:subscribe``,
400 the subprotocol and the query, 404 a subscription the credential does not own or that is
outside its scope, 429 the limits on open streams (``openstreams.py``). A refusal is the API's
error envelope with its HTTP status where the server can answer a handshake with a response
(uvicorn), else a closed handshake (403).

Once open, the stream hands the subscription's owed events out, oldest first, never more than
``capacity`` unacknowledged at once, each under a lease; it is woken when events are written
(``stream_group``) and looks on its own every ``ORBIT_EVENTS_POLL_MS`` (events written by a
process whose wake-ups cannot reach this one, leases that ran out). The client pings at least
every ``heartbeat_ms``; a stream that hears nothing for three of them closes (4408), and its
deliveries come back to the subscription when their leases end. The credential and the
subscription are checked again every ``ORBIT_EVENTS_RECHECK_SECONDS``: a revoked token closes
the stream (4401), a deleted subscription too (4404); the stream's place among the open ones
is renewed then too.

Frames from the client are read strictly (``read_frame``): the JSON parser of the API's bodies
(nesting bounded, no number converted), and exactly the members the AsyncAPI document lists.
A client that goes away is an ordinary end of a stream, logged at INFO.
"""

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from orbit_console.events.deliveries import (
    Handed,
    deliveries_claim,
    deliveries_prune,
    deliveries_resume,
    delivery_ack,
    read_proof,
    stream_group,
)
from orbit_console.events.frames import event_object
from orbit_console.events.models import OpenStream, Subscription
from orbit_console.events.openstreams import (
    open_stream_admit,
    open_stream_close,
    open_stream_renew,
)
from orbit_console.events.subscriptions import subscription_in_scope
from orbit_console.ledger.auth import authenticate_header
from orbit_console.ledger.errors import (
    ApiError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    StreamLimit,
    Unauthenticated,
    Unavailable,
)
from orbit_console.ledger.models import Credential, Permission
from orbit_console.lib import strictjson
from orbit_console.lib.ids import is_id, new_request_id
from orbit_console.lib.live import join
from orbit_console.lib.numbers import decimal_in
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.ops.metrics import WEBSOCKETS_OPEN

logger = logging.getLogger("orbit.events")

SUBPROTOCOL = "orbit.events.v1"
CAPACITY = (1, 100)
DEFAULT_CAPACITY = 8
MAX_FRAME_CHARS = 64 * 1024
MAX_RESUME = 100
MAX_QUERY_FIELDS = 10
# The members of each frame a client sends (the AsyncAPI document's CLIENT_FRAMES: kept equal
# by tests/events/test_asyncapi.py).
CLIENT_MEMBERS = {
    "ping": frozenset({"type"}),
    "ack": frozenset({"type", "proof"}),
    "resume": frozenset({"type", "proofs"}),
}
# Close codes of an open stream (private range: daphne can send no others).
CLOSE_BAD_FRAME = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_GONE = 4404
CLOSE_SILENT = 4408
CLOSE_LIMIT = 4429
CLOSE_UNAVAILABLE = 4503
# How often, at most, a stream drops the deliveries past their retention (one query).
PRUNE_EVERY_SECONDS = 300.0
_last_prune = 0.0


class EventStream(AsyncWebsocketConsumer):
    credential: Credential
    subscription: Subscription
    slot: OpenStream

    async def connect(self) -> None:
        self.request_id = new_request_id()
        self.opened = False
        self.gone = False  # the client dropped the connection
        self.ended = False  # no frame may follow: closed, or the client gone
        try:
            await self._admit()
            self.slot = await database_sync_to_async(open_stream_admit)(
                credential=self.credential, subscription=self.subscription, now=timezone.now()
            )
        except ApiError as error:
            await self._refuse(error)
            return
        except DatabaseError:
            logger.warning("event stream: the database is unavailable at a handshake")
            await self._refuse(Unavailable("the event stream is unavailable; connect again later"))
            return
        group = stream_group(self.subscription.namespace_id)
        if not await join(self.channel_layer, group, self.channel_name):
            await self._release()
            await self._refuse(Unavailable("the event stream is unavailable; connect again later"))
            return
        self.group = group
        try:
            await self.accept(SUBPROTOCOL)
        except OSError:  # the client went away during its handshake
            await self._release()
            await self.channel_layer.group_discard(group, self.channel_name)
            return
        self.opened = True
        WEBSOCKETS_OPEN.labels(consumer="events").inc()
        self.held: dict[int, float] = {}  # delivery id -> when its lease ends (monotonic)
        self.wake = asyncio.Event()
        self.heard_at = time.monotonic()
        await self._send(
            {
                "type": "welcome",
                "subscription_id": self.subscription.id,
                "capacity": self.capacity,
                "lease_ms": self.subscription.lease_ms,
                "heartbeat_ms": settings.ORBIT_EVENTS_HEARTBEAT_MS,
                "server_time": format_utc(timezone.now()),
            }
        )
        if not self.ended:  # the client may be gone already
            self.pump = asyncio.create_task(self._pump())

    async def disconnect(self, code: int) -> None:
        if not getattr(self, "opened", False):
            return
        self.opened = False
        WEBSOCKETS_OPEN.labels(consumer="events").dec()
        self._stop_pump()
        logger.info(
            "event stream closed", extra={"subscription": self.subscription.id, "code": code}
        )
        await self._release()
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _release(self) -> None:
        """Stop counting this stream among the open ones (its row would lapse anyway)."""
        try:
            await database_sync_to_async(open_stream_close)(stream_id=self.slot.id)
        except DatabaseError:
            logger.warning("event stream: its open-stream row is left to lapse")

    # --- The handshake ------------------------------------------------------------------------

    async def _admit(self) -> None:
        authorization = ""
        for name, value in self.scope.get("headers", []):
            if name == b"authorization":
                authorization = value.decode("latin-1")
        self.credential = await database_sync_to_async(authenticate_header)(
            authorization, now=timezone.now()
        )
        if Permission.SUBSCRIBE not in self.credential.permission_set:
            raise PermissionDenied(f"the credential lacks the {Permission.SUBSCRIBE} permission")
        if SUBPROTOCOL not in self.scope.get("subprotocols", []):
            raise InvalidArgument(f"the {SUBPROTOCOL} subprotocol is required")
        self.capacity = _capacity(self.scope.get("query_string", b""))
        subscription_id = self.scope["url_route"]["kwargs"]["subscription_id"]
        if not is_id(subscription_id):
            raise InvalidArgument(
                "subscription_id: must be 32 lowercase hexadecimal characters",
                field="subscription_id",
            )
        self.subscription = await database_sync_to_async(subscription_in_scope)(
            self.credential, subscription_id
        )

    async def _refuse(self, error: ApiError) -> None:
        await refuse_handshake(self, error, self.request_id)

    # --- Frames from the client ---------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        self.heard_at = time.monotonic()
        try:
            frame = read_frame(text_data)
        except InvalidArgument as refused:
            await self._fail(CLOSE_BAD_FRAME, refused.code, refused.message)
            return
        if frame["type"] == "ping":
            await self._send({"type": "pong"})
        elif frame["type"] == "ack":
            await self._ack(frame["proof"])
        else:
            await self._resume(frame["proofs"])

    async def _ack(self, text: Any) -> None:
        proof = read_proof(text, self.subscription.id)
        if proof is None:
            await self._fail(CLOSE_BAD_FRAME, "INVALID_ARGUMENT", "ack: not a proof of this stream")
            return
        owed = await database_sync_to_async(delivery_ack)(proof)
        self.held.pop(proof.delivery_id, None)
        await self._send({"type": "acked", "proof": text, "owed": owed})
        self.wake.set()  # room for another

    async def _resume(self, texts: Any) -> None:
        if not isinstance(texts, list) or len(texts) > MAX_RESUME:
            await self._fail(
                CLOSE_BAD_FRAME, "INVALID_ARGUMENT", f"resume: a list of at most {MAX_RESUME}"
            )
            return
        proofs = [read_proof(text, self.subscription.id) for text in texts]
        valid = [proof for proof in proofs if proof is not None]
        if len(valid) != len(proofs):
            await self._fail(
                CLOSE_BAD_FRAME, "INVALID_ARGUMENT", "resume: not a proof of this stream"
            )
            return
        handed = await database_sync_to_async(deliveries_resume)(
            self.subscription, valid, now=timezone.now()
        )
        await self._hand(handed)

    # --- Frames to the client -----------------------------------------------------------------

    async def events_poke(self, message: dict[str, Any]) -> None:
        self.wake.set()

    async def events_gone(self, message: dict[str, Any]) -> None:
        if message.get("subscription_id") == self.subscription.id:
            await self._fail(CLOSE_GONE, "NOT_FOUND", "the subscription was deleted")

    async def _pump(self) -> None:
        """Hand out what is owed whenever woken, and on its own every poll interval; check the
        credential and the subscription again every recheck interval."""
        poll = settings.ORBIT_EVENTS_POLL_MS / 1000
        silent_after = 3 * settings.ORBIT_EVENTS_HEARTBEAT_MS / 1000
        checked_at = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                if now - self.heard_at > silent_after:
                    await self._fail(CLOSE_SILENT, "UNAVAILABLE", "no heartbeat from the client")
                    return
                if now - checked_at >= settings.ORBIT_EVENTS_RECHECK_SECONDS:
                    checked_at = now
                    if not await self._still_allowed() or not await self._still_counted():
                        return
                for delivery_id, until in list(self.held.items()):
                    if until <= now:
                        del self.held[delivery_id]  # the lease ran out: owed to anyone again
                room = self.capacity - len(self.held)
                # Cleared before the claim: a wake-up that comes while it runs is kept.
                self.wake.clear()
                if room > 0:
                    handed = await database_sync_to_async(deliveries_claim)(
                        self.subscription, limit=room, now=timezone.now()
                    )
                    await self._hand(handed)
                    if len(handed) == room:
                        continue  # there may be more: no wait
                await _prune_now_and_then()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout=poll)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("event stream failed", extra={"subscription": self.subscription.id})
            await self._fail(CLOSE_UNAVAILABLE, "UNAVAILABLE", "the stream failed; reconnect")

    async def _hand(self, handed: list[Handed]) -> None:
        lease = self.subscription.lease_ms / 1000
        for item in handed:
            self.held[item.proof.delivery_id] = time.monotonic() + lease
            # A client gone mid-way: what is left is handed out again after its lease.
            await self._send(
                {
                    "type": "event",
                    "delivery": {
                        "proof": item.proof.signed(),
                        "attempt": item.proof.attempt,
                        "leased_until": format_utc(item.leased_until),
                    },
                    "event": event_object(item.event),
                }
            )

    async def _still_allowed(self) -> bool:
        try:
            await self._admit()
        except Unauthenticated as refused:
            await self._fail(CLOSE_UNAUTHENTICATED, refused.code, refused.message)
            return False
        except PermissionDenied as refused:
            await self._fail(CLOSE_FORBIDDEN, refused.code, refused.message)
            return False
        except ApiError as refused:
            await self._fail(CLOSE_GONE, refused.code, refused.message)
            return False
        return True

    async def _still_counted(self) -> bool:
        """Renew the stream's place among the open ones; take a place again if its row lapsed
        (this process stalled), or close (4429) if none is left."""
        now = timezone.now()
        if await database_sync_to_async(open_stream_renew)(stream_id=self.slot.id, now=now):
            return True
        try:
            self.slot = await database_sync_to_async(open_stream_admit)(
                credential=self.credential, subscription=self.subscription, now=now
            )
        except StreamLimit as refused:
            await self._fail(CLOSE_LIMIT, refused.code, refused.message)
            return False
        return True

    async def _fail(self, code: int, error: str, message: str) -> None:
        """Say why, close with ``code``, stop handing out. Once only: the frame after the
        close would be an error of the server's (uvicorn: "Unexpected ASGI message")."""
        if self.ended:
            return
        await self._send({"type": "error", "code": error, "message": message})
        self.ended = True
        if getattr(self, "pump", None) is not asyncio.current_task():
            self._stop_pump()  # no frame in between; the pump itself stops after the close
        try:
            await self.close(code=code)
        except OSError:
            self._went_away()
        self._stop_pump()

    async def _send(self, frame: dict[str, Any]) -> None:
        if self.ended:
            return
        try:
            await self.send(text_data=strictjson.dumps(frame))
        except OSError:  # uvicorn's ClientDisconnected: the client went away mid-send
            self._went_away()

    def _went_away(self) -> None:
        """A client that drops its connection ends its stream, as closing it would: nothing
        failed here (what it held is handed out again after its lease)."""
        if self.gone:
            return
        self.gone = self.ended = True
        logger.info(
            "event stream: the client went away", extra={"subscription": self.subscription.id}
        )
        self._stop_pump()

    def _stop_pump(self) -> None:
        """Hand out no more (from within the pump too: it ends at its next wait)."""
        pump = getattr(self, "pump", None)
        if pump is not None:
            pump.cancel()


async def _prune_now_and_then() -> None:
    global _last_prune
    if time.monotonic() - _last_prune < PRUNE_EVERY_SECONDS:
        return
    _last_prune = time.monotonic()
    await database_sync_to_async(deliveries_prune)(now=timezone.now())


def _capacity(query_string: bytes) -> int:
    try:
        params = parse_qs(
            query_string.decode("latin-1"), keep_blank_values=True, max_num_fields=MAX_QUERY_FIELDS
        )
    except ValueError:
        raise InvalidArgument(f"the query holds more than {MAX_QUERY_FIELDS} parameters") from None
    unknown = sorted(set(params) - {"capacity"})
    if unknown:
        raise InvalidArgument(f"unknown query parameter {unknown[0]!r}", field=unknown[0])
    values = params.get("capacity")
    if values is None:
        return DEFAULT_CAPACITY
    try:
        if len(values) != 1:
            raise ValueError
        return decimal_in(values[0], *CAPACITY)
    except ValueError:
        raise InvalidArgument(
            f"capacity: must be an integer from {CAPACITY[0]} to {CAPACITY[1]}", field="capacity"
        ) from None


def read_frame(text: str | None) -> dict[str, Any]:
    """A frame from the client, exactly as the AsyncAPI document describes it, or
    ``InvalidArgument`` saying what is wrong with it. Parsed with the API's strict JSON reader
    (lib/strictjson.py): nesting deeper than it allows is refused, duplicate members too, and
    no number is converted (none belongs in a frame)."""
    if text is None:
        raise InvalidArgument("frames are JSON text")
    if len(text) > MAX_FRAME_CHARS:
        raise InvalidArgument(f"a frame is at most {MAX_FRAME_CHARS} characters")
    try:
        frame = strictjson.loads(text)
    except strictjson.JSONError as exc:
        raise InvalidArgument(f"malformed frame: {exc}") from None
    kind = frame.get("type") if isinstance(frame, dict) else None
    members = CLIENT_MEMBERS.get(kind) if isinstance(kind, str) else None
    if members is None:
        raise InvalidArgument(f"an unknown frame: the type is one of {', '.join(CLIENT_MEMBERS)}")
    if set(frame) != members:
        expected = ", ".join(sorted(members))
        raise InvalidArgument(f"a {kind} frame has exactly the members {expected}")
    return frame  # type: ignore[no-any-return]


async def refuse_handshake(
    consumer: AsyncWebsocketConsumer, error: ApiError, request_id: str
) -> None:
    """Answer a handshake with the API's error envelope and status where the server can
    (the ``websocket.http.response`` extension: uvicorn), else refuse it (403: daphne)."""
    if "websocket.http.response" not in consumer.scope.get("extensions", {}):
        await consumer.close()  # before the accept: the handshake is refused
        return
    body = {
        "request_id": request_id,
        "error": {"code": error.code, "message": error.message, **error.details},
    }
    await consumer.base_send(
        {
            "type": "websocket.http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"x-request-id", request_id.encode()),
            ],
        }
    )
    await consumer.base_send(
        {"type": "websocket.http.response.body", "body": strictjson.dumps(body).encode()}
    )


class NoSuchStream(AsyncWebsocketConsumer):
    """Any other ``/v1`` WebSocket path: 404 in the envelope, as an unknown endpoint (E1)."""

    async def connect(self) -> None:
        await refuse_handshake(self, NotFound("no such endpoint"), new_request_id())
