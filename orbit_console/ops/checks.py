"""Deploy checks (``manage.py check --deploy``) for the parts Django does not know about."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register


@register(Tags.security, deploy=True)
def production_parts(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    if settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer":
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
