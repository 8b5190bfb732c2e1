"""The periodic re-check of a company sign-in (docs/access.md): every
``OIDC_RECHECK_SECONDS``, at the person's next request, the console uses the session's refresh
token at the provider. A refusal (the person disabled, the grant revoked, the session ended
there) signs them out there and then, sockets too; a success reads their groups again and
changes their roles as at sign-in (out of every mapped group: signed out, roles gone). A
provider that does not answer is asked again at the next request; after twice the period
without an answer the person is signed out (fail closed)."""

import logging
import time
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from requests import RequestException

from orbit_console.lib.secretbox import seal, unseal
from orbit_console.ops.sockets import end_sessions
from orbit_console.signin import provider
from orbit_console.signin.rules import first_match, groups_of
from orbit_console.signin.services import oidc_person_revoke, oidc_person_sync
from orbit_console.signin.session import KEY

log = logging.getLogger(__name__)


class RefreshRefused(Exception):
    pass


def _refresh(refresh_token: str) -> dict[str, Any]:
    try:
        answer = httpx.post(
            provider.endpoint("token_endpoint"),
            data={"grant_type": "refresh_token", "refresh_token": refresh_token},
            auth=(settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET),
            timeout=settings.OIDC_TIMEOUT,
        )
    except httpx.HTTPError:
        raise provider.ProviderUnavailable("the token endpoint did not answer") from None
    if 400 <= answer.status_code < 500:
        raise RefreshRefused(f"the provider refused the refresh ({answer.status_code})")
    if answer.status_code != 200:
        raise provider.ProviderUnavailable(f"the token endpoint answered {answer.status_code}")
    tokens: dict[str, Any] = answer.json()
    return tokens


def _claims(tokens: dict[str, Any], sub: str) -> dict[str, Any]:
    from orbit_console.signin.backends import OidcBackend

    backend = OidcBackend()
    claims: dict[str, Any] = {"sub": sub}
    id_token = tokens.get("id_token")
    if isinstance(id_token, str):
        payload = backend._verify_jws(id_token, backend.retrieve_matching_jwk(id_token))
        if payload.get("sub") != sub:
            raise RefreshRefused("the refreshed ID token names another person")
        claims.update(payload)
    userinfo = provider.fetch_json_with_token(
        provider.endpoint("userinfo_endpoint"), str(tokens.get("access_token", ""))
    )
    if userinfo.get("sub") != sub:
        raise RefreshRefused("userinfo names another person")
    claims.update(userinfo)
    return claims


def recheck(request: HttpRequest) -> HttpResponse | None:
    """Re-check the request's company sign-in when it is due; a response when the person is
    signed out by it (to the sign-in page), else None."""
    kept = request.session.get(KEY)
    if not isinstance(kept, dict) or not kept.get("refresh"):
        return None
    now = time.time()
    checked = float(kept.get("checked_at", 0))
    if now - checked < settings.OIDC_RECHECK_SECONDS:
        return None
    issuer = str(settings.OIDC_ISSUER)
    try:
        tokens = _refresh(unseal(kept["refresh"]))
        claims = _claims(tokens, str(kept["sub"]))
    except provider.ProviderUnavailable:
        if now - checked < 2 * settings.OIDC_RECHECK_SECONDS:
            return None
        log.warning("company sign-in re-check: the provider did not answer; signed out")
        return _sign_out(request)
    except (RefreshRefused, SuspiciousOperation, RequestException, KeyError, ValueError) as refused:
        log.warning("company sign-in re-check refused: %s", type(refused).__name__)
        return _sign_out(request)
    claim = settings.OIDC_GROUPS_CLAIM
    claims[claim] = groups_of(claims, claim=claim, keep=settings.OIDC_GROUPS_FILTER)
    rule = first_match(settings.OIDC_ROLE_RULES, claims)
    if rule is None:
        oidc_person_revoke(issuer=issuer, subject=str(kept["sub"]))
        return _sign_out(request)
    oidc_person_sync(issuer=issuer, claims=claims, rule=rule)
    kept["checked_at"] = int(now)
    if tokens.get("refresh_token"):
        kept["refresh"] = seal(str(tokens["refresh_token"]))
    request.session[KEY] = kept
    return None


def _sign_out(request: HttpRequest) -> HttpResponse:
    key = request.session.session_key
    logout(request)
    if key:
        end_sessions([key])
    return redirect_to_login(request.get_full_path())


class RecheckMiddleware(MiddlewareMixin):
    """In ``SYNC_MIDDLEWARE`` after authentication (hook-style, run in its one sync hop):
    costs a dictionary look per request until a re-check is due."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if provider.enabled() and request.user.is_authenticated:
            return recheck(request)
        return None
