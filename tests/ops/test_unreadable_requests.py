"""Requests Django cannot read, over real HTTP (issue 29): a 10 000-character ``Content-Type``
got a bare 500 without a request id and a traceback that was not JSON in the log. Every such
request now answers 400 with a request id — in the API's envelope under ``/v1/`` (E) — and is
logged as one JSON warning line."""

import asyncio
import json
from typing import Any

import httpx
import pytest

from orbit_console.ops.handler import get_api_application
from tests.support.orbit import bearer, new_key
from tests.support.servers import DaphneServer

LONG_CONTENT_TYPE = "application/json; charset=utf-8; x=" + "a" * 10_000


def assert_envelope(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text[:300]
    body: dict[str, Any] = response.json()
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["request_id"] == response.headers["X-Request-Id"]
    assert len(body["request_id"]) == 32
    return body


def new_log(server: DaphneServer, start: int) -> list[str]:
    return server.log_text()[start:].splitlines()


def test_a_content_type_django_cannot_parse_is_the_apis_400_E(
    orbit_server: DaphneServer, world: dict[str, Any]
) -> None:
    start = len(orbit_server.log_text())
    token = world["tokens"]["admin"]
    with httpx.Client(base_url=orbit_server.url, timeout=30) as client:
        write = client.post(
            "/v1/subscriptions",
            content=b'{"name": "n"}',
            headers={
                **bearer(token),
                "Idempotency-Key": new_key(),
                "Content-Type": LONG_CONTENT_TYPE,
            },
        )
        read = client.get("/v1/tasks", headers={**bearer(token), "Content-Type": LONG_CONTENT_TYPE})
    request_ids = {assert_envelope(write)["request_id"], assert_envelope(read)["request_id"]}
    lines = new_log(orbit_server, start)
    assert not any("Traceback" in line or "Exception in ASGI" in line for line in lines)
    warnings = [json.loads(line) for line in lines if '"unreadable request"' in line]
    assert {entry["request_id"] for entry in warnings} == request_ids
    assert {entry["level"] for entry in warnings} == {"WARNING"}


def test_a_console_page_with_such_a_header_is_a_400_with_a_request_id(
    orbit_server: DaphneServer,
) -> None:
    response = httpx.get(
        f"{orbit_server.url}/signin", headers={"Content-Type": LONG_CONTENT_TYPE}, timeout=30
    )
    assert response.status_code == 400
    assert len(response.headers["X-Request-Id"]) == 32


def test_a_query_string_that_is_not_utf8_is_the_apis_400_E(live_db: None) -> None:
    """uvicorn refuses such a request line itself; a server that passes it on (the ASGI
    handler is driven directly here, as a server would) gets the API's envelope, not
    Django's empty 400."""
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/v1/tasks",
        "raw_path": b"/v1/tasks",
        "root_path": "",
        "query_string": b"state=\xff\xfe",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(get_api_application()(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = json.loads(
        b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    )
    headers = dict(start["headers"])
    assert start["status"] == 400 and body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["request_id"] == headers[b"X-Request-Id"].decode()


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"params": {f"p{n}": "1" for n in range(1_200)}},  # over DATA_UPLOAD_MAX_NUMBER_FIELDS
        {"headers": {"Host": "not..a..host"}},  # a Host the deployment does not serve
    ],
    ids=["too many query parameters", "a bad Host"],
)
def test_requests_django_refuses_before_the_view_are_the_apis_400_E(
    orbit_server: DaphneServer, world: dict[str, Any], request_kwargs: dict[str, Any]
) -> None:
    """Django's own refusals of a suspicious request were its HTML page under /v1/."""
    headers = {**bearer(world["tokens"]["admin"]), **request_kwargs.pop("headers", {})}
    response = httpx.get(
        f"{orbit_server.url}/v1/tasks", headers=headers, timeout=30, **request_kwargs
    )
    assert_envelope(response)
