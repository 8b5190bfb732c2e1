"""What can go wrong when calling the recovery API, kept apart by what the caller must do."""

from dataclasses import dataclass


@dataclass
class OrbitError(Exception):
    """A definite answer that is not a success: the request was judged and not applied (or,
    for an idempotency replay, answered). Everything the envelope said is kept (E)."""

    status: int
    code: str
    message: str
    request_id: str | None = None
    retry_after_ms: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


@dataclass
class OutcomeUnknown(Exception):
    """No answer that says what happened: a timeout, a lost connection or a 5xx. The request
    may have been applied; the caller resends the identical request with the same key (C9)."""

    reason: str
    status: int | None = None
    code: str | None = None
    request_id: str | None = None

    def __str__(self) -> str:
        return f"outcome unknown: {self.reason}"
