from django.urls import include, path

from orbit_console.ops import views as ops

urlpatterns = [
    path("v1/", include("orbit_console.ledger.api.urls")),
    path("health/live", ops.live, name="health-live"),
    path("health/ready", ops.ready, name="health-ready"),
]

handler404 = "orbit_console.ops.views.page_not_found"
handler500 = "orbit_console.ops.views.server_error"
