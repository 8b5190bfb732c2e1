"""``/v1/subscriptions`` (docs/events.md): created once per Idempotency-Key (C2, C7's rule),
validated field by field (C6), and seen only within the credential's scope (C4)."""

from typing import Any

import httpx

from orbit_console.events.models import Subscription
from orbit_console.ledger.lifecycle import credential_issue
from orbit_console.ledger.models import Namespace, Queue
from orbit_console.lib.ids import new_id
from tests.events.conftest import subscribe
from tests.support.orbit import bearer, new_key


def create(api: httpx.Client, token: str, body: Any, key: str | None = None) -> httpx.Response:
    return api.post(
        "/v1/subscriptions",
        json=body,
        headers={**bearer(token), "Idempotency-Key": key or new_key()},
    )


def test_a_subscription_is_created_once_per_key_C7(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    token = world["tokens"]["subscriber"]
    key = new_key()
    first = create(stream_api, token, {"name": "console", "lease_ms": 5000}, key)
    again = create(stream_api, token, {"lease_ms": 5000, "name": "console"}, key)
    other = create(stream_api, token, {"name": "console", "lease_ms": 6000}, key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["data"] == again.json()["data"]
    assert other.status_code == 409 and other.json()["error"]["code"] == "IDEMPOTENCY_CONFLICT"
    assert Subscription.objects.filter(id=first.json()["data"]["id"]).count() == 1
    detail = first.json()["data"]
    assert detail["namespace_id"] == world["namespace_id"]
    assert (detail["queue_ids"], detail["lease_ms"], detail["backlog"]) == ([], 5000, 0)


def test_bad_bodies_are_refused_and_create_nothing_C6(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    token = world["tokens"]["subscriber"]
    before = Subscription.objects.filter(namespace_id=world["namespace_id"]).count()
    cases = {
        "name": [{}, {"name": ""}, {"name": "   "}, {"name": 7}, {"name": "x" * 201}],
        "queue_ids": [
            {"name": "x", "queue_ids": []},
            {"name": "x", "queue_ids": ["nope"]},
            {"name": "x", "queue_ids": [world["queue_id"], world["queue_id"]]},
            {"name": "x", "queue_ids": [new_id()]},
        ],
        "lease_ms": [{"name": "x", "lease_ms": 999}, {"name": "x", "lease_ms": True}],
        "Name": [{"name": "x", "Name": "y"}],
    }
    for field, bodies in cases.items():
        for body in bodies:
            response = create(stream_api, token, body)
            assert response.status_code == 400, (body, response.text)
            error = response.json()["error"]
            assert error["code"] == "INVALID_ARGUMENT"
            assert error.get("field") == field, (body, error)
    missing_key = stream_api.post("/v1/subscriptions", json={"name": "x"}, headers=bearer(token))
    assert missing_key.json()["error"]["field"] == "Idempotency-Key"
    assert Subscription.objects.filter(namespace_id=world["namespace_id"]).count() == before


def test_a_credential_sees_only_subscriptions_within_its_scope_C4(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    reports = Queue.objects.get(namespace=namespace, name="reports")
    _, limited = credential_issue(
        namespace=namespace,
        actor_name="limited-subscriber",
        permissions=["tasks:read", "events:subscribe"],
        queues=[reports],
    )
    whole = subscribe(stream_api, world["tokens"]["subscriber"])
    objects_only = subscribe(
        stream_api, world["tokens"]["subscriber"], queue_ids=[world["queue_id"]]
    )
    mine = subscribe(stream_api, limited, queue_ids=[reports.id])
    for hidden in (whole, objects_only):
        response = stream_api.get(f"/v1/subscriptions/{hidden['id']}", headers=bearer(limited))
        assert response.status_code == 404
        deleted = stream_api.delete(f"/v1/subscriptions/{hidden['id']}", headers=bearer(limited))
        assert deleted.status_code == 404
    listed = stream_api.get("/v1/subscriptions", headers=bearer(limited)).json()["data"]["items"]
    assert [item["id"] for item in listed] == [mine["id"]]
    everything = stream_api.get(
        "/v1/subscriptions", headers=bearer(world["tokens"]["subscriber"])
    ).json()["data"]["items"]
    assert {whole["id"], objects_only["id"], mine["id"]} <= {item["id"] for item in everything}
    assert Subscription.objects.filter(id=whole["id"]).exists()


def test_a_lease_is_an_integer_as_the_document_has_it(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    """``lease_ms`` is an integer by JSON Schema: 6000.0 is 6000; 6000.5 is not one."""
    token = world["tokens"]["subscriber"]
    whole = stream_api.post(
        "/v1/subscriptions",
        content=b'{"name": "lease", "lease_ms": 6000.0}',
        headers={**bearer(token), "Idempotency-Key": new_key(), "Content-Type": "application/json"},
    )
    assert whole.status_code == 201 and whole.json()["data"]["lease_ms"] == 6000
    half = create(stream_api, token, {"name": "lease", "lease_ms": 6000.5})
    assert half.status_code == 400 and half.json()["error"]["field"] == "lease_ms"
