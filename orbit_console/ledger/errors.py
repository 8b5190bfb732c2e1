"""The errors of the recovery API (E). Services raise them; one helper renders the envelope."""

from typing import Any


class ApiError(Exception):
    status = 500
    code = "INTERNAL"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidArgument(ApiError):
    status = 400
    code = "INVALID_ARGUMENT"


class Unauthenticated(ApiError):
    status = 401
    code = "UNAUTHENTICATED"


class PermissionDenied(ApiError):
    status = 403
    code = "PERMISSION_DENIED"


class NotFound(ApiError):
    status = 404
    code = "NOT_FOUND"


class MethodNotAllowed(ApiError):
    status = 405
    code = "METHOD_NOT_ALLOWED"


class StateConflict(ApiError):
    status = 409
    code = "STATE_CONFLICT"


class IdempotencyConflict(ApiError):
    status = 409
    code = "IDEMPOTENCY_CONFLICT"


class QueueFull(ApiError):
    status = 429
    code = "QUEUE_FULL"


class ApplicationFull(ApiError):
    status = 429
    code = "APPLICATION_FULL"


class SubscriptionLimit(ApiError):
    """The credential, or its namespace, holds as many subscriptions as it may."""

    status = 429
    code = "SUBSCRIPTION_LIMIT"


class StreamLimit(ApiError):
    """The credential, or its namespace, has as many streams open as it may."""

    status = 429
    code = "STREAM_LIMIT"


class Unavailable(ApiError):
    status = 503
    code = "UNAVAILABLE"
