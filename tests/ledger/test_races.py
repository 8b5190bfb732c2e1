"""Racing writes — RT6 and C7 under real concurrency.

Over HTTP, the requests alternate between two daphne processes on the same database (one
process runs its sync views one at a time, two really race), released together by a barrier
once every client has its connection open. In-process, threads call the services directly,
each on its own database connection, so the database's own locking is what serialises them.
Key races are repeated over a few rounds so that a flaky lock shows up as a failure.
"""

import json
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.db import connection

from orbit_console.ledger import services
from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.errors import ApiError
from orbit_console.ledger.models import (
    Credential,
    IdempotencyRecord,
    OperationAudit,
    Queue,
    Task,
    TaskEvent,
)
from orbit_console.ledger.requests import parse_retry, parse_review
from orbit_console.lib.strictjson import dumps
from tests.support.orbit import (
    RETRY_REVISION,
    new_key,
    post,
    retry_body,
    review_body,
)
from tests.support.servers import DaphneServer

RACERS = 8
ROUNDS = range(3)

Call = Callable[[httpx.Client], httpx.Response]


# --- Helpers ----------------------------------------------------------------------------------


def race_http(servers: list[DaphneServer], calls: list[Call]) -> list[httpx.Response]:
    """Run each call on its own client, alternating servers, all released at once."""
    barrier = threading.Barrier(len(calls))

    def run(index: int) -> httpx.Response:
        url = servers[index % len(servers)].url
        with httpx.Client(base_url=url, timeout=60) as client:
            client.get("/health/live")  # open the connection before the start
            barrier.wait(timeout=30)
            return calls[index](client)

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        responses = list(pool.map(run, range(len(calls))))
    for response in responses:
        assert response.status_code < 500, response.text
    return responses


Answer = services.Receipt | ApiError


def race_in_process(calls: list[Callable[[], services.Receipt]]) -> list[Answer]:
    """Run each service call in its own thread (its own DB connection), all released at once.
    API errors are answers; anything else (a lock timeout, a deadlock) fails the test."""
    barrier = threading.Barrier(len(calls))

    def run(index: int) -> Answer:
        try:
            barrier.wait(timeout=30)
            try:
                return calls[index]()
            except ApiError as error:
                return error
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, range(len(calls))))


def credential_of(token: str) -> Credential:
    return Credential.objects.prefetch_related("queues").get(token_hash=hash_token(token))


def review_call(world: dict[str, Any], key: str, **body: Any) -> Callable[[], services.Receipt]:
    task_id = world["tasks"][body.pop("task", "needs_review")]
    request = parse_review(json.dumps(review_body(**body)).encode())

    def call() -> services.Receipt:
        credential = credential_of(world["tokens"]["admin"])
        return services.task_review(
            credential=credential, task_id=task_id, idempotency_key=key, request=request
        )

    return call


def retry_call(world: dict[str, Any], key: str, **body: Any) -> Callable[[], services.Receipt]:
    task_id = world["tasks"][body.pop("task", "failed")]
    request = parse_retry(json.dumps(retry_body(**body)).encode())

    def call() -> services.Receipt:
        credential = credential_of(world["tokens"]["admin"])
        return services.task_retry(
            credential=credential, task_id=task_id, idempotency_key=key, request=request
        )

    return call


def http_review(world: dict[str, Any], key: str, task: str = "needs_review", **body: Any) -> Call:
    task_id, token = world["tasks"][task], world["tokens"]["admin"]
    return lambda client: post(client, task_id, "review", token, review_body(**body), key=key)


def http_retry(world: dict[str, Any], key: str, task: str = "failed", **body: Any) -> Call:
    task_id, token = world["tasks"][task], world["tokens"]["admin"]
    return lambda client: post(client, task_id, "retry", token, retry_body(**body), key=key)


def statuses(responses: list[httpx.Response]) -> Counter[int]:
    return Counter(response.status_code for response in responses)


def codes(responses: list[httpx.Response]) -> set[str]:
    return {r.json()["error"]["code"] for r in responses if r.status_code >= 400}


def outcome_of(answer: Answer) -> tuple[int, str | None]:
    if isinstance(answer, ApiError):
        return answer.status, answer.code
    return answer.status, None


def queue_in_use(task_id: str) -> int:
    return Queue.objects.get(id=Task.objects.get(id=task_id).queue_id).in_use


def snapshot(task_id: str) -> tuple[str, int, str | None, int]:
    task = Task.objects.get(id=task_id)
    return task.state, task.revision, task.result, task.attempt_count


@pytest.fixture
def servers(orbit_server: DaphneServer, orbit_server_2: DaphneServer) -> list[DaphneServer]:
    return [orbit_server, orbit_server_2]


# --- Over HTTP, two processes -----------------------------------------------------------------


@pytest.mark.parametrize("round_", ROUNDS)
def test_racing_retries_with_different_keys_create_one_successor_RT6(
    servers: list[DaphneServer], world: dict[str, Any], live_db: None, round_: int
) -> None:
    source = world["tasks"]["failed"]
    before = snapshot(source)
    in_use = queue_in_use(source)

    responses = race_http(servers, [http_retry(world, new_key()) for _ in range(RACERS)])

    assert statuses(responses) == {201: 1, 409: RACERS - 1}
    assert codes(responses) == {"STATE_CONFLICT"}
    children = list(Task.objects.filter(retry_of=source))
    assert len(children) == 1
    (winner,) = [r for r in responses if r.status_code == 201]
    assert winner.json()["data"]["task"]["id"] == children[0].id
    assert OperationAudit.objects.filter(task_id=source, action="task.retry").count() == 1
    assert IdempotencyRecord.objects.filter(task_id=source, action="task.retry").count() == 1
    assert snapshot(source) == before  # RT5: the source is untouched
    assert queue_in_use(source) == in_use + 1


@pytest.mark.parametrize("round_", ROUNDS)
def test_racing_identical_reviews_apply_once_and_replay_the_receipt_C7(
    servers: list[DaphneServer], world: dict[str, Any], live_db: None, round_: int
) -> None:
    task_id = world["tasks"]["needs_review"]
    events = TaskEvent.objects.filter(task_id=task_id, kind="task.completed").count()
    in_use = queue_in_use(task_id)
    key = new_key()

    responses = race_http(servers, [http_review(world, key) for _ in range(RACERS)])

    assert statuses(responses) == {200: RACERS}
    data = [r.json()["data"] for r in responses]
    assert sorted(d["deduplicated"] for d in data) == [False] + [True] * (RACERS - 1)
    audits = list(OperationAudit.objects.filter(task_id=task_id, action="task.review"))
    assert len(audits) == 1
    assert {d["audit_id"] for d in data} == {audits[0].id}
    assert {d["task"]["revision"] for d in data} == {"4"}
    assert Task.objects.get(id=task_id).revision == 4
    assert TaskEvent.objects.filter(task_id=task_id, kind="task.completed").count() == events + 1
    assert queue_in_use(task_id) == in_use - 1  # one unit released, not eight


@pytest.mark.parametrize("round_", ROUNDS)
def test_racing_identical_retries_return_one_child_RT4_RT6(
    servers: list[DaphneServer], world: dict[str, Any], live_db: None, round_: int
) -> None:
    source = world["tasks"]["failed"]
    key = new_key()

    responses = race_http(servers, [http_retry(world, key) for _ in range(RACERS)])

    assert statuses(responses) == {201: 1, 200: RACERS - 1}
    data = [r.json()["data"] for r in responses]
    for response in responses:
        assert response.json()["data"]["deduplicated"] is (response.status_code == 200)
    children = list(Task.objects.filter(retry_of=source))
    assert len(children) == 1
    assert {d["task"]["id"] for d in data} == {children[0].id}
    assert {d["source_task_id"] for d in data} == {source}
    assert len({d["audit_id"] for d in data}) == 1
    assert OperationAudit.objects.filter(task_id=source, action="task.retry").count() == 1


@pytest.mark.parametrize("round_", ROUNDS)
def test_racing_reviews_with_different_keys_apply_once_RV1_RV5(
    servers: list[DaphneServer], world: dict[str, Any], live_db: None, round_: int
) -> None:
    task_id = world["tasks"]["needs_review"]
    calls = [
        http_review(world, new_key(), outcome="SUCCEEDED" if i % 2 else "FAILED")
        for i in range(RACERS)
    ]

    responses = race_http(servers, calls)

    assert statuses(responses) == {200: 1, 409: RACERS - 1}
    assert codes(responses) == {"STATE_CONFLICT"}
    (winner,) = [r for r in responses if r.status_code == 200]
    task = Task.objects.get(id=task_id)
    assert task.state == winner.json()["data"]["task"]["state"]
    assert task.revision == 4
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1


def test_racing_review_and_retries_of_a_parked_task_RV1_RT1_RT6(
    servers: list[DaphneServer], world: dict[str, Any], live_db: None
) -> None:
    """Reviews (to FAILED at revision 3) race retries that expect the reviewed revision 4: one
    review wins; a retry can only win after it, and at most one does."""
    task_id = world["tasks"]["needs_review"]
    half = RACERS // 2
    calls = [http_review(world, new_key()) for _ in range(half)]
    calls += [http_retry(world, new_key(), task="needs_review", revision="4") for _ in range(half)]

    responses = race_http(servers, calls)

    reviews, retries = responses[:half], responses[half:]
    assert statuses(reviews) == {200: 1, 409: half - 1}
    assert statuses(retries)[201] <= 1
    assert set(statuses(retries)) <= {201, 409}
    assert codes(responses) == {"STATE_CONFLICT"}
    children = list(Task.objects.filter(retry_of=task_id))
    assert len(children) == statuses(retries)[201]
    if children:
        # The successor was created only after the review had made the source FAILED.
        (review_ok,) = [r for r in reviews if r.status_code == 200]
        review_audit = OperationAudit.objects.get(id=review_ok.json()["data"]["audit_id"])
        retry_audit = OperationAudit.objects.get(task_id=task_id, action="task.retry")
        assert retry_audit.seq == review_audit.seq + 1
        assert json.loads(retry_audit.before) == {"state": "FAILED", "revision": "4"}


def test_racing_reviews_and_retries_of_a_failed_task_RV1_RT6(
    servers: list[DaphneServer], world: dict[str, Any], live_db: None
) -> None:
    """A FAILED task cannot be reviewed; among the retries exactly one wins."""
    source = world["tasks"]["failed"]
    half = RACERS // 2
    calls: list[Call] = []
    for _ in range(half):
        calls.append(http_review(world, new_key(), task="failed", revision=RETRY_REVISION))
        calls.append(http_retry(world, new_key()))

    responses = race_http(servers, calls)

    reviews, retries = responses[0::2], responses[1::2]
    assert statuses(reviews) == {409: half}
    assert statuses(retries) == {201: 1, 409: half - 1}
    assert codes(responses) == {"STATE_CONFLICT"}
    assert Task.objects.filter(retry_of=source).count() == 1
    assert not OperationAudit.objects.filter(task_id=source, action="task.review").exists()


# --- In-process: the services on their own connections ---------------------------------------


@pytest.mark.parametrize("round_", ROUNDS)
def test_service_retries_with_different_keys_create_one_successor_RT6(
    world: dict[str, Any], live_db: None, round_: int
) -> None:
    source = world["tasks"]["failed"]

    answers = race_in_process([retry_call(world, new_key()) for _ in range(RACERS)])

    assert Counter(map(outcome_of, answers)) == {
        (201, None): 1,
        (409, "STATE_CONFLICT"): RACERS - 1,
    }
    children = list(Task.objects.filter(retry_of=source))
    assert len(children) == 1
    (winner,) = [a for a in answers if isinstance(a, services.Receipt)]
    assert winner.data["task"]["id"] == children[0].id
    assert OperationAudit.objects.filter(task_id=source, action="task.retry").count() == 1


@pytest.mark.parametrize("round_", ROUNDS)
def test_service_identical_retries_return_one_child_C7(
    world: dict[str, Any], live_db: None, round_: int
) -> None:
    source = world["tasks"]["failed"]
    key = new_key()

    answers = race_in_process([retry_call(world, key) for _ in range(RACERS)])

    receipts = [a for a in answers if isinstance(a, services.Receipt)]
    assert len(receipts) == RACERS
    assert Counter(r.status for r in receipts) == {201: 1, 200: RACERS - 1}
    assert sorted(r.data["deduplicated"] for r in receipts) == [False] + [True] * (RACERS - 1)
    (child,) = Task.objects.filter(retry_of=source)
    assert {json.loads(_task_json(r))["id"] for r in receipts} == {child.id}
    assert len({r.data["audit_id"] for r in receipts}) == 1
    assert IdempotencyRecord.objects.filter(task_id=source, action="task.retry").count() == 1


@pytest.mark.parametrize("round_", ROUNDS)
def test_service_identical_reviews_apply_once_C7(
    world: dict[str, Any], live_db: None, round_: int
) -> None:
    task_id = world["tasks"]["needs_review"]
    key = new_key()

    answers = race_in_process([review_call(world, key) for _ in range(RACERS)])

    receipts = [a for a in answers if isinstance(a, services.Receipt)]
    assert len(receipts) == RACERS
    assert {r.status for r in receipts} == {200}
    assert sorted(r.data["deduplicated"] for r in receipts) == [False] + [True] * (RACERS - 1)
    (audit,) = OperationAudit.objects.filter(task_id=task_id, action="task.review")
    assert {r.data["audit_id"] for r in receipts} == {audit.id}
    assert Task.objects.get(id=task_id).revision == 4


@pytest.mark.parametrize("round_", ROUNDS)
def test_service_reviews_with_different_keys_apply_once_RV1(
    world: dict[str, Any], live_db: None, round_: int
) -> None:
    task_id = world["tasks"]["needs_review"]

    answers = race_in_process([review_call(world, new_key()) for _ in range(RACERS)])

    assert Counter(map(outcome_of, answers)) == {
        (200, None): 1,
        (409, "STATE_CONFLICT"): RACERS - 1,
    }
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1


def test_service_review_and_retries_of_a_parked_task_RV1_RT6(
    world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    half = RACERS // 2
    calls = [review_call(world, new_key()) for _ in range(half)]
    calls += [retry_call(world, new_key(), task="needs_review", revision="4") for _ in range(half)]

    answers = race_in_process(calls)

    reviews = Counter(map(outcome_of, answers[:half]))
    retries = Counter(map(outcome_of, answers[half:]))
    assert reviews == {(200, None): 1, (409, "STATE_CONFLICT"): half - 1}
    assert set(retries) <= {(201, None), (409, "STATE_CONFLICT")}
    assert retries[(201, None)] <= 1
    assert Task.objects.filter(retry_of=task_id).count() == retries[(201, None)]


def _task_json(receipt: services.Receipt) -> str:
    """The receipt's task as JSON text: a dict on the first write, stored raw JSON on replay."""
    return dumps(receipt.data["task"])
