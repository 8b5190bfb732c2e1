"""Re-checking a company sign-in at the provider (docs/access.md), so that a person the
provider no longer admits loses access within a bound, with any provider:

- every ``OIDC_RECHECK_SECONDS``, at the person's next request (``RecheckMiddleware``);
- before every approval or rejection when the last check is older than
  ``OIDC_DECISION_RECHECK_SECONDS`` (``console/views/stepup.py``).

With a refresh token the console asks the provider itself: a refusal (the person disabled, the
grant revoked, the session ended there) signs them out there and then, sockets too; a success
reads their groups again and changes their roles as at sign-in (out of every mapped group:
signed out, roles gone). A provider that does not answer is asked again at the next request;
after twice the period without an answer the person is signed out (fail closed).

Without one (Google with ``openid profile email`` issues none) only the browser can ask: the
next page the person opens goes through the provider with ``prompt=none`` (``flows.py``), which
answers at once from the provider's own session or refuses — refused, the person is signed out
(``views.OidcCallback``). A request that cannot be sent there — a form, a live part of a page —
is answered as one without a session (``confirmed``): a form's text is kept as a draft, and the
next page goes through the provider.
"""

import functools
import logging
import time
from enum import Enum
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.deprecation import MiddlewareMixin
from requests import RequestException

from orbit_console.lib.namespaces import NamespaceAmbiguous
from orbit_console.lib.secretbox import seal, unseal
from orbit_console.ops.sockets import end_sessions
from orbit_console.signin import flows, provider
from orbit_console.signin.rules import admitting_rule
from orbit_console.signin.services import oidc_person_revoke, oidc_person_sync
from orbit_console.signin.session import KEY

log = logging.getLogger(__name__)


class RefreshRefused(Exception):
    pass


def _refresh(refresh_token: str) -> dict[str, Any]:
    try:
        data, auth = provider.client_credentials(
            {"grant_type": "refresh_token", "refresh_token": refresh_token}
        )
        answer = httpx.post(
            provider.endpoint("token_endpoint"),
            data=data,
            auth=auth,
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


class Checked(Enum):
    CURRENT = "current"  # asked within the bound, or just now: the person is still admitted
    ROUND_TRIP = "round trip"  # due, and no refresh token: the browser must go to the provider
    UNANSWERED = "unanswered"  # due, and the provider did not answer (not yet for too long)
    SIGNED_OUT = "signed out"  # the provider refused: this request has no session any more


def recheck(request: HttpRequest, *, max_age: float) -> Checked:
    """Ask the provider about the request's company sign-in if it was last asked ``max_age``
    seconds ago or more (with the refresh token; without one, say that the browser must go)."""
    kept = request.session.get(KEY)
    if not isinstance(kept, dict) or not provider.enabled():
        return Checked.CURRENT
    now = time.time()
    checked = float(kept.get("checked_at", 0))
    if now - checked < max_age:
        return Checked.CURRENT
    if not kept.get("refresh"):
        return Checked.ROUND_TRIP
    issuer = provider.issuer()
    try:
        tokens = _refresh(unseal(kept["refresh"]))
        claims = _claims(tokens, str(kept["sub"]))
    except provider.ProviderUnavailable:
        if now - checked < 2 * settings.OIDC_RECHECK_SECONDS:
            return Checked.UNANSWERED
        log.warning("company sign-in re-check: the provider did not answer; signed out")
        return _sign_out(request)
    except (RefreshRefused, SuspiciousOperation, RequestException, KeyError, ValueError) as refused:
        log.warning("company sign-in re-check refused: %s", type(refused).__name__)
        return _sign_out(request)
    rule = admitting_rule(claims)
    if rule is None:
        oidc_person_revoke(issuer=issuer, subject=str(kept["sub"]))
        return _sign_out(request)
    try:
        oidc_person_sync(issuer=issuer, claims=claims, rule=rule)
    except NamespaceAmbiguous as ambiguous:  # the settings', not the person's: nothing changes
        log.warning("company sign-in re-check: OIDC_ROLE_RULES: %s", ambiguous)
        return Checked.UNANSWERED
    kept["checked_at"] = int(now)
    if tokens.get("refresh_token"):
        kept["refresh"] = seal(str(tokens["refresh_token"]))
    request.session[KEY] = kept
    return Checked.CURRENT


def _sign_out(request: HttpRequest) -> Checked:
    key = request.session.session_key
    logout(request)
    if key:
        end_sessions([key])
    return Checked.SIGNED_OUT


def round_trip(request: HttpRequest, *, next_url: str) -> str:
    """Where to send the browser for a re-check without a refresh token, back to ``next_url``."""
    return flows.ask(request, flows.RECHECK, next_url=next_url)


_UNCONFIRMED = "orbit_recheck_due"


def confirmed(request: HttpRequest) -> bool:
    """False for a request that came once a re-check was due and could not go to the provider
    itself: it is answered as one without a session (the session stays, for the next page)."""
    return not getattr(request, _UNCONFIRMED, False)


def _navigation(request: HttpRequest) -> bool:
    """A page the browser opens itself, which can be sent to the provider and back."""
    return (
        request.method in ("GET", "HEAD")
        and "HX-Request" not in request.headers
        and request.headers.get("Sec-Fetch-Mode", "navigate") == "navigate"
    )


@functools.cache
def _own_paths() -> frozenset[str]:
    """The pages of the round trip itself, the step-up (which goes to the provider anyway) and
    signing out: never held for a re-check."""
    names = ("signin:oidc_start", "signin:oidc_callback", "signin:confirm", "logout")
    return frozenset(reverse(name) for name in names)


class RecheckMiddleware(MiddlewareMixin):
    """In ``SYNC_MIDDLEWARE`` after authentication (hook-style, run in its one sync hop):
    costs a dictionary look per request until a re-check is due. A person it signs out goes on
    as one without a session: the view sends them to sign in, keeping a form's text."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if not (provider.enabled() and request.user.is_authenticated):
            return None
        if request.path in _own_paths():
            return None
        checked = recheck(request, max_age=settings.OIDC_RECHECK_SECONDS)
        if checked is Checked.ROUND_TRIP:
            if _navigation(request):
                return HttpResponseRedirect(round_trip(request, next_url=request.get_full_path()))
            setattr(request, _UNCONFIRMED, True)
            request.user = AnonymousUser()
        return None
