"""What a session keeps of its company sign-in (docs/access.md): the provider's names for it
(``sub``, ``sid``), when the person authenticated there, when the provider was last asked about
them (``checked_at``), the refresh token (sealed) for the periodic re-check, and the ID token
only when the provider's logout needs it as a hint. Nothing of it is ever rendered."""

import time
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.http import HttpRequest
from django.utils import timezone

from orbit_console.lib.secretbox import seal
from orbit_console.signin import flows, provider
from orbit_console.signin.models import OidcSession
from orbit_console.signin.stepup import record_authentication

KEY = "orbit.oidc"


def _keep(request: HttpRequest, info: dict[str, Any], kept: dict[str, Any]) -> None:
    """What this answer of the provider's says of the session: its names there, that the
    provider was asked just now, and the tokens a re-check and logout need."""
    kept.update(
        sub=info["sub"],
        sid=info["sid"],
        namespaces=info.get("namespaces", []),
        checked_at=int(time.time()),
    )
    if info.get("refresh_token"):
        kept["refresh"] = seal(info["refresh_token"])
    try:
        logout_needs_hint = bool(provider.discovery().get("end_session_endpoint"))
    except provider.ProviderUnavailable:
        logout_needs_hint = False
    if logout_needs_hint:
        kept["id_token"] = seal(info["id_token"])
    request.session[KEY] = kept


def remember_signin(request: HttpRequest, info: dict[str, Any]) -> None:
    """A sign-in (or a step-up): the person authenticated when the ID token's ``auth_time``
    says, or at an unknown time when it says nothing (never fresh)."""
    if not info:
        return
    _keep(request, info, {})
    record_authentication(request, method="oidc", at=info["auth_time"], acr=info.get("acr"))
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


def remember_recheck(request: HttpRequest, info: dict[str, Any]) -> None:
    """A re-check answered (``prompt=none``): the provider still admits the person, with the
    roles the sign-in gave them again. How and when they authenticated stays as it was: an
    answer from the provider's session is no authentication."""
    kept = request.session.get(KEY)
    _keep(request, info, dict(kept) if isinstance(kept, dict) else {})
    OidcSession.objects.filter(session_key=request.session.session_key).update(sid=info["sid"])


def extra_auth_params(purpose: str) -> dict[str, str]:
    params = flows.params(purpose)
    # A re-check asks whether the person is still admitted, not for a stronger sign-in: with
    # acr_values a provider may insist on interaction, which prompt=none forbids.
    if settings.OIDC_ACR_VALUES and purpose != flows.RECHECK:
        params["acr_values"] = settings.OIDC_ACR_VALUES
    return params
