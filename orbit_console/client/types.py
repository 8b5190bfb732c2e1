"""Typed views of the recovery API's answers and requests.

JSON values are kept exact (I8): integers as ``int``, decimals as ``Decimal`` (which keeps
``0.10`` as written), so that payloads and results can be shown and re-sent without loss.
Fields that only the embedded API sends (the recovery facts) are ``None`` when a server does
not say.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from orbit_console.lib import strictjson
from orbit_console.lib.rfc3339 import format_utc, parse_utc

Json = Any
T = TypeVar("T")


def _time(value: str | None) -> datetime | None:
    return parse_utc(value) if value else None


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    """What the API says of the credential the client acts with (``GET /v1/credential``)."""

    id: str
    actor_id: str
    namespace_id: str
    queue_ids: frozenset[str]  # empty: the whole namespace
    permissions: frozenset[str]
    namespace_name: str = ""  # an Orbit that does not say it: the console shows the id

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CredentialInfo":
        return cls(
            id=data["id"],
            actor_id=data["actor_id"],
            namespace_id=data["namespace_id"],
            queue_ids=frozenset(data["queue_ids"]),
            permissions=frozenset(data["permissions"]),
            namespace_name=str(data.get("namespace_name") or ""),
        )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    initial_delay_ms: int
    max_delay_ms: int
    attempt_timeout_ms: int


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    namespace_id: str
    queue_id: str
    state: str
    revision: str
    handler: str
    handler_version: str
    payload_version: str
    payload: Json
    business_key: str | None
    concurrency_key: str | None
    priority: int
    available_at: datetime | None
    start_deadline_at: datetime | None
    deadline_at: datetime | None
    recovery_safety: str
    retry: RetryPolicy | None
    attempt_count: int
    has_result: bool
    result: Json
    completed_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    retry_of: str | None
    effect_uncertain: bool | None
    owner_kind: str | None
    gated: bool | None
    leased: bool | None
    lease_expires_at: datetime | None
    active_attempt: bool | None
    unreleased_permit: bool | None
    retry_successor_id: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Task":
        retry = data.get("retry")
        owner = data.get("owner")
        return cls(
            id=data["id"],
            namespace_id=data.get("namespace_id", ""),
            queue_id=data.get("queue_id", ""),
            state=data["state"],
            revision=data["revision"],
            handler=data.get("handler", ""),
            handler_version=data.get("handler_version", ""),
            payload_version=data.get("payload_version", ""),
            payload=data.get("payload"),
            business_key=data.get("business_key"),
            concurrency_key=data.get("concurrency_key"),
            priority=data.get("priority", 0),
            available_at=_time(data.get("available_at")),
            start_deadline_at=_time(data.get("start_deadline_at")),
            deadline_at=_time(data.get("deadline_at")),
            recovery_safety=data.get("recovery_safety", ""),
            retry=RetryPolicy(**retry) if isinstance(retry, dict) else None,
            attempt_count=data.get("attempt_count", 0),
            has_result="result" in data,
            result=data.get("result"),
            completed_at=_time(data.get("completed_at")),
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
            retry_of=data.get("retry_of"),
            effect_uncertain=data.get("effect_uncertain"),
            owner_kind=owner.get("kind") if isinstance(owner, dict) else None,
            gated=data.get("gated"),
            leased=data.get("leased"),
            lease_expires_at=_time(data.get("lease_expires_at")),
            active_attempt=data.get("active_attempt"),
            unreleased_permit=data.get("unreleased_permit"),
            retry_successor_id=data.get("retry_successor_id"),
        )

    @property
    def is_terminal(self) -> bool:
        return self.state in ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass(frozen=True, slots=True)
class TaskSummary:
    id: str
    queue_id: str
    state: str
    revision: str
    handler: str
    business_key: str | None
    attempt_count: int
    effect_uncertain: bool | None
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TaskSummary":
        return cls(
            id=data["id"],
            queue_id=data.get("queue_id", ""),
            state=data["state"],
            revision=data["revision"],
            handler=data.get("handler", ""),
            business_key=data.get("business_key"),
            attempt_count=data.get("attempt_count", 0),
            effect_uncertain=data.get("effect_uncertain"),
            created_at=_time(data.get("created_at")),
            updated_at=_time(data.get("updated_at")),
        )


@dataclass(frozen=True, slots=True)
class LateReport:
    id: str
    outcome: str
    detail: str
    received_at: datetime | None


@dataclass(frozen=True, slots=True)
class Attempt:
    id: str
    number: int
    worker_id: str
    started_at: datetime | None
    ended_at: datetime | None
    outcome: str | None
    error: str | None
    late_reports: tuple[LateReport, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Attempt":
        return cls(
            id=data["id"],
            number=data["number"],
            worker_id=data.get("worker_id", ""),
            started_at=_time(data.get("started_at")),
            ended_at=_time(data.get("ended_at")),
            outcome=data.get("outcome"),
            error=data.get("error"),
            late_reports=tuple(
                LateReport(
                    id=report["id"],
                    outcome=report["outcome"],
                    detail=report.get("detail", ""),
                    received_at=_time(report.get("received_at")),
                )
                for report in data.get("late_reports", [])
            ),
        )


@dataclass(frozen=True, slots=True)
class Operation:
    id: str
    task_id: str
    operation_id: str
    actor_id: str
    action: str
    created_at: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Operation":
        return cls(
            id=data["id"],
            task_id=data["task_id"],
            operation_id=data["operation_id"],
            actor_id=data["actor_id"],
            action=data["action"],
            created_at=parse_utc(data["created_at"]),
        )


@dataclass(frozen=True, slots=True)
class OperationDetail:
    id: str
    task_id: str
    operation_id: str
    actor_id: str
    action: str
    created_at: datetime
    reason: str
    evidence_ref: str | None
    before: Json
    after: Json

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "OperationDetail":
        item = Operation.from_json(data)
        return cls(
            id=item.id,
            task_id=item.task_id,
            operation_id=item.operation_id,
            actor_id=item.actor_id,
            action=item.action,
            created_at=item.created_at,
            reason=data.get("reason", ""),
            evidence_ref=data.get("evidence_ref"),
            before=data.get("before"),
            after=data.get("after"),
        )

    def as_plain(self) -> dict[str, Any]:
        """This operation as the API answered it (AU5), in plain JSON types that any channel
        layer carries: exact numbers as their text, times in RFC 3339 (lib/live.py's
        ``ledger.operation`` message)."""
        operation: dict[str, Any] = {
            "id": self.id,
            "task_id": self.task_id,
            "operation_id": self.operation_id,
            "actor_id": self.actor_id,
            "action": self.action,
            "created_at": format_utc(self.created_at),
            "reason": self.reason,
            "before": _plain(self.before),
            "after": _plain(self.after),
        }
        if self.evidence_ref is not None:
            operation["evidence_ref"] = self.evidence_ref
        return operation


def _plain(value: Any) -> Any:
    """Exact JSON values made safe for the channel layer (Decimals as their exact text)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Page[T]:
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class ReviewReceipt:
    task: Task
    audit_id: str
    deduplicated: bool
    request_id: str | None


@dataclass(frozen=True, slots=True)
class RetryReceipt:
    source_task_id: str
    task: Task
    audit_id: str
    deduplicated: bool
    request_id: str | None
    created: bool  # 201: this request created the successor; 200: a replay


@dataclass(frozen=True, slots=True)
class ReviewTaskRequest:
    """RV3. ``result`` is an exact JSON value (parsed with ``strictjson``) or ``RawJSON``."""

    expected_revision: str
    reason: str
    evidence_ref: str
    outcome: str
    result: Json
    execution_settled: bool = True

    def to_json(self, *, indent: int | None = None) -> str:
        return strictjson.dumps(
            {
                "expected_revision": self.expected_revision,
                "reason": self.reason,
                "evidence_ref": self.evidence_ref,
                "execution_settled": self.execution_settled,
                "outcome": self.outcome,
                "result": self.result,
            },
            indent=indent,
        )


@dataclass(frozen=True, slots=True)
class RetryTaskRequest:
    """RT2. Times are sent as RFC 3339 UTC."""

    expected_revision: str
    reason: str
    evidence_ref: str
    task_timeout_ms: int
    available_at: datetime | None = None
    start_deadline_at: datetime | None = None
    safe_to_retry: bool = True

    def to_json(self, *, indent: int | None = None) -> str:
        body: dict[str, Any] = {
            "expected_revision": self.expected_revision,
            "reason": self.reason,
            "evidence_ref": self.evidence_ref,
            "safe_to_retry": self.safe_to_retry,
            "task_timeout_ms": self.task_timeout_ms,
        }
        if self.available_at is not None:
            body["available_at"] = format_utc(self.available_at)
        if self.start_deadline_at is not None:
            body["start_deadline_at"] = format_utc(self.start_deadline_at)
        return strictjson.dumps(body, indent=indent)


@dataclass(frozen=True, slots=True)
class Subscription:
    """An event-stream subscription (docs/events.md) and how much it is owed."""

    id: str
    namespace_id: str
    name: str
    queue_ids: tuple[str, ...]
    lease_ms: int
    backlog: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Subscription":
        return cls(
            id=data["id"],
            namespace_id=data["namespace_id"],
            name=data["name"],
            queue_ids=tuple(data.get("queue_ids", ())),
            lease_ms=int(data["lease_ms"]),
            backlog=int(data.get("backlog", 0)),
        )
