"""A hostile external Orbit (issue 29): a real server on a real port that answers the recovery
API and serves the event stream the way a broken or malicious Orbit would, for the tests of the
console's client and feed.

The HTTP side is a plain asyncio server that writes each answer by hand, because the answers
that matter are the ones no framework would send: a body that never ends, a length of 200 MB
declared, a body dripped one byte at a time, JSON missing a member or about another task.
The event stream is the ``websockets`` package's own server (a real WebSocket handshake,
frames, close codes), reached through the same port: a request that asks for an upgrade is
piped to it. It runs in a thread with its own event loop, so that a test can drive the console's
code with ``asyncio.run`` beside it.
"""

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.typing import Subprotocol

from orbit_console.lib.ids import new_id

SUBPROTOCOL = Subprotocol("orbit.events.v1")
CHUNK = 64 * 1024
ENDLESS_LIMIT = 256 * 1024 * 1024  # an endless answer gives up here, whoever reads it


@dataclass
class Answer:
    """How the server answers one path. ``kind``: ``json`` (``body`` as it is, with its length),
    ``endless`` (a 200 whose body never ends), ``declared`` (a 200 that declares
    ``declared_bytes`` and sends a little), ``drip`` (``body`` one byte every ``every`` s)."""

    kind: str
    body: bytes = b""
    status: int = 200
    every: float = 0.0
    declared_bytes: int = 0

    @classmethod
    def data(cls, data: Any, status: int = 200) -> "Answer":
        """The API's envelope around ``data``."""
        envelope = {"request_id": new_id(), "data": data}
        return cls("json", json.dumps(envelope).encode(), status)

    @classmethod
    def raw(cls, body: bytes, status: int = 200) -> "Answer":
        return cls("json", body, status)

    @classmethod
    def endless(cls) -> "Answer":
        return cls("endless")

    @classmethod
    def declared(cls, size: int) -> "Answer":
        return cls("declared", declared_bytes=size)

    @classmethod
    def drip(cls, data: Any, every: float) -> "Answer":
        envelope = {"request_id": new_id(), "data": data}
        return cls("drip", json.dumps(envelope).encode(), every=every)


@dataclass
class Served:
    """What became of one answer: bytes written, and whether the client hung up before the
    end."""

    path: str
    written: int = 0
    hung_up: bool = False
    finished: bool = False


@dataclass
class HostileOrbit:
    heartbeat_ms: int = 1000
    answers: dict[str, Answer] = field(default_factory=dict)
    served: list[Served] = field(default_factory=list)
    # The stream: answer pings with pongs; close each connection right after its welcome.
    pong: bool = True
    close_at_once: bool = False
    streams_opened: list[float] = field(default_factory=list)  # time.monotonic() of each
    acks: list[str] = field(default_factory=list)
    resumes: list[list[str]] = field(default_factory=list)
    # Members of the welcome to change (``None``: left out).
    welcome: dict[str, Any] = field(default_factory=dict)
    url: str = ""

    def __post_init__(self) -> None:
        self.subscription_id = new_id()
        self._pending: list[Any] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._more: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    # --- Driving it from a test ---------------------------------------------------------------

    def start(self) -> "HostileOrbit":
        self._thread.start()
        assert self._ready.wait(10), "the hostile Orbit did not start"
        return self

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def send(self, *frames: Any) -> None:
        """Frames for the open stream (or the next one): dicts as JSON text, strings as they
        are."""
        self._loop.call_soon_threadsafe(self._enqueue, frames)

    def served_for(self, path: str) -> list[Served]:
        return [served for served in self.served if served.path == path]

    # --- The server ---------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._more = asyncio.Event()
        async with serve(
            self._stream,
            "127.0.0.1",
            0,
            subprotocols=[SUBPROTOCOL],
            ping_interval=None,
            max_size=2**20,
        ) as streams:
            self._streams_port = streams.sockets[0].getsockname()[1]
            front = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=2**20)
            async with front:
                self.url = f"http://127.0.0.1:{front.sockets[0].getsockname()[1]}"
                self._ready.set()
                await self._stop.wait()

    def _enqueue(self, frames: tuple[Any, ...]) -> None:
        self._pending.extend(frames)
        assert self._more is not None
        self._more.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        _, target, _ = lines[0].split(" ", 2)
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        if headers.get("upgrade", "").lower() == "websocket":
            await self._pipe(head, reader, writer)
            return
        length = int(headers.get("content-length") or 0)
        if length:
            await reader.readexactly(length)
        path = target.split("?", 1)[0]
        served = Served(path)
        self.served.append(served)
        answer = self.answers.get(path)
        if answer is None:
            error = {"code": "NOT_FOUND", "message": "no such thing here"}
            answer = Answer.raw(json.dumps({"request_id": new_id(), "error": error}).encode(), 404)
        try:
            await self._answer(answer, served, reader, writer)
        except (ConnectionError, OSError):
            served.hung_up = True
        finally:
            writer.close()

    async def _answer(
        self,
        answer: Answer,
        served: Served,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        # The client hangs up: the end of its request's connection (it sends nothing more).
        hung_up = asyncio.ensure_future(reader.read())
        try:
            head = f"HTTP/1.1 {answer.status} X\r\nContent-Type: application/json\r\n"
            if answer.kind == "json" or answer.kind == "drip":
                head += f"Content-Length: {len(answer.body)}\r\n"
            elif answer.kind == "declared":
                head += f"Content-Length: {answer.declared_bytes}\r\n"
            writer.write(f"{head}Connection: close\r\n\r\n".encode())
            await writer.drain()
            if answer.kind == "json":
                await self._write(writer, served, answer.body)
            elif answer.kind == "endless":
                chunk = b" " * CHUNK
                while not hung_up.done() and served.written < ENDLESS_LIMIT:
                    await self._write(writer, served, chunk)
            elif answer.kind == "declared":
                await self._write(writer, served, b"{" + b" " * 1023)
                await asyncio.wait_for(asyncio.shield(hung_up), 30)
            elif answer.kind == "drip":
                for byte in answer.body:
                    if hung_up.done():
                        break
                    await self._write(writer, served, bytes([byte]))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(hung_up), answer.every)
            served.finished = not hung_up.done()
        except TimeoutError:
            pass
        finally:
            served.hung_up = served.hung_up or hung_up.done()
            hung_up.cancel()

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, served: Served, data: bytes) -> None:
        writer.write(data)
        await writer.drain()
        served.written += len(data)

    async def _pipe(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Hand the connection to the WebSocket server, byte for byte both ways."""
        inner_reader, inner_writer = await asyncio.open_connection("127.0.0.1", self._streams_port)
        inner_writer.write(head)

        async def copy(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(CHUNK):
                    target.write(data)
                    await target.drain()
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                target.close()

        await asyncio.gather(copy(reader, inner_writer), copy(inner_reader, writer))

    async def _stream(self, socket: ServerConnection) -> None:
        self.streams_opened.append(time.monotonic())
        welcome = {
            "type": "welcome",
            "subscription_id": self.subscription_id,
            "capacity": 8,
            "lease_ms": 30_000,
            "heartbeat_ms": self.heartbeat_ms,
            "server_time": "2030-01-01T00:00:00Z",
            **self.welcome,
        }
        said = {name: value for name, value in welcome.items() if value is not None}
        await socket.send(json.dumps(said))
        if self.close_at_once:
            await socket.close(4503, "gone again")
            return
        sending = asyncio.ensure_future(self._send_pending(socket))
        try:
            async for message in socket:
                frame = json.loads(message)
                if frame.get("type") == "ping" and self.pong:
                    await socket.send(json.dumps({"type": "pong"}))
                elif frame.get("type") == "ack":
                    self.acks.append(frame["proof"])
                    await socket.send(
                        json.dumps({"type": "acked", "proof": frame["proof"], "owed": True})
                    )
                elif frame.get("type") == "resume":
                    self.resumes.append(frame["proofs"])
        except Exception:  # noqa: S110 -- a client that went away: nothing to tell
            pass
        finally:
            sending.cancel()

    async def _send_pending(self, socket: ServerConnection) -> None:
        assert self._more is not None
        while True:
            while self._pending:
                frame = self._pending.pop(0)
                await socket.send(frame if isinstance(frame, str) else json.dumps(frame))
            self._more.clear()
            await self._more.wait()


def event(
    *,
    task_id: str,
    audit_id: str,
    namespace_id: str,
    event_type: str = "task.completed",
    **extra: Any,
) -> dict[str, Any]:
    """An event as the stream's schema says it (docs/events.md)."""
    return {
        "id": new_id(),
        "sequence": "1",
        "type": event_type,
        "namespace_id": namespace_id,
        "queue_id": new_id(),
        "task_id": task_id,
        "state": "SUCCEEDED",
        "revision": "3",
        "operation": "task.execution_result",
        "audit_id": audit_id,
        "occurred_at": "2030-01-01T00:00:00Z",
        **extra,
    }


def delivery(event: dict[str, Any], *, proof: str | None = None, attempt: int = 1) -> dict:
    """An event frame: the event under a delivery with a proof."""
    return {
        "type": "event",
        "delivery": {
            "proof": proof or f"proof-{new_id()}",
            "attempt": attempt,
            "leased_until": "2030-01-01T00:00:30Z",
        },
        "event": event,
    }


def task(task_id: str, namespace_id: str, **overrides: Any) -> dict[str, Any]:
    """A task detail as the API's schema says it."""
    return {
        "id": task_id,
        "namespace_id": namespace_id,
        "queue_id": "b" * 32,
        "state": "SUCCEEDED",
        "revision": "3",
        "handler": "object.prepare",
        "handler_version": "1",
        "payload_version": "1",
        "payload": {"object_ref": "objects/input"},
        "attempt_count": 1,
        "created_at": "2030-01-01T00:00:00Z",
        "updated_at": "2030-01-01T00:00:01Z",
        **overrides,
    }


def operation(task_id: str, audit_id: str, **overrides: Any) -> dict[str, Any]:
    """An audit record's detail (AU5) as the API's schema says it."""
    return {
        "id": audit_id,
        "task_id": task_id,
        "operation_id": "c" * 32,
        "actor_id": "d" * 32,
        "action": "task.execution_result",
        "created_at": "2030-01-01T00:00:01Z",
        "reason": "",
        "before": {"state": "RUNNING", "revision": "2"},
        "after": {"state": "SUCCEEDED", "revision": "3"},
        **overrides,
    }


def operation_path(task_id: str, audit_id: str) -> str:
    return f"/v1/tasks/{task_id}/operations/{audit_id}"


@contextlib.contextmanager
def hostile_orbit(**settings: Any) -> Iterator[HostileOrbit]:
    orbit = HostileOrbit(**settings).start()
    try:
        yield orbit
    finally:
        orbit.close()
