"""Deploy checks (``manage.py check --deploy``) for the parts Django does not know about."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from orbit_console.ops.workers import shares_channel_layer


@register(Tags.security, deploy=True)
def production_parts(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    if not shares_channel_layer():
        messages.append(
            Warning(
                "The in-memory channel layer serves one process only.",
                hint="Set REDIS_URL so that live updates reach every console process.",
                id="orbit.W001",
            )
        )
    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        messages.append(
            Warning(
                "SQLite is the embedded default, not a database for a team.",
                hint="Set DATABASE_URL to MySQL 8.4 or MariaDB 10.11+.",
                id="orbit.W002",
            )
        )
    return messages


REQUIRED_MIDDLEWARE = {
    "django.middleware.security.SecurityMiddleware": "security.W001",
    "django.middleware.clickjacking.XFrameOptionsMiddleware": "security.W002",
    "django.middleware.csrf.CsrfViewMiddleware": "security.W003",
}


@register(Tags.security, deploy=True)
def grouped_middleware(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Django's middleware checks (silenced in settings), over the middleware that really runs:
    MIDDLEWARE and, through ``SyncMiddlewareGroup``, SYNC_MIDDLEWARE."""
    running = list(settings.MIDDLEWARE)
    if "orbit_console.ops.middleware.SyncMiddlewareGroup" in running:
        running += settings.SYNC_MIDDLEWARE
    return [
        Warning(
            f"{path} does not run: neither MIDDLEWARE nor SYNC_MIDDLEWARE has it "
            f"(Django's {check_id}).",
            id="orbit.W003",
        )
        for path, check_id in REQUIRED_MIDDLEWARE.items()
        if path not in running
    ]


@register(Tags.security)
def audit_keys(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The audit keys are read at start-up, so that a bad key stops the process before the
    first decision rather than failing it (lib/auditkeys.py)."""
    from django.core.exceptions import ImproperlyConfigured

    from orbit_console.lib import auditkeys

    try:
        auditkeys.current_key_id()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="orbit.E001")]
    return []
