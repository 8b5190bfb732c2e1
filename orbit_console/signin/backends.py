"""The OpenID Connect backend: mozilla-django-oidc's code flow, with the endpoints from the
issuer's discovery document, the ID token's issuer, audience and times checked as well as its
signature and nonce, and the person's roles from their groups (``rules.py``).

Whatever fails — the provider refusing the code (a replayed one), a token for another client, a
person no rule admits — leaves ``request.oidc_outcome`` saying so for the callback's page, and
nothing of a token in the log.
"""

import logging
import time
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from requests import RequestException

from orbit_console.lib.namespaces import NamespaceAmbiguous
from orbit_console.people.backends import PeopleBackend
from orbit_console.signin import provider
from orbit_console.signin.rules import admitting_rule
from orbit_console.signin.services import oidc_person_revoke, oidc_person_sync

log = logging.getLogger(__name__)

REFUSED = "refused"  # no rule admits the person
HELD = "held"  # a first sign-in that matches an account here: an administrator decides
FAILED = "failed"  # the exchange or a check failed
MISCONFIGURED = "misconfigured"  # the console's settings cannot place the person (logged)


def auth_time(claims: dict[str, Any]) -> int | None:
    """When the person authenticated at the provider: the ID token's ``auth_time``, and nothing
    else. Never its ``iat`` — when the token was issued, which a silent round trip on the
    provider's open session makes "now" — and never later than now."""
    value = claims.get("auth_time")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return min(int(value), int(time.time()))


class OidcBackend(OIDCAuthenticationBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The endpoints are read when a sign-in needs them (``provider.discovery``), never when
        # Django builds the backends for a password sign-in.
        from django.contrib.auth import get_user_model

        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    get_settings = staticmethod(provider.library_setting)

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return provider.endpoint("token_endpoint")

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return provider.endpoint("userinfo_endpoint")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return provider.endpoint("jwks_uri")

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if request is None or not provider.enabled() or "code" not in request.GET:
            return None
        try:
            user: User | None = super().authenticate(request, **kwargs)
        except SuspiciousOperation as refused:
            # A check of ours, or of the library: its sentence names what failed, never a token.
            log.warning("company sign-in failed: %s", refused)
            request.oidc_outcome = FAILED  # type: ignore[attr-defined]
            return None
        except (RequestException, provider.ProviderUnavailable) as failed:
            # The class of what failed only: a token endpoint's answer can quote the request.
            log.warning("company sign-in failed: %s", type(failed).__name__)
            request.oidc_outcome = FAILED  # type: ignore[attr-defined]
            return None
        return user

    def get_token(self, payload: dict[str, Any]) -> Any:
        answer = super().get_token(payload)
        self._refresh_token = answer.get("refresh_token") if isinstance(answer, dict) else None
        return answer

    def raise_token_response_error(self, response: Any) -> None:
        if response.status_code != 200:
            raise SuspiciousOperation(f"the token endpoint answered {response.status_code}")

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The signature with the provider's key, and what the library does not check: the
        issuer, the audience (this client, and ``azp`` when several), the expiry and issue
        time."""
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation("the ID token is signed with another algorithm")
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=provider.issuer(),
                leeway=60,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.PyJWTError as bad:
            raise SuspiciousOperation(f"the ID token is refused: {type(bad).__name__}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("the ID token was issued to another client")
        return claims

    def store_tokens(self, access_token: str, id_token: str) -> None:
        """Nothing in the session here: the callback keeps what logout needs after sign-in."""

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        """The ID token's claims, with userinfo's over them (the groups may be in either)."""
        claims = dict(payload)
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if isinstance(userinfo, dict):
            if userinfo.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("userinfo names another person")
            claims.update(userinfo)
        return claims

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> User | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        rule = admitting_rule(claims)
        request = self.request
        issuer = provider.issuer()
        if rule is None:
            # Their roles and credentials go: a group taken away ends the access it gave.
            oidc_person_revoke(issuer=issuer, subject=str(payload["sub"]))
            request.oidc_outcome = REFUSED
            return None
        try:
            user = oidc_person_sync(issuer=issuer, claims=claims, rule=rule)
        except NamespaceAmbiguous as ambiguous:
            log.warning("company sign-in unavailable: OIDC_ROLE_RULES: %s", ambiguous)
            request.oidc_outcome = MISCONFIGURED
            return None
        if not isinstance(user, User):
            request.oidc_outcome = HELD
            request.oidc_held = user.id
            return None
        request.oidc_signin = {
            "sub": str(payload["sub"]),
            "sid": str(payload.get("sid", "")),
            "auth_time": auth_time(payload),
            "acr": payload.get("acr"),
            "namespaces": list(rule.namespaces),
            "id_token": id_token,
            "refresh_token": getattr(self, "_refresh_token", None),
        }
        return user

    def get_user(self, user_id: Any) -> User | None:
        return PeopleBackend().get_user(user_id)
