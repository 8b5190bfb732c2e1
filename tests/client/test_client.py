"""The typed client ``orbit_console.client`` against the embedded recovery API over real HTTP,
and against small local servers that misbehave on purpose (refused connections, silence, 5xx).

The client is asynchronous; each test drives it with ``asyncio.run``. Rule IDs: C1-C9 (common
rules), RV (review), RT (retry), AU (audit), E (errors), I8 (exact numbers).
"""

import asyncio
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from django.conf import settings
from prometheus_client import Counter

from orbit_console.client import (
    Attempt,
    Operation,
    OperationDetail,
    OrbitClient,
    OrbitError,
    OutcomeUnknown,
    Page,
    RetryReceipt,
    RetryTaskRequest,
    ReviewReceipt,
    ReviewTaskRequest,
    Task,
    TaskSummary,
)
from orbit_console.client.errors import MALFORMED, MISMATCHED, TOO_LARGE, BadAnswer
from orbit_console.ledger.models import Attempt as AttemptRow
from orbit_console.ledger.models import AttemptOutcome, OperationAudit
from orbit_console.ledger.models import Task as TaskRow
from orbit_console.lib.ids import new_id
from orbit_console.lib.strictjson import RawJSON
from orbit_console.ops.metrics import API_CALLS
from orbit_console.people.person import token_client
from tests.support.hostile import (
    Answer,
    HostileOrbit,
    hostile_orbit,
    operation,
    operation_path,
)
from tests.support.hostile import task as hostile_task
from tests.support.servers import DaphneServer, free_port

REQUEST_ID = re.compile(r"[0-9a-f]{32}")
SEQUENCE = 9007199254740993  # 2**53 + 1: a float would turn it into ...992 (I8)
PAYLOAD = {"object_ref": "objects/input", "sequence": SEQUENCE}
REASON = "Checked the object store: the write never happened"
EVIDENCE = "evidence:reconciliation-001"


# --- Helpers ----------------------------------------------------------------------------------


def run[T](scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


def call[T](
    base_url: str, token: str, action: Callable[[OrbitClient], Awaitable[T]], **kw: Any
) -> T:
    """One client, one action, closed afterwards."""

    async def scenario() -> T:
        async with OrbitClient(base_url, token, **kw) as orbit:
            return await action(orbit)

    return run(scenario)


def fails(base_url: str, token: str, action: Callable[[OrbitClient], Awaitable[Any]]) -> OrbitError:
    with pytest.raises(OrbitError) as caught:
        call(base_url, token, action)
    error = caught.value
    assert REQUEST_ID.fullmatch(error.request_id or ""), error
    assert error.message, error
    return error


def review_request(revision: str = "3", **overrides: Any) -> ReviewTaskRequest:
    fields: dict[str, Any] = {
        "expected_revision": revision,
        "reason": REASON,
        "evidence_ref": EVIDENCE,
        "outcome": "SUCCEEDED",
        "result": {"amount": Decimal("0.10"), "sequence": SEQUENCE},
    }
    fields.update(overrides)
    return ReviewTaskRequest(**fields)


def retry_request(revision: str = "3", **overrides: Any) -> RetryTaskRequest:
    fields: dict[str, Any] = {
        "expected_revision": revision,
        "reason": "The earlier execution has ended; running it again is safe",
        "evidence_ref": "evidence:safe-retry-001",
        "task_timeout_ms": 60_000,
    }
    fields.update(overrides)
    return RetryTaskRequest(**fields)


def key() -> str:
    return "client-" + new_id()


async def walk[Item](
    fetch: Callable[[str | None], Awaitable[Page[Item]]], *, page_size: int
) -> tuple[list[Item], int]:
    """All items of a list following ``next_cursor``; every page but the last is full."""
    items: list[Item] = []
    cursor: str | None = None
    for pages in range(1, 1000):
        page = await fetch(cursor)
        items += page.items
        if page.next_cursor is None:
            return items, pages
        assert len(page.items) == page_size
        cursor = page.next_cursor
    raise AssertionError("the pages never ended")


@pytest.fixture
def url(orbit_server: DaphneServer) -> str:
    return orbit_server.url


def admin(world: dict[str, Any]) -> str:
    token: str = world["tokens"]["admin"]
    return token


# --- Local fake servers -----------------------------------------------------------------------


class Recorded:
    def __init__(self, method: str, path: str, headers: httpx.Headers, body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body


class RecordingServer:
    """A tiny HTTP server in a thread: records every request and answers a fixed response."""

    def __init__(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.requests: list[Recorded] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                content = self.rfile.read(length) if length else b""
                recorder.requests.append(
                    Recorded(
                        self.command, self.path, httpx.Headers(list(self.headers.items())), content
                    )
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class SilentServer:
    """Accepts connections, reads each request, and never answers (until closed)."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.received: list[bytes] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                if self.stopping.is_set():
                    return  # nothing left in the backlog
                continue
            self.connections.append(connection)
            self.received.append(self._read_request(connection))

    @staticmethod
    def _read_request(connection: socket.socket) -> bytes:
        connection.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return data
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            match = re.search(rb"(?i)content-length:\s*(\d+)", head)
            length = int(match.group(1)) if match else 0
            while len(body) < length:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                body += chunk
            return head + b"\r\n\r\n" + body
        except TimeoutError:
            return data

    def request_count(self) -> int:
        return sum(
            len(re.findall(rb"(?m)^[A-Z]+ \S+ HTTP/1\.[01]\r$", raw)) for raw in self.received
        )

    def close(self) -> None:
        """Stops after draining the backlog, so that every connection the client made counts."""
        self.stopping.set()
        self.thread.join(timeout=10)
        for connection in self.connections:
            connection.close()
        self.listener.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def unavailable_envelope(request_id: str) -> bytes:
    error = {"code": "UNAVAILABLE", "message": "the database is unreachable"}
    return json.dumps({"request_id": request_id, "error": error}).encode()


def receipt_envelope(task_id: str) -> bytes:
    data = {
        "task": {"id": task_id, "state": "SUCCEEDED", "revision": "4"},
        "audit_id": "a" * 32,
        "deduplicated": False,
    }
    return json.dumps({"request_id": "b" * 32, "data": data}).encode()


# --- Reads (O1, AU) ---------------------------------------------------------------------------


def test_get_task_returns_typed_task_with_exact_payload_I8(url: str, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]

    task = call(url, admin(world), lambda orbit: orbit.get_task(task_id))

    assert isinstance(task, Task)
    assert task.id == task_id
    assert task.namespace_id == world["namespace_id"]
    assert task.queue_id == world["queue_id"]
    assert (task.state, task.revision) == ("NEEDS_REVIEW", "3")
    assert task.handler == "object.prepare"
    assert task.business_key == "object:needs-review"
    assert task.payload == PAYLOAD
    sequence = task.payload["sequence"]
    assert type(sequence) is int
    assert sequence == 9007199254740993
    assert task.retry is not None
    assert task.retry.max_attempts == 1
    assert task.retry.attempt_timeout_ms == 10_000
    assert task.attempt_count == 1
    assert task.has_result is False
    assert task.result is None
    assert task.effect_uncertain is True
    assert task.owner_kind == "NONE"
    assert (task.leased, task.active_attempt, task.unreleased_permit, task.gated) == (
        False,
        False,
        False,
        False,
    )
    assert task.retry_of is None
    assert task.retry_successor_id is None
    assert task.created_at is not None
    assert task.created_at.tzinfo is not None
    assert task.updated_at is not None
    assert task.completed_at is None
    assert task.is_terminal is False


def test_get_task_reports_result_lease_and_owner_of_seeded_tasks(
    url: str, world: dict[str, Any]
) -> None:
    tasks = world["tasks"]

    async def scenario() -> tuple[Task, Task, Task]:
        async with OrbitClient(url, admin(world)) as orbit:
            return (
                await orbit.get_task(tasks["succeeded"]),
                await orbit.get_task(tasks["needs_review_leased"]),
                await orbit.get_task(tasks["needs_review_workflow"]),
            )

    succeeded, leased, workflow = run(scenario)

    assert succeeded.state == "SUCCEEDED"
    assert succeeded.is_terminal is True
    assert succeeded.has_result is True
    assert succeeded.result == {"object_ref": "objects/output"}
    assert succeeded.completed_at is not None
    assert leased.leased is True
    assert leased.active_attempt is True
    assert leased.lease_expires_at is not None
    assert workflow.owner_kind == "WORKFLOW"


def test_list_tasks_returns_summaries_filtered_by_state(url: str, world: dict[str, Any]) -> None:
    tasks = world["tasks"]

    async def scenario() -> tuple[Page[TaskSummary], Page[TaskSummary]]:
        async with OrbitClient(url, admin(world)) as orbit:
            return (
                await orbit.list_tasks(states=("NEEDS_REVIEW",), limit=100),
                await orbit.list_tasks(states=("FAILED", "CANCELLED"), limit=100),
            )

    review_page, ended_page = run(scenario)

    assert all(isinstance(item, TaskSummary) for item in review_page.items)
    assert {item.id for item in review_page.items} == {
        tasks["needs_review"],
        tasks["needs_review_2"],
        tasks["needs_review_leased"],
        tasks["needs_review_workflow"],
    }
    assert {item.state for item in review_page.items} == {"NEEDS_REVIEW"}
    assert {item.revision for item in review_page.items} == {"3"}
    assert review_page.next_cursor is None
    assert {item.id for item in ended_page.items} == {
        tasks["failed"],
        tasks["failed_uncertain"],
        tasks["cancelled"],
        tasks["queue_full_failed"],
    }
    by_id = {item.id: item for item in ended_page.items}
    failed = by_id[tasks["failed"]]
    assert (failed.state, failed.revision, failed.handler) == ("FAILED", "3", "object.prepare")
    assert failed.business_key == "object:failed"
    assert failed.attempt_count == 1
    assert failed.effect_uncertain is False
    assert by_id[tasks["failed_uncertain"]].effect_uncertain is True
    assert by_id[tasks["cancelled"]].state == "CANCELLED"
    assert by_id[tasks["cancelled"]].revision == "2"


def test_list_tasks_filters_by_queue_handler_and_business_key(
    url: str, world: dict[str, Any]
) -> None:
    tasks = world["tasks"]

    async def scenario() -> dict[str, Page[TaskSummary]]:
        async with OrbitClient(url, admin(world)) as orbit:
            full_queue = (await orbit.get_task(tasks["queue_full_failed"])).queue_id
            return {
                "queue": await orbit.list_tasks(queue_id=world["queue_id"], limit=100),
                "full_queue": await orbit.list_tasks(queue_id=full_queue, limit=100),
                "key": await orbit.list_tasks(business_key="object:failed"),
                "handler": await orbit.list_tasks(handler="object.prepare", limit=100),
                "no_handler": await orbit.list_tasks(handler="invoice.send"),
            }

    pages = run(scenario)

    in_queue = {item.id for item in pages["queue"].items}
    assert in_queue == set(tasks.values()) - {tasks["queue_full_failed"]}
    assert {item.queue_id for item in pages["queue"].items} == {world["queue_id"]}
    full_queue_ids = {item.id for item in pages["full_queue"].items}
    assert tasks["queue_full_failed"] in full_queue_ids
    assert len(full_queue_ids) == 3  # the failed task and the two fillers
    assert [item.id for item in pages["key"].items] == [tasks["failed"]]
    assert len(pages["handler"].items) == 11
    assert pages["no_handler"].items == []
    assert pages["no_handler"].next_cursor is None


def test_list_tasks_pages_with_next_cursor(url: str, world: dict[str, Any], live_db: None) -> None:
    expected = set(
        TaskRow.objects.filter(namespace_id=world["namespace_id"]).values_list("id", flat=True)
    )

    async def scenario() -> tuple[list[TaskSummary], int, list[TaskSummary], int]:
        async with OrbitClient(url, admin(world)) as orbit:
            everything, pages = await walk(
                lambda cursor: orbit.list_tasks(limit=4, cursor=cursor), page_size=4
            )
            parked, parked_pages = await walk(
                lambda cursor: orbit.list_tasks(states=("NEEDS_REVIEW",), limit=3, cursor=cursor),
                page_size=3,
            )
            return everything, pages, parked, parked_pages

    everything, pages, parked, parked_pages = run(scenario)

    ids = [item.id for item in everything]
    assert len(ids) == len(set(ids)) == len(expected) == 11
    assert set(ids) == expected
    assert pages == 3
    created = [item.created_at for item in everything if item.created_at is not None]
    assert len(created) == 11
    assert created == sorted(created, reverse=True)
    assert {item.state for item in parked} == {"NEEDS_REVIEW"}
    assert len(parked) == 4
    assert parked_pages == 2


def test_list_tasks_sends_the_selection_filters(
    url: str, world: dict[str, Any], live_db: None
) -> None:
    """business_key_prefix, error and the updated_at window reach the API as it takes them:
    times in UTC (RFC 3339, Z) whatever zone the caller's datetime is in."""
    tasks = world["tasks"]
    at = datetime(2025, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
    TaskRow.objects.filter(id=tasks["failed"]).update(updated_at=at)
    TaskRow.objects.filter(id=tasks["failed_uncertain"]).update(updated_at=at + timedelta(hours=1))
    paris = timezone(timedelta(hours=1))  # 13:00:00.25 in Paris is 12:00:00.25 UTC

    async def scenario() -> dict[str, Page[TaskSummary]]:
        async with OrbitClient(url, admin(world)) as orbit:
            return {
                "prefix": await orbit.list_tasks(business_key_prefix="object:failed"),
                "error": await orbit.list_tasks(error="TIMEOUT", limit=100),
                "window": await orbit.list_tasks(
                    updated_after=at.astimezone(paris),
                    updated_before=(at + timedelta(microseconds=1)).astimezone(paris),
                ),
                "after": await orbit.list_tasks(
                    updated_after=at + timedelta(microseconds=1), states=("FAILED",)
                ),
                "all": await orbit.list_tasks(
                    business_key_prefix="object:",
                    error="time",
                    updated_after=datetime(2000, 1, 1, tzinfo=UTC),
                    updated_before=datetime(9998, 1, 1, tzinfo=UTC),
                    states=("NEEDS_REVIEW",),
                    queue_id=world["queue_id"],
                    limit=1,
                ),
            }

    pages = run(scenario)

    assert {item.id for item in pages["prefix"].items} == {
        tasks["failed"],
        tasks["failed_uncertain"],
    }
    assert {item.id for item in pages["error"].items} == {
        tasks["needs_review_2"],
        tasks["needs_review_workflow"],
    }
    assert [item.id for item in pages["window"].items] == [tasks["failed"]]
    assert {item.id for item in pages["after"].items} == {
        tasks["failed_uncertain"],
        tasks["queue_full_failed"],
    }
    assert len(pages["all"].items) == 1
    assert pages["all"].next_cursor is not None


def test_list_tasks_filters_page_with_their_cursor(
    url: str, world: dict[str, Any], live_db: None
) -> None:
    filters: dict[str, Any] = {
        "business_key_prefix": "object:needs-review",
        "updated_after": datetime(2000, 1, 1, tzinfo=UTC),
    }

    async def scenario() -> tuple[list[TaskSummary], int, OrbitError]:
        async with OrbitClient(url, admin(world)) as orbit:
            items, pages = await walk(
                lambda cursor: orbit.list_tasks(limit=1, cursor=cursor, **filters), page_size=1
            )
            first = await orbit.list_tasks(limit=1, **filters)
            with pytest.raises(OrbitError) as caught:
                await orbit.list_tasks(limit=1, cursor=first.next_cursor, error="timeout")
            return items, pages, caught.value

    items, pages, error = run(scenario)

    assert pages == 4
    assert {item.id for item in items} == {
        world["tasks"][name]
        for name in (
            "needs_review",
            "needs_review_2",
            "needs_review_leased",
            "needs_review_workflow",
        )
    }
    assert (error.status, error.code, error.field) == (400, "INVALID_ARGUMENT", "cursor")


def test_list_tasks_filter_refusals_name_the_field(url: str, world: dict[str, Any]) -> None:
    both = fails(
        url,
        admin(world),
        lambda orbit: orbit.list_tasks(business_key="object:failed", business_key_prefix="o"),
    )
    assert (both.status, both.code, both.field) == (400, "INVALID_ARGUMENT", "business_key_prefix")
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    reversed_window = fails(
        url,
        admin(world),
        lambda orbit: orbit.list_tasks(updated_after=moment, updated_before=moment),
    )
    assert (reversed_window.status, reversed_window.field) == (400, "updated_after")
    too_long = fails(url, admin(world), lambda orbit: orbit.list_tasks(error="e" * 201))
    assert (too_long.status, too_long.field) == (400, "error")


def test_list_tasks_refuses_a_naive_filter_time(url: str, world: dict[str, Any]) -> None:
    """A naive datetime would be read in the process's local zone: refused before sending."""
    with pytest.raises(ValueError, match="timezone-aware"):
        call(url, admin(world), lambda orbit: orbit.list_tasks(updated_after=datetime(2026, 1, 1)))  # noqa: DTZ001


def test_list_attempts_returns_attempts_with_late_reports(url: str, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]

    page = call(url, admin(world), lambda orbit: orbit.list_attempts(task_id))

    assert page.next_cursor is None
    [attempt] = page.items
    assert isinstance(attempt, Attempt)
    assert attempt.number == 1
    assert attempt.worker_id == "worker-1"
    assert attempt.outcome == "UNKNOWN"
    assert attempt.error == "connection reset"
    assert attempt.started_at is not None
    assert attempt.ended_at is not None
    [late] = attempt.late_reports
    assert late.outcome == "FAILED"
    assert late.detail == "late report: the object store answered 503 after the lease ended"
    assert late.received_at is not None


def test_list_attempts_pages_newest_first(url: str, world: dict[str, Any], live_db: None) -> None:
    """A task that ran three times (as under a retry policy): limit=1 gives three pages."""
    task_id = world["tasks"]["failed"]
    first = AttemptRow.objects.get(task_id=task_id)
    for number in (2, 3):
        AttemptRow.objects.create(
            task_id=task_id,
            number=number,
            worker_id=f"worker-{number}",
            started_at=first.started_at,
            ended_at=first.ended_at,
            outcome=AttemptOutcome.FAILED,
            error=f"failure {number}",
        )

    async def scenario() -> tuple[list[Attempt], int, Page[Attempt]]:
        async with OrbitClient(url, admin(world)) as orbit:
            paged, pages = await walk(
                lambda cursor: orbit.list_attempts(task_id, limit=1, cursor=cursor), page_size=1
            )
            return paged, pages, await orbit.list_attempts(task_id, limit=2)

    paged, pages, first_page = run(scenario)

    assert pages == 3
    assert [(a.number, a.worker_id, a.error) for a in paged] == [
        (3, "worker-3", "failure 3"),
        (2, "worker-2", "failure 2"),
        (1, "worker-1", "object not found"),
    ]
    assert [a.number for a in first_page.items] == [3, 2]
    assert first_page.next_cursor is not None


def test_list_task_operations_pages_newest_first_AU3_AU4(
    url: str, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]

    async def scenario() -> tuple[ReviewReceipt, list[Operation], int, Page[Operation]]:
        async with OrbitClient(url, admin(world)) as orbit:
            receipt = await orbit.review_task(task_id, idempotency_key=key(), body=review_request())
            paged, pages = await walk(
                lambda cursor: orbit.list_task_operations(task_id, limit=1, cursor=cursor),
                page_size=1,
            )
            whole = await orbit.list_task_operations(task_id, limit=100)
            return receipt, paged, pages, whole

    receipt, paged, pages, whole = run(scenario)

    stored = OperationAudit.objects.filter(task_id=task_id)
    assert {op.id for op in paged} == set(stored.values_list("id", flat=True))
    assert [op.id for op in paged] == [op.id for op in whole.items]
    assert whole.next_cursor is None
    assert pages == len(paged) == 3
    assert all(isinstance(op, Operation) for op in paged)
    assert paged[0].id == receipt.audit_id
    assert paged[0].action == "task.review"
    assert {op.action for op in paged} == {"task.review", "task.execution_result", "task.accepted"}
    assert {op.task_id for op in paged} == {task_id}
    assert [op.created_at for op in paged] == sorted((op.created_at for op in paged), reverse=True)
    assert all(op.created_at.tzinfo is not None for op in paged)


def test_get_task_operation_returns_detail_of_a_review_AU5_RV7(
    url: str, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    request = review_request(outcome="FAILED")

    async def scenario() -> tuple[ReviewReceipt, OperationDetail]:
        async with OrbitClient(url, admin(world)) as orbit:
            receipt = await orbit.review_task(task_id, idempotency_key=key(), body=request)
            return receipt, await orbit.get_task_operation(task_id, receipt.audit_id)

    receipt, detail = run(scenario)

    assert isinstance(detail, OperationDetail)
    assert detail.id == receipt.audit_id
    assert detail.task_id == task_id
    assert detail.action == "task.review"
    assert REQUEST_ID.fullmatch(detail.operation_id)
    assert REQUEST_ID.fullmatch(detail.actor_id)
    assert detail.reason == REASON
    assert detail.evidence_ref == EVIDENCE
    assert detail.before["state"] == "NEEDS_REVIEW"
    assert detail.before["revision"] == "3"
    result_text = '{"amount":0.10,"sequence":9007199254740993}'
    assert detail.after == {
        "state": "FAILED",
        "revision": "4",
        "effect_uncertain": False,
        "execution_settled": True,
        "result_digest": "sha256:" + hashlib.sha256(result_text.encode()).hexdigest(),
    }


# --- Review (RV, C7, I8) ----------------------------------------------------------------------


def test_review_with_typed_request_keeps_exact_result_RV3_RV4_I8(
    url: str, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]

    async def scenario() -> tuple[ReviewReceipt, Task]:
        async with OrbitClient(url, admin(world)) as orbit:
            receipt = await orbit.review_task(task_id, idempotency_key=key(), body=review_request())
            return receipt, await orbit.get_task(task_id)

    receipt, current = run(scenario)

    assert isinstance(receipt, ReviewReceipt)
    assert receipt.deduplicated is False
    assert REQUEST_ID.fullmatch(receipt.audit_id)
    assert REQUEST_ID.fullmatch(receipt.request_id or "")
    for task in (receipt.task, current):
        assert task.id == task_id
        assert (task.state, task.revision) == ("SUCCEEDED", "4")
        assert task.effect_uncertain is False
        assert task.completed_at is not None
        amount = task.result["amount"]
        assert isinstance(amount, Decimal)
        assert amount == Decimal("0.10")
        assert str(amount) == "0.10"
        assert type(task.result["sequence"]) is int
        assert task.result["sequence"] == 9007199254740993
        assert task.payload["sequence"] == 9007199254740993


def test_review_with_raw_json_text_body_RV3_I8(url: str, world: dict[str, Any]) -> None:
    """A body given as text (a resend of stored JSON, C9) is sent as is and accepted."""
    task_id = world["tasks"]["needs_review_2"]
    body = (
        '{\n  "expected_revision": "3",\n  "reason": "Checked the store",\n'
        '  "evidence_ref": "evidence:raw-1",\n  "execution_settled": true,\n'
        '  "outcome": "FAILED",\n  "result": {"amount": 0.10, "sequence": 9007199254740993}\n}'
    )

    async def scenario() -> tuple[ReviewReceipt, OperationDetail]:
        async with OrbitClient(url, admin(world)) as orbit:
            receipt = await orbit.review_task(task_id, idempotency_key=key(), body=body)
            return receipt, await orbit.get_task_operation(task_id, receipt.audit_id)

    receipt, detail = run(scenario)

    assert receipt.deduplicated is False
    assert (receipt.task.state, receipt.task.revision) == ("FAILED", "4")
    assert receipt.task.result == {"amount": Decimal("0.10"), "sequence": SEQUENCE}
    assert str(receipt.task.result["amount"]) == "0.10"
    assert detail.reason == "Checked the store"
    assert detail.evidence_ref == "evidence:raw-1"


def test_review_replay_with_same_key_is_deduplicated_C7_RV4(
    url: str, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    same_key = key()
    request = review_request()

    async def scenario() -> tuple[ReviewReceipt, ReviewReceipt, ReviewReceipt]:
        async with OrbitClient(url, admin(world)) as orbit:
            first = await orbit.review_task(task_id, idempotency_key=same_key, body=request)
            replay = await orbit.review_task(task_id, idempotency_key=same_key, body=request)
            # the same decision as raw text, other spelling of the same JSON value (O4)
            text_replay = await orbit.review_task(
                task_id, idempotency_key=same_key, body=request.to_json(indent=2)
            )
            return first, replay, text_replay

    first, replay, text_replay = run(scenario)

    assert first.deduplicated is False
    for again in (replay, text_replay):
        assert again.deduplicated is True
        assert again.audit_id == first.audit_id
        assert again.task.revision == "4"
        assert again.request_id != first.request_id
    operations = call(url, admin(world), lambda orbit: orbit.list_task_operations(task_id))
    assert [op.action for op in operations.items].count("task.review") == 1


# --- Retry (RT) -------------------------------------------------------------------------------


def test_retry_created_then_replayed_RT4_RT5(url: str, world: dict[str, Any]) -> None:
    source = world["tasks"]["failed"]
    same_key = key()
    request = retry_request()

    async def scenario() -> tuple[RetryReceipt, RetryReceipt, Task]:
        async with OrbitClient(url, admin(world)) as orbit:
            first = await orbit.retry_task(source, idempotency_key=same_key, body=request)
            replay = await orbit.retry_task(source, idempotency_key=same_key, body=request)
            return first, replay, await orbit.get_task(source)

    first, replay, source_now = run(scenario)

    assert isinstance(first, RetryReceipt)
    assert first.created is True  # 201
    assert first.deduplicated is False
    assert first.source_task_id == source
    child = first.task
    assert child.id != source
    assert child.retry_of == source
    assert (child.state, child.revision, child.attempt_count) == ("WAITING", "1", 0)
    assert child.payload == PAYLOAD
    assert type(child.payload["sequence"]) is int
    assert child.business_key == "object:failed"
    assert replay.created is False  # 200
    assert replay.deduplicated is True
    assert replay.audit_id == first.audit_id
    assert replay.task.id == child.id
    assert (source_now.state, source_now.revision) == ("FAILED", "3")
    assert source_now.retry_successor_id == child.id


def test_retry_sends_times_as_utc_and_server_keeps_them_RT2_RT3(
    url: str, world: dict[str, Any]
) -> None:
    source = world["tasks"]["cancelled"]
    plus_eight = timezone(timedelta(hours=8))
    start = datetime.now(UTC).replace(microsecond=250_000) + timedelta(hours=1)
    deadline = start + timedelta(hours=1)
    request = retry_request(
        "2",
        task_timeout_ms=3 * 3_600_000,
        available_at=start.astimezone(plus_eight),
        start_deadline_at=deadline,
    )

    receipt = call(
        url,
        admin(world),
        lambda orbit: orbit.retry_task(source, idempotency_key=key(), body=request),
    )

    assert receipt.created is True
    assert receipt.task.available_at == start
    assert receipt.task.start_deadline_at == deadline


# --- Errors (E) -------------------------------------------------------------------------------


def test_invalid_argument_keeps_status_code_field_and_request_id_C6_E(
    url: str, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    blank = review_request(reason="   ")

    error = fails(
        url,
        admin(world),
        lambda orbit: orbit.review_task(task_id, idempotency_key=key(), body=blank),
    )

    assert (error.status, error.code, error.field) == (400, "INVALID_ARGUMENT", "reason")
    assert error.retry_after_ms is None
    current = call(url, admin(world), lambda orbit: orbit.get_task(task_id))
    assert current.revision == "3"


def test_bad_cursor_is_invalid_argument_on_cursor_AU2(url: str, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]

    error = fails(
        url,
        admin(world),
        lambda orbit: orbit.list_task_operations(task_id, cursor="not-a-cursor"),
    )

    assert (error.status, error.code, error.field) == (400, "INVALID_ARGUMENT", "cursor")


def test_unknown_token_is_unauthenticated_C1(url: str, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]

    error = fails(url, "not-a-real-token", lambda orbit: orbit.get_task(task_id))

    assert (error.status, error.code) == (401, "UNAUTHENTICATED")


def test_missing_permission_is_permission_denied_C3(url: str, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]
    reader = world["tokens"]["reader"]

    review_error = fails(
        url,
        reader,
        lambda orbit: orbit.review_task(task_id, idempotency_key=key(), body=review_request()),
    )
    audit_error = fails(url, reader, lambda orbit: orbit.list_task_operations(task_id))

    assert (review_error.status, review_error.code) == (403, "PERMISSION_DENIED")
    assert (audit_error.status, audit_error.code) == (403, "PERMISSION_DENIED")


def test_task_or_operation_out_of_scope_is_not_found_C4_AU5(
    url: str, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]

    foreign = fails(url, world["tokens"]["other_namespace"], lambda orbit: orbit.get_task(task_id))
    missing = fails(url, admin(world), lambda orbit: orbit.get_task_operation(task_id, new_id()))

    assert (foreign.status, foreign.code) == (404, "NOT_FOUND")
    assert (missing.status, missing.code) == (404, "NOT_FOUND")


def test_same_key_different_body_is_idempotency_conflict_C7(
    url: str, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    same_key = key()
    call(
        url,
        admin(world),
        lambda orbit: orbit.review_task(task_id, idempotency_key=same_key, body=review_request()),
    )
    changed = review_request(reason="A different reason")

    error = fails(
        url,
        admin(world),
        lambda orbit: orbit.review_task(task_id, idempotency_key=same_key, body=changed),
    )

    assert (error.status, error.code) == (409, "IDEMPOTENCY_CONFLICT")


def test_stale_revision_and_wrong_state_are_state_conflict_RV1_RT1(
    url: str, world: dict[str, Any]
) -> None:
    tasks = world["tasks"]

    stale = fails(
        url,
        admin(world),
        lambda orbit: orbit.review_task(
            tasks["needs_review"], idempotency_key=key(), body=review_request("2")
        ),
    )
    wrong_state = fails(
        url,
        admin(world),
        lambda orbit: orbit.retry_task(
            tasks["needs_review_2"], idempotency_key=key(), body=retry_request()
        ),
    )

    assert (stale.status, stale.code) == (409, "STATE_CONFLICT")
    assert (wrong_state.status, wrong_state.code) == (409, "STATE_CONFLICT")


def test_full_queue_is_queue_full_with_retry_after_RT7(url: str, world: dict[str, Any]) -> None:
    source = world["tasks"]["queue_full_failed"]

    error = fails(
        url,
        admin(world),
        lambda orbit: orbit.retry_task(source, idempotency_key=key(), body=retry_request()),
    )

    assert (error.status, error.code) == (429, "QUEUE_FULL")
    assert error.retry_after_ms == settings.ORBIT_RETRY_AFTER_MS
    assert isinstance(error.retry_after_ms, int)
    assert error.retry_after_ms > 0


# --- Unknown outcomes (C9) --------------------------------------------------------------------


def test_connection_refused_is_outcome_unknown_C9() -> None:
    port = free_port()  # bound and released: nothing listens there

    with pytest.raises(OutcomeUnknown) as caught:
        call(
            f"http://127.0.0.1:{port}",
            "token",
            lambda orbit: orbit.review_task(new_id(), idempotency_key="k-1", body=review_request()),
        )

    assert caught.value.status is None
    assert caught.value.code is None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_silent_server_is_outcome_unknown_after_explicit_timeout_without_retry_C9(
    silent_server: SilentServer,
) -> None:
    timeout = httpx.Timeout(0.5)

    with pytest.raises(OutcomeUnknown) as caught:
        call(
            silent_server.url,
            "token",
            lambda orbit: orbit.review_task(
                new_id(), idempotency_key="k-timeout", body=review_request()
            ),
            timeout=timeout,
        )
    with pytest.raises(OutcomeUnknown):
        call(silent_server.url, "token", lambda orbit: orbit.get_task(new_id()), timeout=timeout)
    silent_server.close()

    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert caught.value.status is None
    assert len(silent_server.connections) == 2  # one per call
    assert silent_server.request_count() == 2
    assert b"Idempotency-Key: k-timeout" in silent_server.received[0]


def test_503_envelope_is_outcome_unknown_sent_once_C9_E() -> None:
    request_id = "c" * 32
    server = RecordingServer(503, unavailable_envelope(request_id))
    try:
        with pytest.raises(OutcomeUnknown) as caught:
            call(
                server.url,
                "token",
                lambda orbit: orbit.retry_task(
                    new_id(), idempotency_key="k-503", body=retry_request()
                ),
            )
        with pytest.raises(OutcomeUnknown) as read_caught:
            call(server.url, "token", lambda orbit: orbit.list_tasks())
    finally:
        server.close()

    error = caught.value
    assert (error.status, error.code, error.request_id) == (503, "UNAVAILABLE", request_id)
    assert read_caught.value.status == 503
    assert [(r.method, r.headers.get("Idempotency-Key")) for r in server.requests] == [
        ("POST", "k-503"),
        ("GET", None),
    ]


def test_500_without_json_is_outcome_unknown_C9() -> None:
    server = RecordingServer(500, b"<h1>Server Error</h1>", content_type="text/html")
    try:
        with pytest.raises(OutcomeUnknown) as caught:
            call(
                server.url,
                "token",
                lambda orbit: orbit.review_task(
                    new_id(), idempotency_key="k-500", body=review_request()
                ),
            )
    finally:
        server.close()

    assert (caught.value.status, caught.value.code, caught.value.request_id) == (500, None, None)
    assert len(server.requests) == 1


# --- What the client sends (C2, C9, I1) -------------------------------------------------------


def test_empty_idempotency_key_is_refused_and_nothing_sent_C9_I1() -> None:
    server = RecordingServer(200, receipt_envelope(new_id()))
    try:
        with pytest.raises(ValueError, match="idempotency key"):
            call(
                server.url,
                "token",
                lambda orbit: orbit.review_task(
                    new_id(), idempotency_key="", body=review_request()
                ),
            )
        with pytest.raises(ValueError, match="idempotency key"):
            call(
                server.url,
                "token",
                lambda orbit: orbit.retry_task(new_id(), idempotency_key="", body=retry_request()),
            )
    finally:
        server.close()

    assert server.requests == []


def test_write_sends_bearer_json_and_the_given_key_exactly_C1_C2() -> None:
    task_id = new_id()
    given_key = "Key:Mixed/Case_~!#42"
    request = review_request()
    raw = '{ "expected_revision" : "3",\n "outcome": "FAILED", "result": {"amount": 0.10} }'
    server = RecordingServer(200, receipt_envelope(task_id))
    try:

        async def scenario() -> ReviewReceipt:
            async with OrbitClient(server.url + "/", "secret-token-1") as orbit:
                await orbit.review_task(task_id, idempotency_key=given_key, body=request)
                return await orbit.review_task(task_id, idempotency_key="k-raw", body=raw)

        receipt = run(scenario)
    finally:
        server.close()

    assert receipt.task.id == task_id
    assert receipt.audit_id == "a" * 32
    assert receipt.request_id == "b" * 32
    typed, text = server.requests
    assert (typed.method, typed.path) == ("POST", f"/v1/tasks/{task_id}:review")
    assert typed.headers["Authorization"] == "Bearer secret-token-1"
    assert typed.headers["Content-Type"] == "application/json"
    assert typed.headers["Idempotency-Key"] == given_key
    assert typed.body == request.to_json().encode()
    assert text.headers["Idempotency-Key"] == "k-raw"
    assert text.body == raw.encode()  # byte for byte, whitespace kept


def test_read_sends_bearer_and_query_without_write_headers_C2() -> None:
    task_id = new_id()
    server = RecordingServer(
        200, json.dumps({"request_id": "d" * 32, "data": {"items": []}}).encode()
    )
    try:

        async def scenario() -> None:
            async with OrbitClient(server.url, "secret-token-2") as orbit:
                await orbit.list_tasks(
                    states=("NEEDS_REVIEW", "FAILED"), business_key="object:a b", limit=5
                )
                await orbit.list_task_operations(task_id, limit=2, cursor="abc")

        run(scenario)
    finally:
        server.close()

    tasks, operations = server.requests
    assert tasks.method == "GET"
    path, _, query = tasks.path.partition("?")
    assert path == "/v1/tasks"
    assert parse_qsl(query, strict_parsing=True) == [
        ("state", "NEEDS_REVIEW,FAILED"),
        ("business_key", "object:a b"),
        ("limit", "5"),
    ]
    assert operations.path == f"/v1/tasks/{task_id}/operations?limit=2&cursor=abc"
    for recorded in (tasks, operations):
        assert recorded.headers["Authorization"] == "Bearer secret-token-2"
        assert "Idempotency-Key" not in recorded.headers
        assert "Content-Type" not in recorded.headers
        assert recorded.body == b""


# --- Request bodies (RV3, RT2, RT3) -----------------------------------------------------------


def test_review_request_to_json_is_exact_RV3_I8() -> None:
    request = ReviewTaskRequest(
        expected_revision="3",
        reason="Vérifié: 已核对",
        evidence_ref="evidence:1",
        outcome="SUCCEEDED",
        result={"amount": Decimal("0.10"), "sequence": SEQUENCE, "ok": True, "none": None},
    )

    assert request.to_json() == (
        '{"expected_revision":"3","reason":"Vérifié: 已核对","evidence_ref":"evidence:1",'
        '"execution_settled":true,"outcome":"SUCCEEDED",'
        '"result":{"amount":0.10,"sequence":9007199254740993,"ok":true,"none":null}}'
    )
    raw = ReviewTaskRequest(
        expected_revision="4",
        reason="r",
        evidence_ref="e",
        outcome="FAILED",
        result=RawJSON('{"amount": 1.50}'),
    )
    assert raw.to_json().endswith('"outcome":"FAILED","result":{"amount": 1.50}}')


def test_retry_request_to_json_omits_unset_times_RT2() -> None:
    request = RetryTaskRequest(
        expected_revision="3", reason="r", evidence_ref="e", task_timeout_ms=60_000
    )

    assert request.to_json() == (
        '{"expected_revision":"3","reason":"r","evidence_ref":"e",'
        '"safe_to_retry":true,"task_timeout_ms":60000}'
    )


def test_retry_request_to_json_writes_times_in_utc_z_RT3() -> None:
    plus_eight = timezone(timedelta(hours=8))
    request = RetryTaskRequest(
        expected_revision="2",
        reason="r",
        evidence_ref="e",
        task_timeout_ms=7_200_000,
        available_at=datetime(2026, 9, 17, 8, 30, 0, 500_000, tzinfo=plus_eight),
        start_deadline_at=datetime(2026, 9, 17, 1, 0, 0, tzinfo=UTC),
    )

    assert request.to_json() == (
        '{"expected_revision":"2","reason":"r","evidence_ref":"e",'
        '"safe_to_retry":true,"task_timeout_ms":7200000,'
        '"available_at":"2026-09-17T00:30:00.5Z","start_deadline_at":"2026-09-17T01:00:00Z"}'
    )
    only_deadline = RetryTaskRequest(
        expected_revision="2",
        reason="r",
        evidence_ref="e",
        task_timeout_ms=7_200_000,
        start_deadline_at=datetime(2026, 9, 17, 1, 0, 0, 123_456, tzinfo=UTC),
    )
    body = json.loads(only_deadline.to_json())
    assert "available_at" not in body
    assert body["start_deadline_at"] == "2026-09-17T01:00:00.123456Z"


# --- A hostile Orbit (issue 29) ---------------------------------------------------------------
#
# A real server on a real port (tests/support/hostile.py) that answers as a broken or malicious
# Orbit would. Memory is never measured: the cap's error is asserted, and how much the server
# got to write before the client hung up.

TASK_ID = "e" * 32
OTHER_TASK_ID = "f" * 32
AUDIT_ID = "a" * 32
NAMESPACE_ID = "9" * 32


@pytest.fixture
def hostile() -> Iterator[HostileOrbit]:
    with hostile_orbit() as orbit:
        yield orbit


def counted(counter: Counter, labels: dict[str, str]) -> float:
    """A counter's value (read from it alone: the registry's other collectors read the
    database)."""
    for metric in counter.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels == labels:
                return sample.value
    return 0.0


def refused_answer(
    orbit: HostileOrbit, action: Callable[[OrbitClient], Awaitable[Any]]
) -> BadAnswer:
    with pytest.raises(BadAnswer) as caught:
        call(orbit.url, "token", action)
    return caught.value


def hung_up(orbit: HostileOrbit, path: str) -> Any:
    """The one answer written to ``path``, once the client has hung up on it."""
    for _ in range(200):
        served = orbit.served_for(path)
        if served and served[0].hung_up:
            return served[0]
        threading.Event().wait(0.05)
    raise AssertionError(f"the client never hung up on {path}: {orbit.served_for(path)}")


def test_an_endless_answer_is_refused_past_the_cap_while_it_comes(hostile: HostileOrbit) -> None:
    """Issue 29: a 200 MB operation answer took the console from 185 MB to 2.65 GB. The body
    is read as it comes and the reading stops past ``max_answer_bytes``: an error of its own
    (``too_large``), an unknown outcome for whoever decides what to do next (C9)."""
    path = operation_path(TASK_ID, AUDIT_ID)
    hostile.answers[path] = Answer.endless()

    with pytest.raises(BadAnswer) as caught:
        call(
            hostile.url,
            "token",
            lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID),
            max_answer_bytes=256 * 1024,
        )

    assert caught.value.kind == TOO_LARGE
    assert isinstance(caught.value, OutcomeUnknown)
    assert "longer than 262144 bytes" in caught.value.reason
    # What the server got to write before the client hung up: the cap and the sockets'
    # buffers, not the endless body (it gives up at 256 MiB).
    assert hung_up(hostile, path).written < 32 * 1024 * 1024


def test_an_answer_declaring_more_than_the_cap_is_refused_unread(
    hostile: HostileOrbit, settings: Any
) -> None:
    """The console's clients (``people.person.token_client``) carry the cap of
    ``ORBIT_API_MAX_ANSWER_BYTES``; an answer that declares more is refused on its headers."""
    settings.ORBIT_API_MAX_ANSWER_BYTES = 64 * 1024
    path = f"/v1/tasks/{TASK_ID}"
    hostile.answers[path] = Answer.declared(200_000_000)

    async def scenario() -> Task:
        async with token_client("token", base_url=hostile.url) as orbit:
            return await orbit.get_task(TASK_ID)

    with pytest.raises(BadAnswer) as caught:
        run(scenario)

    assert caught.value.kind == TOO_LARGE
    assert "declares 200000000 bytes, over 65536" in caught.value.reason
    assert hung_up(hostile, path).written == 1024


def test_a_dripping_answer_ends_at_the_deadline_though_no_read_times_out_C9(
    hostile: HostileOrbit,
) -> None:
    """Issue 29: a server dripping one byte per 5 s held the consumer for minutes, since httpx's
    timeouts are per read. The deadline bounds the whole exchange; what it ends is an unknown
    outcome (C9), not a bad answer: the same read may well be answered next time."""
    path = operation_path(TASK_ID, AUDIT_ID)
    # About 400 bytes, one every 0.5 s: over three minutes for the whole answer, and a read
    # timeout of 2 s never trips.
    hostile.answers[path] = Answer.drip(operation(TASK_ID, AUDIT_ID), every=0.5)
    started = time.monotonic()

    with pytest.raises(OutcomeUnknown) as caught:
        call(
            hostile.url,
            "token",
            lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID),
            timeout=httpx.Timeout(2.0),
            deadline=3.0,
        )

    assert time.monotonic() - started < 30
    assert not isinstance(caught.value, BadAnswer)
    assert caught.value.reason == "no whole answer within 3 s"
    assert not hung_up(hostile, path).finished


def task_without(member: str) -> dict[str, Any]:
    data = hostile_task(TASK_ID, NAMESPACE_ID)
    del data[member]
    return data


@pytest.mark.parametrize(
    ("path", "answer", "action", "reason"),
    [
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(task_without("revision")),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.revision: missing",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(hostile_task(TASK_ID, NAMESPACE_ID, revision=3)),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.revision: not a string",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(hostile_task(TASK_ID, NAMESPACE_ID, revision="03")),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.revision: not a decimal string",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(hostile_task(TASK_ID, NAMESPACE_ID, state="DONE")),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.state: not one of",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(hostile_task(TASK_ID, NAMESPACE_ID, attempt_count="1")),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.attempt_count: not an integer",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(hostile_task(TASK_ID, NAMESPACE_ID, retry={"max_attempts": 3})),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.retry.initial_delay_ms: missing",
        ),
        (
            operation_path(TASK_ID, AUDIT_ID),
            Answer.data({k: v for k, v in operation(TASK_ID, AUDIT_ID).items() if k != "task_id"}),
            lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID),
            "operation.task_id: missing",
        ),
        (
            operation_path(TASK_ID, AUDIT_ID),
            Answer.data(operation(TASK_ID, AUDIT_ID, created_at="yesterday")),
            lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID),
            "operation.created_at: must be an RFC 3339 time",
        ),
        (
            operation_path(TASK_ID, AUDIT_ID),
            Answer.data(operation(TASK_ID, AUDIT_ID, after="SUCCEEDED")),
            lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID),
            "operation.after: not an object",
        ),
        (
            f"/v1/tasks/{TASK_ID}/operations",
            Answer.data({"items": [operation(TASK_ID, AUDIT_ID), {"id": AUDIT_ID}]}),
            lambda orbit: orbit.list_task_operations(TASK_ID),
            "items[1].task_id: missing",
        ),
        (
            "/v1/tasks",
            Answer.data({"items": {"id": TASK_ID}}),
            lambda orbit: orbit.list_tasks(),
            "page.items: not an array",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.data(hostile_task("x" * 5000, NAMESPACE_ID)),
            lambda orbit: orbit.get_task(TASK_ID),
            "task.id: not an id",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.raw(b"<html>Welcome to nginx</html>"),
            lambda orbit: orbit.get_task(TASK_ID),
            "the answer is not a JSON object",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.raw(b"[" * 100_000 + b"]" * 100_000),
            lambda orbit: orbit.get_task(TASK_ID),
            "the answer is not a JSON object",
        ),
        (
            f"/v1/tasks/{TASK_ID}",
            Answer.raw(b'{"request_id": "x", "task": {}}'),
            lambda orbit: orbit.get_task(TASK_ID),
            "the answer has no data",
        ),
    ],
    ids=[
        "missing-revision",
        "numeric-revision",
        "leading-zero-revision",
        "unknown-state",
        "text-count",
        "partial-retry-policy",
        "operation-without-task",
        "operation-bad-time",
        "operation-after-text",
        "page-item-without-task",
        "page-items-object",
        "long-id",
        "html",
        "deep-nesting",
        "no-envelope",
    ],
)
def test_an_answer_that_breaks_the_apis_schema_is_a_bad_answer_not_a_key_error(
    hostile: HostileOrbit,
    path: str,
    answer: Answer,
    action: Callable[[OrbitClient], Awaitable[Any]],
    reason: str,
) -> None:
    """Issue 29: an answer missing a key raised ``KeyError`` out of the client. Every answer is
    read against the API's schema (O1, AU4, AU5, C5)."""
    hostile.answers[path] = answer

    refused = refused_answer(hostile, action)

    assert refused.kind == MALFORMED
    assert refused.reason.startswith(reason), refused.reason
    assert refused.status == 200


def test_an_operation_of_another_task_is_refused_not_published_as_this_ones_AU1_AU5(
    hostile: HostileOrbit,
) -> None:
    """Issue 29: an operation whose ``task_id`` differs from the task asked for was published
    to that other task's timeline. An answer about something else than what was asked is
    refused (``mismatched``): another task, another record, another task's list item."""
    hostile.answers[operation_path(TASK_ID, AUDIT_ID)] = Answer.data(
        operation(OTHER_TASK_ID, AUDIT_ID)
    )
    hostile.answers[operation_path(TASK_ID, "b" * 32)] = Answer.data(operation(TASK_ID, "c" * 32))
    hostile.answers[f"/v1/tasks/{TASK_ID}/operations"] = Answer.data(
        {"items": [operation(TASK_ID, AUDIT_ID), operation(OTHER_TASK_ID, "b" * 32)]}
    )
    hostile.answers[f"/v1/tasks/{TASK_ID}"] = Answer.data(hostile_task(OTHER_TASK_ID, NAMESPACE_ID))
    labels = {"operation": "GetTaskOperation", "outcome": "bad_answer_mismatched"}
    before = counted(API_CALLS, labels)

    reasons = [
        refused_answer(hostile, lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID)),
        refused_answer(hostile, lambda orbit: orbit.get_task_operation(TASK_ID, "b" * 32)),
        refused_answer(hostile, lambda orbit: orbit.list_task_operations(TASK_ID)),
        refused_answer(hostile, lambda orbit: orbit.get_task(TASK_ID)),
    ]

    assert [refused.kind for refused in reasons] == [MISMATCHED] * 4
    assert [refused.reason.split(" is ")[0] for refused in reasons] == [
        "operation.task_id",
        "operation.id",
        "operation.task_id",
        "task.id",
    ]
    assert counted(API_CALLS, labels) == before + 2


def test_a_receipt_for_another_task_is_an_unknown_outcome_to_resend_C9_RV4_RT4(
    hostile: HostileOrbit,
) -> None:
    """A write's answer that is about another task tells nothing of this write, which may have
    been applied: an unknown outcome (the reconciler resends it as it was, C9)."""
    hostile.answers[f"/v1/tasks/{TASK_ID}:review"] = Answer.data(
        {
            "task": hostile_task(OTHER_TASK_ID, NAMESPACE_ID),
            "audit_id": AUDIT_ID,
            "deduplicated": False,
        }
    )
    hostile.answers[f"/v1/tasks/{TASK_ID}:retry"] = Answer.data(
        {
            "source_task_id": OTHER_TASK_ID,
            "task": hostile_task("b" * 32, NAMESPACE_ID, retry_of=OTHER_TASK_ID),
            "audit_id": AUDIT_ID,
            "deduplicated": False,
        },
        status=201,
    )

    review = refused_answer(
        hostile,
        lambda orbit: orbit.review_task(TASK_ID, idempotency_key="k-1", body=review_request()),
    )
    retry = refused_answer(
        hostile,
        lambda orbit: orbit.retry_task(TASK_ID, idempotency_key="k-2", body=retry_request()),
    )

    assert isinstance(review, OutcomeUnknown) and isinstance(retry, OutcomeUnknown)
    assert (review.kind, retry.kind) == (MISMATCHED, MISMATCHED)
    assert review.reason.startswith("receipt.task.id is")
    assert retry.reason.startswith("receipt.source_task_id is")
    assert (retry.status, review.status) == (201, 200)


def test_a_well_formed_answer_from_another_orbit_is_read(hostile: HostileOrbit) -> None:
    """The members only the embedded API sends (the recovery facts) may be absent."""
    hostile.answers[f"/v1/tasks/{TASK_ID}"] = Answer.data(
        {"id": TASK_ID, "state": "FAILED", "revision": "2", "effect_uncertain": None}
    )
    hostile.answers[operation_path(TASK_ID, AUDIT_ID)] = Answer.data(
        operation(TASK_ID, AUDIT_ID, before=None)
    )

    task = call(hostile.url, "token", lambda orbit: orbit.get_task(TASK_ID))
    detail = call(hostile.url, "token", lambda orbit: orbit.get_task_operation(TASK_ID, AUDIT_ID))

    assert (task.id, task.state, task.revision, task.effect_uncertain) == (
        TASK_ID,
        "FAILED",
        "2",
        None,
    )
    assert (detail.task_id, detail.id, detail.before) == (TASK_ID, AUDIT_ID, None)
