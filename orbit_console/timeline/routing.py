from django.urls import path

from orbit_console.timeline.consumers import TaskTimelineConsumer

websocket_urlpatterns = [
    path("ws/tasks/<str:task_id>/timeline", TaskTimelineConsumer.as_asgi()),
]
