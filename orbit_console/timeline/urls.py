from django.urls import path

from orbit_console.timeline import views

app_name = "timeline"

urlpatterns = [
    path("tasks/<str:task_id>/timeline/older", views.older, name="older"),
    path("tasks/<str:task_id>/timeline/latest", views.latest, name="latest"),
]
