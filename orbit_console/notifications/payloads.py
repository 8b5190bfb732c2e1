"""The bodies webhooks send: plain JSON (``orbit.notification.v1``, its JSON Schema in
docs/notifications.md) or Slack-compatible (``text`` and ``blocks``). Either holds ids,
states, counts, the reason and the link: never a token, a full business key or a result body
(E2)."""

import json
from typing import Any

from orbit_console.lib.rfc3339 import format_utc
from orbit_console.notifications.models import Endpoint, EndpointFormat, Notification
from orbit_console.notifications.texts import link, rendered

SCHEMA_ID = "orbit.notification.v1"


def plain(notification: Notification, language: str) -> dict[str, Any]:
    title, lines = rendered(notification, language)
    data: dict[str, Any] = {
        "notification_id": notification.id,
        "namespace_id": notification.namespace_id,
        "title": title,
        "lines": lines,
        "link": link(notification),
        "facts": notification.data,
    }
    for name in ("task_id", "proposal_id", "batch_id", "submission_id"):
        value = getattr(notification, name)
        if value:
            data[name] = value
    return {
        "type": notification.kind,
        "timestamp": format_utc(notification.created_at),
        "schema": SCHEMA_ID,
        "data": data,
    }


def slack(notification: Notification, language: str) -> dict[str, Any]:
    title, lines = rendered(notification, language)
    url = link(notification)
    headline = f"<{url}|{_escape(title)}>" if url else _escape(title)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline}*"}}
    ]
    if lines:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "\n".join(_escape(line) for line in lines)},
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"`{notification.kind}` · {notification.id}"}],
        }
    )
    return {"text": f"{title}: {url}" if url else title, "blocks": blocks}


def _escape(text: str) -> str:
    """Slack's three control characters (its mrkdwn has no other escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def body_for(endpoint: Endpoint, notification: Notification) -> str:
    payload = (slack if endpoint.format == EndpointFormat.SLACK else plain)(
        notification, endpoint.language
    )
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
