"""The request id of the work in progress, for logs and for calls to the recovery API."""

from contextvars import ContextVar

current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)
