"""The WebSocket routes of the console (served by asgi.py behind the Origin check and the
session authentication)."""

from django.urls import path

from orbit_console.console.consumers import (
    ApprovalsConsumer,
    BatchProgressConsumer,
    DecisionsConsumer,
    QueueRowsConsumer,
)
from orbit_console.notifications.consumers import NotificationsConsumer
from orbit_console.timeline.consumers import TaskTimelineConsumer

websocket_urlpatterns = [
    path("ws/tasks/<str:task_id>/timeline", TaskTimelineConsumer.as_asgi()),
    path("ws/approvals", ApprovalsConsumer.as_asgi()),
    path("ws/queue", QueueRowsConsumer.as_asgi()),
    path("ws/decisions", DecisionsConsumer.as_asgi()),
    path("ws/batches/<str:batch_id>", BatchProgressConsumer.as_asgi()),
    path("ws/notifications", NotificationsConsumer.as_asgi()),
]
