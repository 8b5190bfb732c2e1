from django.urls import path

from orbit_console.events import api
from orbit_console.events.asyncapi import asyncapi_document

app_name = "events"

urlpatterns = [
    path("asyncapi.json", asyncapi_document, name="asyncapi"),
    path("subscriptions", api.subscription_collection, name="subscriptions"),
    path("subscriptions/<str:subscription_id>", api.subscription_resource, name="subscription"),
]
