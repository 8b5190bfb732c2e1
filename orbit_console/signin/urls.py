from django.urls import path

from orbit_console.signin import views

app_name = "signin"
urlpatterns = [
    path("signin/oidc", views.OidcStart.as_view(), name="oidc_start"),
    path("signin/oidc/callback", views.OidcCallback.as_view(), name="oidc_callback"),
    path(
        "signin/oidc/backchannel-logout",
        views.backchannel_logout_view,
        name="oidc_backchannel_logout",
    ),
    path("signin/confirm", views.confirm, name="confirm"),
    path("people/<str:username>", views.person_page, name="person"),
    path("people/<str:username>/signout", views.person_sign_out, name="person_sign_out"),
    path("people/<str:username>/link", views.person_link, name="person_link"),
    path("people/<str:username>/held/<str:held_id>", views.person_held, name="person_held"),
    path("signout/everywhere", views.sign_out_everywhere, name="sign_out_everywhere"),
]
