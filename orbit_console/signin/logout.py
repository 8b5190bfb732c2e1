"""Ending access: OpenID Connect Back-Channel Logout 1.0, ending every session of a person,
and RP-initiated logout at the provider (docs/access.md).

A logout token is accepted when it is signed with a key of the provider's JWKS in the
configured algorithm, its ``iss`` is the issuer, its ``aud`` this client, its ``iat`` recent
(``OIDC_LOGOUT_TOKEN_MAX_AGE``; ``exp`` too when present), its ``events`` claim holds the
back-channel logout event, it names a session (``sid``) or a person (``sub``), it carries no
``nonce``, and its ``jti`` was never accepted before. It ends the console sessions of that
provider session, or every company session of that person, and their open sockets at once.

The endpoint is anonymous and costs its caller nothing to call (issue 40), so everything a
token says is checked before its signature, and its signature before anything is written: a
token that is not a compact JWS of reasonable size, or whose header or claims would be refused
anyway, is refused before any key is looked up; the keys come from ``keys.py`` (kept, fetched
off the request path at a bounded rate); the database is written only for a token whose
signature holds.
"""

import logging
import re
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
from orbit_console.signin import keys, provider
from orbit_console.signin.models import LogoutTokenSeen, OidcIdentity, OidcSession

log = logging.getLogger(__name__)

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"
# A logout token is a few hundred bytes; providers' are under 2 KiB.
MAX_LOGOUT_TOKEN_CHARS = 8192
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


class LogoutTokenRefused(Exception):
    """Why a logout token is refused (said to the provider, never with the token)."""


def _decoded(token: str, key: jwt.PyJWK | None) -> dict[str, Any]:
    """The token's claims with the checks PyJWT makes (issuer, audience, times, required
    claims); its signature too when ``key`` is given."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key if key is not None else "",
            algorithms=[settings.OIDC_RP_SIGN_ALGO],
            audience=settings.OIDC_RP_CLIENT_ID,
            issuer=provider.issuer(),
            leeway=60,
            options={
                "verify_signature": key is not None,
                "verify_exp": True,
                "verify_nbf": True,
                "verify_iat": True,
                "verify_aud": True,
                "verify_iss": True,
                "require": ["iss", "aud", "iat", "jti"],
            },
        )
    except jwt.PyJWTError as bad:
        raise LogoutTokenRefused(type(bad).__name__) from None
    return claims


def _readable(token: str) -> tuple[str | None, dict[str, Any]]:
    """Everything that can be checked without the provider's keys: the key id the header
    names, and the claims, each as they must be."""
    if len(token) > MAX_LOGOUT_TOKEN_CHARS or not _COMPACT_JWS.fullmatch(token):
        raise LogoutTokenRefused("not a signed JWT")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise LogoutTokenRefused("its header cannot be read") from None
    if header.get("alg") != settings.OIDC_RP_SIGN_ALGO:
        raise LogoutTokenRefused("signed with another algorithm")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise LogoutTokenRefused("its key id is not a string")
    claims = _decoded(token, None)
    iat = claims["iat"]
    if not isinstance(iat, int | float) or isinstance(iat, bool):
        raise LogoutTokenRefused("its iat is not a time")
    now = timezone.now().timestamp()  # compared, never subtracted: iat may be -10**400
    if not now - settings.OIDC_LOGOUT_TOKEN_MAX_AGE <= iat <= now + 60:
        raise LogoutTokenRefused("issued too long ago, or in the future")
    jti = claims["jti"]
    # What the console keeps of it (LogoutTokenSeen.jti), and ids it looks sessions up by.
    if not isinstance(jti, str) or not 0 < len(jti) <= 255:
        raise LogoutTokenRefused("its jti is not an id")
    if any(not isinstance(claims.get(name, ""), str) for name in ("sid", "sub")):
        raise LogoutTokenRefused("its sid or sub is not a string")
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_EVENT), dict):
        raise LogoutTokenRefused("no back-channel logout event")
    if "nonce" in claims:
        raise LogoutTokenRefused("a logout token carries no nonce")
    if not claims.get("sid") and not claims.get("sub"):
        raise LogoutTokenRefused("names neither a session nor a person")
    return kid, claims


async def verify_logout_token(token: str) -> dict[str, Any]:
    """The claims of ``token`` once every check holds, its signature last."""
    kid, _ = _readable(token)
    try:
        key = await keys.of_issuer(provider.issuer()).key_for(kid, settings.OIDC_RP_SIGN_ALGO)
    except keys.UnknownKey:
        raise LogoutTokenRefused("no key of the provider's JWKS signed it") from None
    except keys.KeysUnavailable:
        raise LogoutTokenRefused("the provider's keys could not be read") from None
    return _decoded(token, key)


@transaction.atomic
def backchannel_logout(*, claims: dict[str, Any]) -> int:
    """End what a verified logout token's ``claims`` name, once per ``jti``; how many console
    sessions ended."""
    issuer = provider.issuer()
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
    keys_ended = list(sessions.values_list("session_key", flat=True))
    OidcSession.objects.filter(session_key__in=keys_ended).delete()
    ended = end_sessions(keys_ended)
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
