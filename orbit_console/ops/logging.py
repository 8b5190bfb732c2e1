"""Structured logs: one JSON object per line, correlated by ``request_id``.

What never goes into a log line (E2): tokens, full business keys, result bodies. Loggers in
this project log identifiers and outcomes only; ``JsonFormatter`` additionally drops any extra
field whose name marks it as secret.
"""

import json
import logging
from datetime import UTC, datetime

from django.http import HttpRequest

from orbit_console.ops.context import current_request_id

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_SECRET_WORDS = ("token", "authorization", "password", "secret", "business_key", "result", "cookie")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            request = getattr(record, "request", None)
            record.request_id = getattr(request, "request_id", None) or current_request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name in _STANDARD or name.startswith("_"):
                continue
            if any(word in name.lower() for word in _SECRET_WORDS):
                continue
            if isinstance(value, HttpRequest):
                # Django's own records carry the request; its repr holds the query string,
                # which can hold a full business key (E2). The message names the path.
                continue
            entry[name] = (
                value if isinstance(value, str | int | float | bool | None) else repr(value)
            )
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
