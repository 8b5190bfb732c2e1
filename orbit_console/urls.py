from django.urls import include, path

from orbit_console.console.views import session
from orbit_console.ops import views as ops
from orbit_console.ops.metrics import metrics

urlpatterns = [
    # The event stream's endpoints first: the ledger's end with its catch-all 404 (E1).
    path("v1/", include("orbit_console.events.urls")),
    path("v1/", include("orbit_console.ledger.api.urls")),
    path("", include("orbit_console.console.urls")),
    path("", include("orbit_console.timeline.urls")),
    path("", include("orbit_console.notifications.urls")),
    path("signin", session.sign_in, name="login"),
    path("", include("orbit_console.signin.urls")),
    path("signout", session.SignOutView.as_view(), name="logout"),
    path("session", session.session_status, name="session"),
    path("session/extend", session.session_extend, name="session_extend"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("health/live", ops.live, name="health-live"),
    path("health/ready", ops.ready, name="health-ready"),
    path("metrics", metrics, name="metrics"),
]

handler400 = "orbit_console.ops.views.bad_request"
handler403 = "orbit_console.ops.views.permission_denied"
handler404 = "orbit_console.ops.views.page_not_found"
handler500 = "orbit_console.ops.views.server_error"
