"""Typed views of the recovery API's answers and requests.

JSON values are kept exact (I8): integers as ``int``, decimals as ``Decimal`` (which keeps
``0.10`` as written), so that payloads and results can be shown and re-sent without loss.
Fields that only the embedded API sends (the recovery facts) are ``None`` when a server does
not say.

Every answer is read against the API's schema (``GET /v1/openapi.json``) by ``Fields``: a member
the console cannot do without that is missing, or any member of the wrong type (a revision that
is not a decimal string, an id that is not 32 hex digits, a state the API does not have), raises
``BadAnswer`` naming it (``task.revision: missing``), never a ``KeyError`` or a ``TypeError``
deep in a caller. What may be absent is what another Orbit may not send (the recovery facts);
``null`` counts as absent.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from orbit_console.client.errors import malformed
from orbit_console.lib import strictjson
from orbit_console.lib.rfc3339 import TimeFormatError, format_utc, parse_utc

Json = Any
T = TypeVar("T")

ID = re.compile(r"[0-9a-f]{32}")  # C5
# Revisions (C5) and the stream's sequences: decimal strings without sign or leading zero, in
# the unsigned 64-bit range's number of digits.
DECIMAL = re.compile(r"[1-9][0-9]{0,19}")
STATES = frozenset({"WAITING", "RUNNING", "NEEDS_REVIEW", "SUCCEEDED", "FAILED", "CANCELLED"})
OUTCOMES = frozenset({"SUCCEEDED", "FAILED", "UNKNOWN"})


class Fields:
    """One JSON object of an answer (``where`` names it in errors: ``task``, ``items[3]``),
    read member by member against the API's schema."""

    __slots__ = ("data", "where")

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise malformed(f"{where}: not an object")
        self.data: dict[str, Any] = data
        self.where = where

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _wrong(self, key: str, what: str) -> Exception:
        return malformed(f"{self.where}.{key}: {what}")

    def _get(self, key: str, required: bool) -> Any:
        value = self.data.get(key)
        if value is None and required:
            raise self._wrong(key, "missing")
        return value

    def value(self, key: str) -> Json:
        """Any JSON value (a payload, a result, an audit record's ``before``)."""
        return self.data.get(key)

    def text(self, key: str, *, required: bool = True, default: str = "") -> str:
        value = self._get(key, required)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._wrong(key, "not a string")
        return value

    def optional_text(self, key: str) -> str | None:
        return self.text(key, required=False) if self.has(key) else None

    def choice(self, key: str, allowed: frozenset[str]) -> str:
        value = self.text(key)
        if value not in allowed:
            raise self._wrong(key, f"not one of {', '.join(sorted(allowed))}")
        return value

    def optional_choice(self, key: str, allowed: frozenset[str]) -> str | None:
        return self.choice(key, allowed) if self.has(key) else None

    def id(self, key: str) -> str:
        value = self.text(key)
        if not ID.fullmatch(value):
            raise self._wrong(key, "not an id (32 lowercase hex digits)")
        return value

    def optional_id(self, key: str) -> str | None:
        return self.id(key) if self.has(key) else None

    def decimal(self, key: str) -> str:
        """A revision or a sequence: a decimal string (C5, I8)."""
        value = self.text(key)
        if not DECIMAL.fullmatch(value):
            raise self._wrong(key, "not a decimal string")
        return value

    def integer(
        self, key: str, *, required: bool = True, default: int = 0, minimum: int = 0
    ) -> int:
        value = self._get(key, required)
        if value is None:
            return default
        # bool is an int to Python, never to JSON.
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._wrong(key, "not an integer")
        if value < minimum:
            raise self._wrong(key, f"less than {minimum}")
        return value

    def boolean(self, key: str) -> bool:
        value = self._get(key, True)
        if not isinstance(value, bool):
            raise self._wrong(key, "not a boolean")
        return value

    def optional_boolean(self, key: str) -> bool | None:
        return self.boolean(key) if self.has(key) else None

    def time(self, key: str) -> datetime:
        value = self.text(key)
        try:
            return parse_utc(value)
        except TimeFormatError as wrong:
            raise self._wrong(key, str(wrong)) from None

    def optional_time(self, key: str) -> datetime | None:
        return self.time(key) if self.has(key) else None

    def object(self, key: str) -> "Fields":
        return Fields(self._get(key, True), f"{self.where}.{key}")

    def optional_object(self, key: str) -> "Fields | None":
        return self.object(key) if self.has(key) else None

    def array(self, key: str, *, required: bool = True) -> list[Any]:
        value = self._get(key, required)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(key, "not an array")
        return value

    def objects(self, key: str, *, required: bool = True) -> list["Fields"]:
        return [
            Fields(item, f"{self.where}.{key}[{index}]")
            for index, item in enumerate(self.array(key, required=required))
        ]

    def texts(self, key: str, *, ids: bool = False) -> list[str]:
        values = self.array(key)
        for value in values:
            if not isinstance(value, str) or (ids and not ID.fullmatch(value)):
                raise self._wrong(key, "not a list of ids" if ids else "not a list of strings")
        return values


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
    def from_json(cls, data: Any, where: str = "credential") -> "CredentialInfo":
        fields = Fields(data, where)
        return cls(
            id=fields.id("id"),
            actor_id=fields.text("actor_id"),  # as an operation's (below)
            namespace_id=fields.id("namespace_id"),
            queue_ids=frozenset(fields.texts("queue_ids", ids=True)),
            permissions=frozenset(fields.texts("permissions")),
            namespace_name=fields.text("namespace_name", required=False),
        )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    initial_delay_ms: int
    max_delay_ms: int
    attempt_timeout_ms: int

    @classmethod
    def from_fields(cls, fields: Fields) -> "RetryPolicy":
        return cls(
            max_attempts=fields.integer("max_attempts"),
            initial_delay_ms=fields.integer("initial_delay_ms"),
            max_delay_ms=fields.integer("max_delay_ms"),
            attempt_timeout_ms=fields.integer("attempt_timeout_ms"),
        )


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
    def from_json(cls, data: Any, where: str = "task") -> "Task":
        fields = Fields(data, where)
        retry = fields.optional_object("retry")
        owner = fields.optional_object("owner")
        return cls(
            id=fields.id("id"),
            namespace_id=fields.optional_id("namespace_id") or "",
            queue_id=fields.optional_id("queue_id") or "",
            state=fields.choice("state", STATES),
            revision=fields.decimal("revision"),
            handler=fields.text("handler", required=False),
            handler_version=fields.text("handler_version", required=False),
            payload_version=fields.text("payload_version", required=False),
            payload=fields.value("payload"),
            business_key=fields.optional_text("business_key"),
            concurrency_key=fields.optional_text("concurrency_key"),
            priority=fields.integer("priority", required=False, minimum=-(2**63)),
            available_at=fields.optional_time("available_at"),
            start_deadline_at=fields.optional_time("start_deadline_at"),
            deadline_at=fields.optional_time("deadline_at"),
            recovery_safety=fields.text("recovery_safety", required=False),
            retry=RetryPolicy.from_fields(retry) if retry is not None else None,
            attempt_count=fields.integer("attempt_count", required=False),
            has_result=fields.has("result"),
            result=fields.value("result"),
            completed_at=fields.optional_time("completed_at"),
            created_at=fields.optional_time("created_at"),
            updated_at=fields.optional_time("updated_at"),
            retry_of=fields.optional_id("retry_of"),
            effect_uncertain=fields.optional_boolean("effect_uncertain"),
            owner_kind=owner.text("kind") if owner is not None else None,
            gated=fields.optional_boolean("gated"),
            leased=fields.optional_boolean("leased"),
            lease_expires_at=fields.optional_time("lease_expires_at"),
            active_attempt=fields.optional_boolean("active_attempt"),
            unreleased_permit=fields.optional_boolean("unreleased_permit"),
            retry_successor_id=fields.optional_id("retry_successor_id"),
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
    def from_json(cls, data: Any, where: str = "task") -> "TaskSummary":
        fields = Fields(data, where)
        return cls(
            id=fields.id("id"),
            queue_id=fields.optional_id("queue_id") or "",
            state=fields.choice("state", STATES),
            revision=fields.decimal("revision"),
            handler=fields.text("handler", required=False),
            business_key=fields.optional_text("business_key"),
            attempt_count=fields.integer("attempt_count", required=False),
            effect_uncertain=fields.optional_boolean("effect_uncertain"),
            created_at=fields.optional_time("created_at"),
            updated_at=fields.optional_time("updated_at"),
        )


@dataclass(frozen=True, slots=True)
class LateReport:
    id: str
    outcome: str
    detail: str
    received_at: datetime | None

    @classmethod
    def from_fields(cls, fields: Fields) -> "LateReport":
        return cls(
            id=fields.id("id"),
            outcome=fields.choice("outcome", OUTCOMES),
            detail=fields.text("detail", required=False),
            received_at=fields.optional_time("received_at"),
        )


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
    task_id: str = ""  # the task the attempt is of, when the server says (the embedded API does)

    @classmethod
    def from_json(cls, data: Any, where: str = "attempt") -> "Attempt":
        fields = Fields(data, where)
        return cls(
            id=fields.id("id"),
            number=fields.integer("number", minimum=1),
            worker_id=fields.text("worker_id", required=False),
            started_at=fields.optional_time("started_at"),
            ended_at=fields.optional_time("ended_at"),
            outcome=fields.optional_choice("outcome", OUTCOMES),
            error=fields.optional_text("error"),
            late_reports=tuple(
                LateReport.from_fields(report)
                for report in fields.objects("late_reports", required=False)
            ),
            task_id=fields.optional_id("task_id") or "",
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
    def from_json(cls, data: Any, where: str = "operation") -> "Operation":
        fields = Fields(data, where)
        return cls(
            id=fields.id("id"),
            task_id=fields.id("task_id"),
            operation_id=fields.id("operation_id"),
            # Shown, never used as a key or in a path: any name an Orbit gives its actors.
            actor_id=fields.text("actor_id"),
            action=fields.text("action"),
            created_at=fields.time("created_at"),
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
    def from_json(cls, data: Any, where: str = "operation") -> "OperationDetail":
        item = Operation.from_json(data, where)
        fields = Fields(data, where)
        before, after = fields.value("before"), fields.value("after")
        # The schema's before (an object, or null for an acceptance) and after (an object).
        if before is not None and not isinstance(before, dict):
            raise malformed(f"{where}.before: not an object")
        if after is not None and not isinstance(after, dict):
            raise malformed(f"{where}.after: not an object")
        return cls(
            id=item.id,
            task_id=item.task_id,
            operation_id=item.operation_id,
            actor_id=item.actor_id,
            action=item.action,
            created_at=item.created_at,
            reason=fields.text("reason", required=False),
            evidence_ref=fields.optional_text("evidence_ref"),
            before=before,
            after=after,
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
    # The task list's (docs/api.md): the page before this one, and the count when asked for.
    prev_cursor: str | None = None
    total: int | None = None
    total_exact: bool = True

    @classmethod
    def from_json(cls, data: Any, build: Callable[[Any, str], T]) -> "Page[T]":
        fields = Fields(data, "page")
        items = fields.array("items")
        total_exact = fields.optional_boolean("total_exact")
        return cls(
            items=[build(item, f"items[{index}]") for index, item in enumerate(items)],
            next_cursor=fields.optional_text("next_cursor"),
            prev_cursor=fields.optional_text("prev_cursor"),
            total=fields.integer("total") if fields.has("total") else None,
            total_exact=True if total_exact is None else total_exact,
        )


@dataclass(frozen=True, slots=True)
class ReviewReceipt:
    task: Task
    audit_id: str
    deduplicated: bool
    request_id: str | None

    @classmethod
    def from_json(cls, data: Any, request_id: str | None) -> "ReviewReceipt":
        fields = Fields(data, "receipt")
        return cls(
            task=Task.from_json(fields.value("task"), "receipt.task"),
            audit_id=fields.id("audit_id"),
            deduplicated=fields.boolean("deduplicated"),
            request_id=request_id,
        )


@dataclass(frozen=True, slots=True)
class RetryReceipt:
    source_task_id: str
    task: Task
    audit_id: str
    deduplicated: bool
    request_id: str | None
    created: bool  # 201: this request created the successor; 200: a replay

    @classmethod
    def from_json(cls, data: Any, request_id: str | None, *, created: bool) -> "RetryReceipt":
        fields = Fields(data, "receipt")
        return cls(
            source_task_id=fields.id("source_task_id"),
            task=Task.from_json(fields.value("task"), "receipt.task"),
            audit_id=fields.id("audit_id"),
            deduplicated=fields.boolean("deduplicated"),
            request_id=request_id,
            created=created,
        )


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
    def from_json(cls, data: Any, where: str = "subscription") -> "Subscription":
        fields = Fields(data, where)
        return cls(
            id=fields.id("id"),
            namespace_id=fields.id("namespace_id"),
            name=fields.text("name"),
            queue_ids=tuple(fields.texts("queue_ids", ids=True) if fields.has("queue_ids") else ()),
            lease_ms=fields.integer("lease_ms", minimum=1),
            backlog=fields.integer("backlog", required=False),
        )
