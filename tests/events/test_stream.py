"""The event stream, ``orbit.events.v1`` (I3, docs/events.md), over real WebSockets to a real
server process: the handshake's refusals in the API's order (O3, E1), events for every operation
in the order they were written, at least once under leases, proofs handed back on a new
connection, acknowledgements, heartbeats, and a credential or subscription that goes away."""

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from django.db import connection, transaction
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin, Subprotocol

from orbit_console.client.events import Delivery, EventStreamConnection, StreamLost, StreamRefused
from orbit_console.ledger.lifecycle import (
    actor_id_for,
    attempt_finish,
    attempt_start,
    credential_issue,
    credential_revoke,
    namespace_create,
    task_accept,
    task_cancel,
)
from orbit_console.ledger.models import AttemptOutcome, Credential, Namespace, Queue
from orbit_console.ledger.seed import PAYLOAD
from tests.events.conftest import stream, subscribe
from tests.support.orbit import bearer, post, retry_body, review_body
from tests.support.servers import DaphneServer

WAIT = 20.0  # generous: two cores and other suites at once; never a timing assertion
DOCUMENTED_RECHECK_SECONDS = 5  # docs/events.md: ORBIT_EVENTS_RECHECK_SECONDS's default


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def take(connection: EventStreamConnection, count: int) -> list[Delivery]:
    return [await asyncio.wait_for(connection.receive(), WAIT) for _ in range(count)]


async def nothing_within(connection: EventStreamConnection, seconds: float) -> bool:
    try:
        await asyncio.wait_for(connection.receive(), seconds)
    except TimeoutError:
        return True
    return False


async def acknowledged(connection: EventStreamConnection, proof: str) -> bool:
    """Whether the delivery was still owed when the stream took its acknowledgement."""
    for _ in range(int(WAIT * 10)):
        if proof in connection.acked:
            return connection.acked[proof]
        assert await nothing_within(connection, 0.1)
    raise AssertionError("no acknowledgement came back")


def accept(world: dict[str, Any], key: str, queue_id: str | None = None) -> Any:
    queue = Queue.objects.get(id=queue_id or world["queue_id"])
    return task_accept(
        queue=queue,
        actor_id=actor_id_for(world["namespace_id"], "submitter"),
        handler="object.prepare",
        payload=PAYLOAD,
        business_key=f"object:{key}",
    )


# --- The handshake ----------------------------------------------------------------------------


async def _handshake(
    server: DaphneServer, path: str, *, token: str | None, protocol: bool = True, origin: str = ""
) -> tuple[int, dict[str, Any]]:
    headers = bearer(token) if token else {}
    try:
        async with connect(
            f"ws://127.0.0.1:{server.port}{path}",
            subprotocols=[Subprotocol("orbit.events.v1")] if protocol else None,
            additional_headers=headers,
            origin=Origin(origin or server.url),
        ):
            return 101, {}
    except InvalidStatus as refused:
        body = bytes(refused.response.body or b"{}")
        return refused.response.status_code, json.loads(body or b"{}")


def test_the_handshake_refuses_in_the_apis_order(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """O3 at the handshake: Origin, then 401, 403, 400, 404; each refusal is the API's
    envelope with its status, and nothing is opened."""
    tokens = world["tokens"]
    mine = subscribe(stream_api, tokens["subscriber"])["id"]
    elsewhere, _ = namespace_create(name="elsewhere")
    _, stranger = credential_issue(
        namespace=elsewhere, actor_name="stranger", permissions=["tasks:read", "events:subscribe"]
    )
    theirs = subscribe(stream_api, stranger)["id"]
    path = f"/v1/subscriptions/{mine}/events"

    def refused(path: str, **kwargs: Any) -> tuple[int, str]:
        status, body = run(_handshake(stream_server, path, **kwargs))
        return status, body.get("error", {}).get("code", "")

    assert refused(path, token=tokens["subscriber"], origin="http://evil.example")[0] == 403
    assert refused(path, token=None) == (401, "UNAUTHENTICATED")
    assert refused(path, token="orb_" + "x" * 43) == (401, "UNAUTHENTICATED")
    assert refused(path, token=tokens["reader"]) == (403, "PERMISSION_DENIED")
    assert refused(path, token=tokens["subscriber"], protocol=False) == (400, "INVALID_ARGUMENT")
    assert refused(f"{path}?capacity=0", token=tokens["subscriber"]) == (400, "INVALID_ARGUMENT")
    assert refused(f"{path}?capacity=101", token=tokens["subscriber"])[0] == 400
    assert refused(f"{path}?size=3", token=tokens["subscriber"])[0] == 400
    assert refused("/v1/subscriptions/NOT-AN-ID/events", token=tokens["subscriber"])[0] == 400
    # C4: another namespace's subscription is indistinguishable from none.
    assert refused(f"/v1/subscriptions/{theirs}/events", token=tokens["subscriber"]) == (
        404,
        "NOT_FOUND",
    )
    # E1: a stream this server does not have answers 404 like any unknown endpoint.
    assert refused("/v1/events", token=tokens["subscriber"]) == (404, "NOT_FOUND")
    assert refused(f"{path}?capacity=3", token=tokens["subscriber"]) == (101, "")


def test_the_origin_must_match_scheme_host_and_port_and_its_refusal_is_the_envelope(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """Issue 29: an origin is a scheme, a host and a port (RFC 6454). A page on another port
    of the same host was accepted (the check compared host names), and a refusal was a bare
    403 without body or request id; now it is the API's envelope, as docs/events.md says."""
    token = world["tokens"]["subscriber"]
    path = f"/v1/subscriptions/{subscribe(stream_api, token)['id']}/events"
    port = stream_server.port
    others = [
        f"http://127.0.0.1:{port + 1}",
        f"http://127.0.0.1:{port - 1}",
        f"https://127.0.0.1:{port}",
        "http://127.0.0.1",
        f"http://localhost:{port}",
        f"http://127.0.0.1:{port}/page",
        "null",
        "http://evil.example",
    ]

    async def handshake(origin: str) -> tuple[int, dict[str, Any], str | None]:
        try:
            async with connect(
                f"ws://127.0.0.1:{port}{path}",
                subprotocols=[Subprotocol("orbit.events.v1")],
                additional_headers=bearer(token),
                origin=Origin(origin),
            ):
                return 101, {}, None
        except InvalidStatus as refused:
            response = refused.response
            return (
                response.status_code,
                json.loads(bytes(response.body or b"{}")),
                response.headers.get("X-Request-Id"),
            )

    for origin in others:
        status, body, request_id = run(handshake(origin))
        assert status == 403, origin
        assert body["error"]["code"] == "PERMISSION_DENIED", origin
        assert body["request_id"] == request_id and len(request_id or "") == 32
    assert run(handshake(stream_server.url))[0] == 101


def test_the_client_reports_a_refused_handshake(
    world: dict[str, Any], stream_server: DaphneServer
) -> None:
    async def scenario() -> None:
        with pytest.raises(StreamRefused) as refused:
            await stream(stream_server, world["tokens"]["subscriber"], "0" * 32)
        assert (refused.value.status, refused.value.code) == (404, "NOT_FOUND")

    run(scenario())


# --- Events -----------------------------------------------------------------------------------


def test_every_operation_is_an_event_in_the_order_written(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """Acceptance, execution results, cancellation, and the recovery operations (RV5: the
    review's completion at its new revision, its operation task.review; RT9: the successor's
    acceptance carries retry_of and the retry's audit id), each naming the operation and the
    audit record that caused it."""
    tokens = world["tokens"]
    subscription = subscribe(stream_api, tokens["subscriber"])
    tasks = world["tasks"]

    async def scenario() -> tuple[list[Delivery], Any, Any, Any, Any]:
        async with await stream(stream_server, tokens["subscriber"], subscription["id"]) as s:
            reviewed = post(
                stream_api, tasks["needs_review"], "review", tokens["admin"], review_body()
            )
            assert reviewed.status_code == 200
            retried = post(stream_api, tasks["failed"], "retry", tokens["admin"], retry_body())
            assert retried.status_code == 201
            accepted = await asyncio.to_thread(accept, world, "streamed")
            await asyncio.to_thread(attempt_start, task=accepted, worker_id="w")
            await asyncio.to_thread(
                attempt_finish,
                task=accepted,
                worker_actor_id=actor_id_for(world["namespace_id"], "w"),
                outcome=AttemptOutcome.UNKNOWN,
            )
            cancelled = await asyncio.to_thread(accept, world, "cancelled-later")
            await asyncio.to_thread(task_cancel, task=cancelled, actor_id="0" * 32, reason="x")
            received = await take(s, 6)
            for delivery in received:
                await s.ack(delivery.proof)
            return received, reviewed.json(), retried.json(), accepted, cancelled

    received, reviewed, retried, accepted, cancelled = run(scenario())
    events = [delivery.event for delivery in received]
    sequences = [event.sequence for event in events]
    assert sequences == sorted(sequences)
    assert len({event.id for event in events}) == 6
    summary = [
        (event.type, event.operation, event.task_id, event.state, event.revision)
        for event in events
    ]
    successor = retried["data"]["task"]["id"]
    assert summary == [
        ("task.completed", "task.review", tasks["needs_review"], "FAILED", 4),
        ("task.accepted", "task.accepted", successor, "WAITING", 1),
        ("task.accepted", "task.accepted", accepted.id, "WAITING", 1),
        ("task.needs_review", "task.execution_result", accepted.id, "NEEDS_REVIEW", 3),
        ("task.accepted", "task.accepted", cancelled.id, "WAITING", 1),
        ("task.completed", "task.cancelled", cancelled.id, "CANCELLED", 2),
    ]
    assert events[0].audit_id == reviewed["data"]["audit_id"]
    # RT9: the successor's acceptance names its source and the retry's record there.
    retry_audit_id = retried["data"]["audit_id"]
    assert events[1].extra == {"retry_of": tasks["failed"], "retry_audit_id": retry_audit_id}
    assert events[1].audit_id != retry_audit_id  # the successor's own task.accepted record
    for task_id, audit_id, action in (
        (successor, events[1].audit_id, "task.accepted"),
        (tasks["failed"], retry_audit_id, "task.retry"),
    ):
        operation = stream_api.get(
            f"/v1/tasks/{task_id}/operations/{audit_id}", headers=bearer(tokens["admin"])
        )
        assert operation.json()["data"]["action"] == action
    assert all(event.namespace_id == world["namespace_id"] for event in events)
    assert all(event.queue_id == world["queue_id"] for event in events)
    assert all(delivery.attempt == 1 for delivery in received)


def test_a_refused_write_owes_nothing(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """RT7: a 429 rolls the whole transaction back, the events and what is owed with it."""
    tokens = world["tokens"]
    subscription = subscribe(stream_api, tokens["subscriber"])
    full = post(
        stream_api, world["tasks"]["queue_full_failed"], "retry", tokens["admin"], retry_body()
    )
    assert full.status_code == 429
    detail = stream_api.get(
        f"/v1/subscriptions/{subscription['id']}", headers=bearer(tokens["subscriber"])
    ).json()["data"]
    assert (detail["backlog"], detail["in_flight"]) == (0, 0)


def test_a_subscription_of_some_queues_gets_only_their_events(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    other = Queue.objects.get(namespace=namespace, name="reports")
    _, limited = credential_issue(
        namespace=namespace,
        actor_name="reports-subscriber",
        permissions=["tasks:read", "events:subscribe"],
        queues=[other],
    )
    whole = stream_api.post(
        "/v1/subscriptions",
        json={"name": "everything"},
        headers={**bearer(limited), "Idempotency-Key": "whole"},
    )
    assert whole.status_code == 400 and whole.json()["error"]["field"] == "queue_ids"
    subscription = subscribe(stream_api, limited, queue_ids=[other.id])

    async def scenario() -> list[Delivery]:
        async with await stream(stream_server, limited, subscription["id"]) as s:
            await asyncio.to_thread(accept, world, "objects-queue")
            await asyncio.to_thread(accept, world, "reports-queue", other.id)
            received = await take(s, 1)
            assert await nothing_within(s, 1.0)
            return received

    (delivery,) = run(scenario())
    assert delivery.event.queue_id == other.id


# --- At least once ----------------------------------------------------------------------------


def test_an_unacknowledged_delivery_comes_back_after_its_lease(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """I3: a consumer that never acknowledges (it died before its commit) gets the same event
    again, as a new handing of the same delivery, once the lease is over; not before."""
    token = world["tokens"]["subscriber"]
    subscription = subscribe(stream_api, token, lease_ms=1500)

    async def scenario() -> tuple[Delivery, Delivery]:
        async with await stream(stream_server, token, subscription["id"]) as first:
            await asyncio.to_thread(accept, world, "lease")
            (handed,) = await take(first, 1)
        async with await stream(stream_server, token, subscription["id"]) as second:
            assert await nothing_within(second, 0.5)  # still held by the first handing
            (again,) = await take(second, 1)
            await second.ack(again.proof)
            assert await nothing_within(second, 2.0)  # acknowledged: owed no more
        return handed, again

    handed, again = run(scenario())
    assert again.event == handed.event
    assert (handed.attempt, again.attempt) == (1, 2)
    assert again.proof != handed.proof


def test_a_handed_back_proof_is_given_again_at_once(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """I3: on reconnecting, the client hands back the proof of the delivery it held and did
    not finish; the stream gives it back at once instead of after the (long) lease. A proof of
    the earlier handing still acknowledges it."""
    token = world["tokens"]["subscriber"]
    subscription = subscribe(stream_api, token, lease_ms=600_000)

    async def scenario() -> tuple[Delivery, Delivery, bool]:
        async with await stream(stream_server, token, subscription["id"]) as first:
            await asyncio.to_thread(accept, world, "resume")
            (handed,) = await take(first, 1)
        async with await stream(stream_server, token, subscription["id"]) as second:
            await second.resume([handed.proof])
            (again,) = await take(second, 1)
            await second.ack(handed.proof)  # the first handing's proof
            owed = await acknowledged(second, handed.proof)
        return handed, again, owed

    handed, again, owed = run(scenario())
    assert again.event.id == handed.event.id and again.attempt == 2
    assert owed is True
    detail = stream_api.get(f"/v1/subscriptions/{subscription['id']}", headers=bearer(token))
    assert detail.json()["data"]["backlog"] == 0


def test_two_streams_of_one_subscription_never_hold_the_same_event(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """Claims: competing consumers share the work; each event is held by one at a time."""
    token = world["tokens"]["subscriber"]
    subscription = subscribe(stream_api, token, lease_ms=600_000)

    async def drain(s: EventStreamConnection, into: list[str]) -> None:
        while True:
            delivery = await s.receive()
            into.append(delivery.event.id)
            await s.ack(delivery.proof)

    async def scenario() -> tuple[list[str], list[str]]:
        a: list[str] = []
        b: list[str] = []
        async with (
            await stream(stream_server, token, subscription["id"], capacity=2) as one,
            await stream(stream_server, token, subscription["id"], capacity=2) as two,
        ):
            workers = [asyncio.create_task(drain(one, a)), asyncio.create_task(drain(two, b))]
            for index in range(12):
                await asyncio.to_thread(accept, world, f"shared-{index}")
            for _ in range(int(WAIT * 10)):
                if len(a) + len(b) >= 12:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)
            for worker in workers:
                worker.cancel()
        return a, b

    a, b = run(scenario())
    assert len(a) + len(b) == 12
    assert not set(a) & set(b)


# --- Frames from the client ----------------------------------------------------------------------

# Frames the document does not describe (docs/events.md, /v1/asyncapi.json), the hostile ones of
# issue 29 first: each is answered with an error frame and the close 4400.
BAD_FRAMES = {
    "nested 20 000 deep": "[" * 20_000 + "]" * 20_000,
    "an object nested 200 deep": '{"type":' * 200 + '"ping"' + "}" * 200,
    "a ping with a 5 000-digit number": '{"type":"ping","n":' + "9" * 5000 + "}",
    "a ping with 1E+2000000": '{"type":"ping","n":1E+2000000}',
    "an ack whose proof is 1E+2000000": '{"type":"ack","proof":1E+2000000}',
    "a resume of huge numbers": '{"type":"resume","proofs":[1E+2000000,' + "9" * 4000 + "]}",
    "a ping with another member": '{"type":"ping","at":1}',
    "a duplicate member": '{"type":"ping","type":"ping"}',
    "NaN": '{"type":"ping","n":NaN}',
    "a type of 1E+2000000": '{"type":1E+2000000}',
    "a list": "[]",
    "not JSON": "ping",
    "too long": '{"type":"ping","pad":"' + "x" * 70_000 + '"}',
}


@pytest.mark.parametrize("frame", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_a_frame_the_document_does_not_describe_is_refused_with_an_error_frame(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client, frame: str
) -> None:
    """Frames are read with the API's strict JSON reader and must have exactly the members
    the document lists. A frame nested 20 000 deep used to break the stream (1006, a
    traceback at ERROR); one with numbers or members of its own was taken as a ping."""
    token = world["tokens"]["subscriber"]
    subscription = subscribe(stream_api, token)

    async def scenario() -> tuple[list[dict[str, Any]], int | None]:
        async with connect(
            f"ws://127.0.0.1:{stream_server.port}/v1/subscriptions/{subscription['id']}/events",
            subprotocols=[Subprotocol("orbit.events.v1")],
            additional_headers=bearer(token),
            origin=Origin(stream_server.url),
            max_size=2**20,
        ) as raw:
            frames = [json.loads(await asyncio.wait_for(raw.recv(), WAIT))]
            await raw.send(frame)
            try:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(raw.recv(), WAIT)))
            except ConnectionClosed:
                return frames, raw.close_code

    frames, code = run(scenario())
    assert [f["type"] for f in frames] == ["welcome", "error"]
    assert frames[-1]["code"] == "INVALID_ARGUMENT"
    assert code == 4400


# --- Heartbeats, revocation, deletion -----------------------------------------------------------


def test_a_silent_client_is_closed(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    token = world["tokens"]["subscriber"]
    subscription = subscribe(stream_api, token)

    async def scenario() -> int | None:
        async with connect(
            f"ws://127.0.0.1:{stream_server.port}/v1/subscriptions/{subscription['id']}/events",
            subprotocols=[Subprotocol("orbit.events.v1")],
            additional_headers=bearer(token),
            origin=Origin(stream_server.url),
            ping_interval=None,
        ) as raw:
            try:
                while True:
                    await asyncio.wait_for(raw.recv(), WAIT)
            except Exception:
                return raw.close_code

    assert run(scenario()) == 4408


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="holds the server's claim with SQLite's write lock"
)
def test_a_client_dropping_its_stream_mid_flow_is_logged_at_info_not_error(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """Issue 29: a client that drops its connection while an event is on its way (a laptop
    closed, a consumer killed) ended its stream with "event stream failed" and a traceback at
    ERROR: the server's send raised on the gone connection. It is an ordinary end: INFO, and
    the event comes back after its lease.

    Made to happen every time: this test holds SQLite's write lock while the server's stream
    looks for events (its claim waits for the lock), drops the connection, and commits an
    event with the lock's release: the claim then hands the event to a client that is gone,
    before the stream learns of the drop (that news waits for the same sync thread)."""
    token = world["tokens"]["subscriber"]
    subscription = subscribe(stream_api, token)
    url = f"ws://127.0.0.1:{stream_server.port}/v1/subscriptions/{subscription['id']}/events"
    start = len(stream_server.log_text())

    async def open_stream() -> Any:
        raw = await connect(
            url,
            subprotocols=[Subprotocol("orbit.events.v1")],
            additional_headers=bearer(token),
            origin=Origin(stream_server.url),
        )
        await asyncio.wait_for(raw.recv(), WAIT)  # welcome
        return raw

    async def drop(raw: Any) -> None:
        port = raw.transport.get_extra_info("sockname")[1]
        raw.transport.abort()  # gone, without a closing handshake
        while await asyncio.to_thread(_connected, port):
            await asyncio.sleep(0.05)

    async def held(raw: Any) -> None:
        """Until the stream stops answering pings: its sync thread waits in a claim for our
        lock (the answer to a ping needs that thread too)."""
        while True:
            await raw.send(json.dumps({"type": "ping"}))
            try:
                await asyncio.wait_for(raw.recv(), 0.5)
            except TimeoutError:
                return

    async def scenario() -> None:
        raw = await open_stream()
        with transaction.atomic():  # BEGIN IMMEDIATE: the server's next claim waits for it
            accept(world, "dropped")  # owed now, visible to the claim once committed
            await held(raw)
            await drop(raw)

    run(scenario())
    for _ in range(int(WAIT * 10)):  # each stream's end is logged when the server sees it
        log = stream_server.log_text()[start:]
        if '"event stream closed"' in log:
            break
        time.sleep(0.1)
    assert '"event stream closed"' in log
    assert [line for line in log.splitlines() if '"level": "ERROR"' in line] == []
    assert "Exception in ASGI application" not in log
    detail = stream_api.get(f"/v1/subscriptions/{subscription['id']}", headers=bearer(token))
    assert detail.json()["data"]["backlog"] == 1  # still owed: handed out again after its lease


def _connected(port: int) -> bool:
    """Whether a TCP connection from this local port is still established (Linux)."""
    needle = f":{port:04X} "
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in lines:
                fields = line.split()
                if len(fields) > 3 and (fields[1] + " ").endswith(needle) and fields[3] == "01":
                    return True
    return False


def test_a_revoked_credential_and_a_deleted_subscription_close_the_stream(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """A revoked token's stream closes (4401) within the re-check interval, as docs/events.md
    bounds it (``ORBIT_EVENTS_RECHECK_SECONDS``: 1 s on this server, 5 s by default; issue 29
    saw 3.6 s with the default). The bound is held generously: the close must come within the
    default's 5 s, five intervals here. A deleted subscription closes its streams at once."""
    namespace = Namespace.objects.get(id=world["namespace_id"])
    credential, token = credential_issue(
        namespace=namespace,
        actor_name="short-lived",
        permissions=["tasks:read", "events:subscribe"],
    )
    subscription = subscribe(stream_api, token)
    other = subscribe(stream_api, world["tokens"]["subscriber"])

    async def closed(s: EventStreamConnection) -> int | None:
        with pytest.raises(StreamLost) as lost:
            await asyncio.wait_for(s.receive(), WAIT)
        return lost.value.code

    async def scenario() -> tuple[int | None, float, int | None]:
        async with await stream(stream_server, token, subscription["id"]) as s:
            await asyncio.to_thread(
                credential_revoke, credential=Credential.objects.get(id=credential.id)
            )
            revoked_at = time.monotonic()
            revoked = await closed(s)
            delay = time.monotonic() - revoked_at
        async with await stream(stream_server, world["tokens"]["subscriber"], other["id"]) as s:
            deleted = await asyncio.to_thread(
                stream_api.delete,
                f"/v1/subscriptions/{other['id']}",
                headers=bearer(world["tokens"]["subscriber"]),
            )
            assert deleted.status_code == 200
            gone = await closed(s)
        return revoked, delay, gone

    revoked, delay, gone = run(scenario())
    assert (revoked, gone) == (4401, 4404)
    assert delay < DOCUMENTED_RECHECK_SECONDS, f"the revoked stream stayed open {delay:.1f} s"
