from django.urls import path

from orbit_console.notifications import views

app_name = "notifications"

urlpatterns = [
    path("notifications", views.notification_list, name="list"),
    path("notifications/read", views.notification_read, name="read"),
    path("notifications/preferences", views.preferences_save, name="preferences"),
    path("notifications/deliveries", views.delivery_log, name="deliveries"),
    path(
        "notifications/deliveries/<str:message_id>/replay",
        views.delivery_replay,
        name="replay",
    ),
]
