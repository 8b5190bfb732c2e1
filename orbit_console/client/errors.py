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


# What ``BadAnswer.kind`` says (also the label of the feed's set-aside metric).
TOO_LARGE = "too_large"
MALFORMED = "malformed"
MISMATCHED = "mismatched"


@dataclass
class BadAnswer(OutcomeUnknown):
    """An answer the client will not use: larger than ``max_answer_bytes`` (``too_large``),
    not what the API's schema says — a member missing or of the wrong type (``malformed``) —,
    or about something else than what was asked, another task's record for instance
    (``mismatched``).

    The server did answer, but nothing in the answer can be trusted, so it tells no more than a
    lost answer: a write may have been applied, and is resent as it was (C9); a read may be
    made again. Unlike a timeout, asking the same server again will usually get the same
    answer: the feed sets such an event aside instead of waiting for it (docs/events.md)."""

    kind: str = MALFORMED

    def __str__(self) -> str:
        return f"a bad answer ({self.kind}): {self.reason}"


def malformed(reason: str) -> BadAnswer:
    return BadAnswer(reason, kind=MALFORMED)
