"""GET /v1/credential (our choice, docs/api.md): a token's holder learns what their own
credential covers — how a console storing a token issued elsewhere learns its scope. C1 for it
is in test_common_rules (every endpoint)."""

from typing import Any

import httpx

from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.models import Credential, Namespace, Queue
from tests.support.orbit import bearer


def credential_of(api: httpx.Client, token: str) -> dict[str, Any]:
    response = api.get("/v1/credential", headers=bearer(token))
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_the_credential_says_its_namespace_queues_and_permissions(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    whole = credential_of(api, world["tokens"]["auditor"])
    stored = Credential.objects.get(token_hash=hash_token(world["tokens"]["auditor"]))
    assert whole == {
        "id": stored.id,
        "actor_id": stored.actor_id,
        "actor_name": "auditor",
        "namespace_id": world["namespace_id"],
        "namespace_name": Namespace.objects.get(id=world["namespace_id"]).name,
        "queue_ids": [],
        "permissions": ["tasks:audit:read", "tasks:read"],
    }
    reports = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    assert credential_of(api, world["tokens"]["other_queue"])["queue_ids"] == [reports.id]


def test_the_credential_never_shows_its_token_or_hash(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = world["tokens"]["admin"]
    response = api.get("/v1/credential", headers=bearer(token))
    assert token not in response.text
    assert hash_token(token) not in response.text
