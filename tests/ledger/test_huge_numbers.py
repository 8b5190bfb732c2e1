"""Numbers no integer rule can take, sent where the API takes an integer (issue 29): each is
refused with the API's envelope as soon as its size shows it is out of range, never converted
first. ``POST /v1/subscriptions`` with ``"lease_ms": 1E+2000000`` answered after 172 s, the
worker serving nothing else meanwhile: ``int()`` of such a number is quadratic in its exponent.

"Quickly" is held by the client's timeout (``TIMEOUT``: generous on a loaded machine, and two
orders of magnitude short of what a conversion takes), not by a timed assertion. The whole
surface, frames included, is swept by ``tests/ledger/test_fuzz.py``'s hostile targets."""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orbit_console.events.models import Subscription
from orbit_console.ledger.models import Task
from orbit_console.lib import strictjson
from tests.support.orbit import bearer, new_key, post, retry_body, review_body
from tests.support.servers import DaphneServer

TIMEOUT = 10.0
# JSON number texts, each beyond every integer rule of the API.
HUGE = {
    "huge exponent": "1E+2000000",
    "huge negative": "-1E+2000000",
    "huge exponent with a fraction": "1.5E+2000000",
    "4000 digits": "9" * 4000,  # under int()'s limit, so once converted before any check
    "50000 digits": "9" * 50_000,
    "a long fraction": "1." + "0" * 100_000 + "1",
}


@pytest.fixture
def client(orbit_server: DaphneServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=orbit_server.url, timeout=TIMEOUT) as client:
        yield client


def assert_refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text[:300]
    body = response.json()
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["field"] == field
    assert body["request_id"] == response.headers["X-Request-Id"]


@pytest.mark.parametrize("number", HUGE.values(), ids=HUGE.keys())
def test_a_huge_lease_is_refused_before_it_is_converted(
    client: httpx.Client, world: dict[str, Any], number: str
) -> None:
    """The finding's own request, and its relatives: 400 at once, nothing created, and the
    worker free for the next request."""
    token = world["tokens"]["subscriber"]
    before = Subscription.objects.filter(namespace_id=world["namespace_id"]).count()
    response = client.post(
        "/v1/subscriptions",
        content=f'{{"name":"n","lease_ms":{number}}}',
        headers={**bearer(token), "Idempotency-Key": new_key(), "Content-Type": "application/json"},
    )
    assert_refused(response, "lease_ms")
    assert Subscription.objects.filter(namespace_id=world["namespace_id"]).count() == before
    assert (
        client.get("/v1/credential", headers=bearer(world["tokens"]["reader"])).status_code == 200
    )


@pytest.mark.parametrize("number", HUGE.values(), ids=HUGE.keys())
def test_a_huge_task_timeout_is_refused_before_it_is_converted_RT2(
    client: httpx.Client, world: dict[str, Any], number: str
) -> None:
    body = json.dumps(retry_body()).replace(
        '"task_timeout_ms": 60000', f'"task_timeout_ms": {number}'
    )
    assert number in body
    response = post(client, world["tasks"]["failed"], "retry", world["tokens"]["admin"], body)
    assert_refused(response, "task_timeout_ms")


@pytest.mark.parametrize("digits", ["9" * 4000, "0" * 4000 + "1" + "0" * 4000, "1" + "0" * 20])
def test_a_huge_limit_is_refused_on_every_list_AU2(
    client: httpx.Client, world: dict[str, Any], digits: str
) -> None:
    task_id = world["tasks"]["needs_review"]
    for path, token in (
        ("/v1/tasks", "admin"),
        (f"/v1/tasks/{task_id}/operations", "admin"),
        (f"/v1/tasks/{task_id}/attempts", "admin"),
        ("/v1/subscriptions", "subscriber"),
    ):
        response = client.get(
            path, params={"limit": digits}, headers=bearer(world["tokens"][token])
        )
        assert_refused(response, "limit")


def test_leading_zeros_do_not_count_against_a_limit(
    client: httpx.Client, world: dict[str, Any]
) -> None:
    """A limit is judged on its value: 0005 is 5 (the length bound counts significant digits)."""
    response = client.get(
        "/v1/tasks", params={"limit": "0005"}, headers=bearer(world["tokens"]["admin"])
    )
    assert response.status_code == 200
    assert len(response.json()["data"]["items"]) <= 5


@pytest.mark.parametrize("number", ["1E+2000000", "9" * 200_000, "-0." + "0" * 100_000 + "1"])
def test_a_huge_number_in_a_result_is_kept_exactly_and_answered_at_once_RV3(
    client: httpx.Client, world: dict[str, Any], live_db: None, number: str
) -> None:
    """A result takes any JSON number (RV3, I8): stored as written, its replay recognised
    (O4: the body's digest reads the number's digits, not its value as an integer)."""
    task_id = world["tasks"]["needs_review"]
    body = json.dumps(review_body(result={"n": "@"})).replace('"@"', number)
    key = new_key()
    first = post(client, task_id, "review", world["tokens"]["admin"], body, key=key)
    assert first.status_code == 200, first.text[:300]
    assert Task.objects.get(id=task_id).result == f'{{"n": {number}}}'
    again = post(client, task_id, "review", world["tokens"]["admin"], body, key=key)
    assert again.status_code == 200
    receipt = strictjson.loads(again.text)  # Python's json refuses 200 000-digit integers
    assert receipt["data"]["deduplicated"] is True
    assert strictjson.dumps(receipt["data"]["task"]["result"]) == f'{{"n":{number}}}'
