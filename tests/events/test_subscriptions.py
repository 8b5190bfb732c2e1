"""``/v1/subscriptions`` (docs/events.md): created once per Idempotency-Key (C2, C7's rule),
validated field by field (C6), and seen only by the credential that owns it, within its scope
(C4)."""

from typing import Any

import httpx

from orbit_console.events.models import Subscription
from orbit_console.ledger.lifecycle import credential_issue
from orbit_console.ledger.models import Credential, Namespace, Queue
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


def test_a_credential_sees_only_its_own_subscriptions_within_its_scope_C4(
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
    theirs = stream_api.get(
        "/v1/subscriptions", headers=bearer(world["tokens"]["subscriber"])
    ).json()["data"]["items"]
    assert {item["id"] for item in theirs} == {whole["id"], objects_only["id"]}
    assert Subscription.objects.filter(id=whole["id"]).exists()


def test_another_credential_of_the_namespace_can_neither_see_nor_delete_a_subscription_C4(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    """Issue 29: subscriptions have an owner. Another credential of the same namespace, with
    the whole namespace in scope and events:subscribe, gets 404 as for what does not exist."""
    namespace = Namespace.objects.get(id=world["namespace_id"])
    _, other = credential_issue(
        namespace=namespace,
        actor_name="another-subscriber",
        permissions=["tasks:read", "events:subscribe"],
    )
    mine = subscribe(stream_api, world["tokens"]["subscriber"])
    path = f"/v1/subscriptions/{mine['id']}"
    assert stream_api.get(path, headers=bearer(other)).status_code == 404
    deleted = stream_api.delete(path, headers=bearer(other))
    assert deleted.status_code == 404 and deleted.json()["error"]["code"] == "NOT_FOUND"
    listed = stream_api.get("/v1/subscriptions", headers=bearer(other)).json()["data"]["items"]
    assert mine["id"] not in {item["id"] for item in listed}
    assert Subscription.objects.get(id=mine["id"]).credential_id  # kept, with its owner
    owner = stream_api.get(path, headers=bearer(world["tokens"]["subscriber"]))
    assert owner.status_code == 200


def test_an_idempotency_key_belongs_to_its_credential_C7(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    """The same key from another credential creates that credential's own subscription: a
    replay answers only the credential that made the first request."""
    namespace = Namespace.objects.get(id=world["namespace_id"])
    _, other = credential_issue(
        namespace=namespace, actor_name="keyed", permissions=["events:subscribe"]
    )
    key = new_key()
    first = create(stream_api, world["tokens"]["subscriber"], {"name": "same key"}, key)
    second = create(stream_api, other, {"name": "same key"}, key)
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["data"]["id"] != second.json()["data"]["id"]


def test_a_subscription_made_before_owners_belongs_to_the_actor_that_made_it(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    """Events migration 0002 keeps earlier rows without a credential: the credentials of the
    actor that made one still see it (a rotated token included), others do not."""
    subscriber = Credential.objects.get(namespace_id=world["namespace_id"], actor_name="subscriber")
    made = subscribe(stream_api, world["tokens"]["subscriber"])
    Subscription.objects.filter(id=made["id"]).update(credential_id="")  # as migrated
    namespace = Namespace.objects.get(id=world["namespace_id"])
    _, rotated = credential_issue(
        namespace=namespace, actor_name="subscriber", permissions=["events:subscribe"]
    )
    _, stranger = credential_issue(
        namespace=namespace, actor_name="stranger", permissions=["events:subscribe"]
    )
    path = f"/v1/subscriptions/{made['id']}"
    assert subscriber.actor_id == Subscription.objects.get(id=made["id"]).actor_id
    assert stream_api.get(path, headers=bearer(rotated)).status_code == 200
    assert stream_api.get(path, headers=bearer(stranger)).status_code == 404


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
