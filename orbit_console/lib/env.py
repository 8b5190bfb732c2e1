"""Typed readers for environment variables.

Each helper returns the default when the variable is unset or empty and raises
``ImproperlyConfigured`` with the variable's name when a value cannot be read, so
that a bad deployment fails at start-up rather than at the first request.
"""

import json
import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    value = os.environ.get(name, "").strip()
    return value or default


def env_bool(name: str, default: bool) -> bool:
    value = env_str(name).lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of {sorted(_TRUE | _FALSE)}, not {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = env_str(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if not value:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


_ID = re.compile(r"[0-9a-f]{32}")


def env_names(name: str) -> dict[str, str]:
    """A JSON object of ids (32 lowercase hex) to the names people read instead, e.g.
    ``{"0a1b…": "Payments (EU)"}``; unset, an empty one."""
    value = env_str(name)
    if not value:
        return {}
    try:
        names = json.loads(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a JSON object of id to name") from None
    if not isinstance(names, dict) or not all(
        isinstance(key, str) and _ID.fullmatch(key) and isinstance(text, str) and text.strip()
        for key, text in names.items()
    ):
        raise ImproperlyConfigured(
            f"{name} must map ids (32 lowercase hexadecimal characters) to non-empty names"
        )
    return {key: text.strip() for key, text in names.items()}
