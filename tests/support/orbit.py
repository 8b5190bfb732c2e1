"""Helpers for talking to the recovery API in tests."""

import json
import secrets
from typing import Any

import httpx

REVIEW_REVISION = "3"  # seeded NEEDS_REVIEW tasks: accepted (1), started (2), parked (3)
RETRY_REVISION = "3"  # seeded FAILED tasks: accepted (1), started (2), failed (3)
CANCELLED_REVISION = "2"  # seeded CANCELLED task: accepted (1), cancelled (2)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_key() -> str:
    return "key-" + secrets.token_hex(8)


def review_body(revision: str = REVIEW_REVISION, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "expected_revision": revision,
        "reason": "Checked the object store: the write never happened",
        "evidence_ref": "evidence:reconciliation-001",
        "execution_settled": True,
        "outcome": "FAILED",
        "result": {"confirmed": True, "sequence": 9007199254740993},
    }
    body.update(overrides)
    return body


def retry_body(revision: str = RETRY_REVISION, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "expected_revision": revision,
        "reason": "The earlier execution has ended; running it again is safe",
        "evidence_ref": "evidence:safe-retry-001",
        "safe_to_retry": True,
        "task_timeout_ms": 60000,
    }
    body.update(overrides)
    return body


def post(
    api: httpx.Client,
    task_id: str,
    verb: str,
    token: str,
    body: dict[str, Any] | bytes | str,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    content = body if isinstance(body, bytes | str) else json.dumps(body)
    all_headers = {"Content-Type": "application/json", **bearer(token)}
    all_headers["Idempotency-Key"] = key or new_key()
    all_headers.update(headers or {})
    return api.post(f"/v1/tasks/{task_id}:{verb}", content=content, headers=all_headers)


def review(
    api: httpx.Client, world: dict[str, Any], task: str = "needs_review", **kw: Any
) -> httpx.Response:
    token = kw.pop("token", world["tokens"]["admin"])
    key = kw.pop("key", None)
    return post(api, world["tasks"][task], "review", token, review_body(**kw), key=key)


def retry(
    api: httpx.Client, world: dict[str, Any], task: str = "failed", **kw: Any
) -> httpx.Response:
    token = kw.pop("token", world["tokens"]["admin"])
    key = kw.pop("key", None)
    return post(api, world["tasks"][task], "retry", token, retry_body(**kw), key=key)


def get_task(api: httpx.Client, task_id: str, token: str) -> httpx.Response:
    return api.get(f"/v1/tasks/{task_id}", headers=bearer(token))


def error_code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]
