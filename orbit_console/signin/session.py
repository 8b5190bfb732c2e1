"""What a session keeps of its company sign-in (docs/access.md): the provider's names for it
(``sub``, ``sid``), when the person authenticated there, the refresh token (sealed) for the
periodic re-check, and the ID token only when the provider's logout needs it as a hint.
Nothing of it is ever rendered."""

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.http import HttpRequest
from django.utils import timezone

from orbit_console.lib.secretbox import seal
from orbit_console.signin import provider
from orbit_console.signin.models import OidcSession
from orbit_console.signin.stepup import STEP_UP, record_authentication, step_up_params

KEY = "orbit.oidc"


def remember_signin(request: HttpRequest, info: dict[str, Any]) -> None:
    if not info:
        return
    kept: dict[str, Any] = {
        "sub": info["sub"],
        "sid": info["sid"],
        "auth_time": info["auth_time"],
        "namespaces": info.get("namespaces", []),
        "checked_at": int(timezone.now().timestamp()),
    }
    if info.get("refresh_token"):
        kept["refresh"] = seal(info["refresh_token"])
    try:
        logout_needs_hint = bool(provider.discovery().get("end_session_endpoint"))
    except provider.ProviderUnavailable:
        logout_needs_hint = False
    if logout_needs_hint:
        kept["id_token"] = seal(info["id_token"])
    request.session[KEY] = kept
    record_authentication(
        request,
        method="oidc",
        at=float(info["auth_time"] or timezone.now().timestamp()),
        acr=info.get("acr"),
    )
    request.session.pop(STEP_UP, None)
    request.session.save()
    user = request.user
    assert isinstance(user, User)  # noqa: S101 -- signed in just now
    # The person's rows of sessions that have ended meanwhile go (a back-channel logout
    # naming them would find nothing to end).
    live = Session.objects.filter(expire_date__gt=timezone.now()).values("session_key")
    OidcSession.objects.filter(user=user).exclude(session_key__in=live).delete()
    OidcSession.objects.update_or_create(
        session_key=request.session.session_key, defaults={"user": user, "sid": info["sid"]}
    )


def extra_auth_params(request: HttpRequest) -> dict[str, str]:
    params: dict[str, str] = dict(step_up_params(request))
    if settings.OIDC_ACR_VALUES:
        params["acr_values"] = settings.OIDC_ACR_VALUES
    return params
