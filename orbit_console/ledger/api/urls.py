from django.urls import path, re_path

from orbit_console.ledger.api import views
from orbit_console.ledger.api.http import not_found
from orbit_console.ledger.api.openapi import openapi_document

app_name = "api"

urlpatterns = [
    path("openapi.json", openapi_document, name="openapi"),
    path("credential", views.get_credential, name="credential"),
    path("tasks", views.list_tasks, name="tasks"),
    path("tasks/<str:task_id>/operations", views.list_operations, name="operations"),
    path("tasks/<str:task_id>/operations/<str:audit_id>", views.get_operation, name="operation"),
    path("tasks/<str:task_id>/attempts", views.list_attempts, name="attempts"),
    path("tasks/<str:ref>", views.task_resource, name="task"),
    re_path(r"^.*$", not_found),
]
