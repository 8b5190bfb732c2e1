"""``GET /v1/asyncapi.json``: the event stream's frames, described as AsyncAPI 3.0 and kept
true. The document validates against the AsyncAPI 3.0.0 JSON Schema (``asyncapi-3.0.0.schema
.json.gz``: ``schemas/3.0.0-without-$id.json`` of the npm package ``@asyncapi/specs`` 6.11.1,
Apache-2.0), and the frames a real stream sends and takes validate against its messages."""

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft7Validator
from websockets.asyncio.client import connect
from websockets.typing import Origin, Subprotocol

from orbit_console.events.asyncapi import CLIENT_FRAMES, SERVER_FRAMES
from orbit_console.events.stream import CLIENT_MEMBERS
from tests.events.conftest import subscribe
from tests.events.test_stream import accept
from tests.support.orbit import bearer, post, review_body
from tests.support.servers import DaphneServer

SCHEMA = Path(__file__).with_name("asyncapi-3.0.0.schema.json.gz")


def test_the_document_is_valid_asyncapi_3(stream_api: httpx.Client) -> None:
    response = stream_api.get("/v1/asyncapi.json", headers=bearer("orb_wrong"))
    assert response.status_code == 200
    document = response.json()
    Draft7Validator(json.loads(gzip.decompress(SCHEMA.read_bytes()))).validate(document)
    assert document["servers"]["orbit"]["host"] == stream_api.base_url.netloc.decode()
    channel = document["channels"]["events"]
    assert channel["address"] == "/v1/subscriptions/{subscription_id}/events"
    assert set(channel["messages"]) == set(SERVER_FRAMES) | set(CLIENT_FRAMES)
    actions = {op["action"] for op in document["operations"].values()}
    assert actions == {"send", "receive"}


def test_real_frames_match_the_document(
    world: dict[str, Any], stream_server: DaphneServer, stream_api: httpx.Client
) -> None:
    """Every kind of frame, sent and taken, against its message's payload schema."""
    tokens = world["tokens"]
    subscription = subscribe(stream_api, tokens["subscriber"])
    path = f"/v1/subscriptions/{subscription['id']}/events"
    sent: list[dict[str, Any]] = []
    taken = [{"type": "ping"}, {"type": "resume", "proofs": []}]

    async def scenario() -> None:
        async with connect(
            f"ws://127.0.0.1:{stream_server.port}{path}",
            subprotocols=[Subprotocol("orbit.events.v1")],
            additional_headers=bearer(tokens["subscriber"]),
            origin=Origin(stream_server.url),
        ) as raw:
            sent.append(json.loads(await raw.recv()))  # welcome
            for frame in taken:
                await raw.send(json.dumps(frame))
            reviewed = post(
                stream_api, world["tasks"]["needs_review"], "review", tokens["admin"], review_body()
            )
            assert reviewed.status_code == 200
            await asyncio.to_thread(accept, world, "asyncapi")
            while sum(frame["type"] == "event" for frame in sent) < 2 or not any(
                frame["type"] == "pong" for frame in sent
            ):
                sent.append(json.loads(await asyncio.wait_for(raw.recv(), 20)))
            proof = next(f for f in sent if f["type"] == "event")["delivery"]["proof"]
            ack = {"type": "ack", "proof": proof}
            taken.append(ack)
            await raw.send(json.dumps(ack))
            while sent[-1]["type"] != "acked":
                sent.append(json.loads(await asyncio.wait_for(raw.recv(), 20)))
            await raw.send(json.dumps({"type": "shout"}))
            sent.append(json.loads(await asyncio.wait_for(raw.recv(), 20)))  # error

    asyncio.run(scenario())
    kinds = {frame["type"] for frame in sent}
    assert kinds == {"welcome", "event", "pong", "acked", "error"}
    for frame in sent:
        Draft7Validator(SERVER_FRAMES[frame["type"]]).validate(frame)
    for frame in taken:
        Draft7Validator(CLIENT_FRAMES[frame["type"]]).validate(frame)
    types = {frame["event"]["type"] for frame in sent if frame["type"] == "event"}
    assert {"task.review", "task.completed", "task.accepted"} & types


def test_the_server_reads_exactly_the_client_frames_the_document_describes() -> None:
    """``read_frame`` takes the members each client frame's schema lists, no more, no less."""
    assert {kind: frozenset(schema["properties"]) for kind, schema in CLIENT_FRAMES.items()} == (
        CLIENT_MEMBERS
    )
    assert all(
        set(schema["required"]) == set(schema["properties"]) for schema in CLIENT_FRAMES.values()
    )


def test_the_document_states_the_limits_and_close_codes(stream_api: httpx.Client) -> None:
    description = stream_api.get("/v1/asyncapi.json").json()["info"]["description"]
    for words in ("429 STREAM_LIMIT", "4429", "scheme, host and port", "owns the subscription"):
        assert words in description
