"""Ending access: OpenID Connect Back-Channel Logout 1.0, ending every session of a person,
and RP-initiated logout at the provider (docs/access.md).

A logout token is accepted when it is signed with a key of the provider's JWKS in the
configured algorithm, its ``iss`` is the issuer, its ``aud`` this client, its ``iat`` recent
(``OIDC_LOGOUT_TOKEN_MAX_AGE``; ``exp`` too when present), its ``events`` claim holds the
back-channel logout event, it names a session (``sid``) or a person (``sub``), it carries no
``nonce``, and its ``jti`` was never accepted before. It ends the console sessions of that
provider session, or every company session of that person, and their open sockets at once.
"""

import logging
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import jwt
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from orbit_console.lib.secretbox import unseal
from orbit_console.ops.sessions import sessions_of_user
from orbit_console.ops.sockets import end_sessions
from orbit_console.signin import provider
from orbit_console.signin.models import LogoutTokenSeen, OidcIdentity, OidcSession

log = logging.getLogger(__name__)

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"


class LogoutTokenRefused(Exception):
    """Why a logout token is refused (said to the provider, never with the token)."""


def _signing_key(token: str) -> Any:
    header = jwt.get_unverified_header(token)
    if header.get("alg") != settings.OIDC_RP_SIGN_ALGO:
        raise LogoutTokenRefused("signed with another algorithm")
    keys = provider.fetch_json(provider.endpoint("jwks_uri")).get("keys", [])
    for key in keys if isinstance(keys, list) else []:
        if not isinstance(key, dict) or key.get("use", "sig") != "sig":
            continue
        if header.get("kid") is not None and key.get("kid") != header.get("kid"):
            continue
        if "alg" in key and key["alg"] != header.get("alg"):
            continue
        return jwt.PyJWK(key)
    raise LogoutTokenRefused("no key of the provider's JWKS signed it")


def verify_logout_token(token: str) -> dict[str, Any]:
    try:
        key = _signing_key(token)
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[settings.OIDC_RP_SIGN_ALGO],
            audience=settings.OIDC_RP_CLIENT_ID,
            issuer=settings.OIDC_ISSUER,
            leeway=60,
            options={"require": ["iss", "aud", "iat", "jti"]},
        )
    except jwt.PyJWTError as bad:
        raise LogoutTokenRefused(type(bad).__name__) from None
    except provider.ProviderUnavailable:
        raise LogoutTokenRefused("the provider's keys could not be read") from None
    age = timezone.now().timestamp() - float(claims["iat"])
    if age > settings.OIDC_LOGOUT_TOKEN_MAX_AGE or age < -60:
        raise LogoutTokenRefused("issued too long ago, or in the future")
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_EVENT), dict):
        raise LogoutTokenRefused("no back-channel logout event")
    if "nonce" in claims:
        raise LogoutTokenRefused("a logout token carries no nonce")
    if not claims.get("sid") and not claims.get("sub"):
        raise LogoutTokenRefused("names neither a session nor a person")
    return claims


@transaction.atomic
def backchannel_logout(token: str) -> int:
    """Verify ``token`` and end what it names; how many console sessions ended."""
    claims = verify_logout_token(token)
    issuer = str(settings.OIDC_ISSUER)
    now = timezone.now()
    LogoutTokenSeen.objects.filter(seen_at__lt=now - timedelta(days=1)).delete()
    try:
        with transaction.atomic():
            LogoutTokenSeen.objects.create(issuer=issuer, jti=str(claims["jti"]), seen_at=now)
    except IntegrityError:
        raise LogoutTokenRefused("replayed (its jti was used before)") from None
    sessions = OidcSession.objects.all()
    if claims.get("sub"):
        identity = OidcIdentity.objects.filter(issuer=issuer, subject=str(claims["sub"])).first()
        if identity is None:
            return 0
        sessions = sessions.filter(user=identity.user)
    if claims.get("sid"):
        sessions = sessions.filter(sid=str(claims["sid"]))
    keys = list(sessions.values_list("session_key", flat=True))
    OidcSession.objects.filter(session_key__in=keys).delete()
    ended = end_sessions(keys)
    log.info("back-channel logout: %d session(s) ended", ended)
    return ended


@transaction.atomic
def person_sessions_end(*, user: User) -> int:
    """Every session of ``user``, company or local, ends now (and their open sockets)."""
    keys = sessions_of_user(user.pk)
    OidcSession.objects.filter(user=user).delete()
    return end_sessions(keys)


def provider_logout_url(request: HttpRequest, *, id_token_sealed: str | None) -> str | None:
    """Where to send the browser to sign out of the provider too (RP-initiated logout), if
    it has an ``end_session_endpoint``: with the ID token as a hint and the sign-in page to
    come back to."""
    try:
        endpoint = provider.discovery().get("end_session_endpoint")
    except provider.ProviderUnavailable:
        return None
    if not isinstance(endpoint, str) or not endpoint:
        return None
    params = {
        "client_id": settings.OIDC_RP_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri("/signin"),
    }
    if id_token_sealed:
        params["id_token_hint"] = unseal(id_token_sealed)
    return f"{endpoint}?{urlencode(params)}"
