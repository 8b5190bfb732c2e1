"""The recovery API's WebSocket routes, below ``/v1/`` (composed in ``orbit_console/asgi.py``
behind the stream's own Origin check, without the console's session authentication)."""

from django.urls import path, re_path

from orbit_console.events.stream import EventStream, NoSuchStream

websocket_urlpatterns = [
    path("subscriptions/<str:subscription_id>/events", EventStream.as_asgi()),
    re_path(r"", NoSuchStream.as_asgi()),  # any other /v1 socket: 404 (E1)
]
