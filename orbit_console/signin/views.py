"""Company sign-in's pages: the start (to the provider), the callback (back from it), and what a
person sees when it does not let them in."""

import logging
import time
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth import authenticate, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from orbit_console.ops.sessions import sessions_of_user
from orbit_console.signin import provider, session
from orbit_console.signin.backends import REFUSED
from orbit_console.signin.logout import (
    LogoutTokenRefused,
    backchannel_logout,
    person_sessions_end,
    verify_logout_token,
)
from orbit_console.signin.models import OidcIdentity
from orbit_console.signin.stepup import STEP_UP, is_company_session, record_authentication

log = logging.getLogger(__name__)


class OidcStart(OIDCAuthenticationRequestView):
    """``GET /signin/oidc``: to the provider's sign-in, with state, nonce and PKCE."""

    get_settings = staticmethod(provider.library_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = provider.library_setting("OIDC_RP_CLIENT_ID")

    def get(self, request: HttpRequest) -> HttpResponse:
        if not provider.enabled():
            return render(request, "signin/unavailable.html", status=404)
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider.endpoint("authorization_endpoint")
        except provider.ProviderUnavailable:
            return render(request, "signin/unavailable.html", status=503)
        response: HttpResponse = super().get(request)
        return response

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        return session.extra_auth_params(request)


class OidcCallback(OIDCAuthenticationCallbackView):
    """``GET /signin/oidc/callback``: the provider sends the browser back with a code."""

    get_settings = staticmethod(provider.library_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            response: HttpResponse = super().get(request)
        except SuspiciousOperation:  # a state this browser did not start: the page, not a 400
            return self.login_failure()
        return response

    def login_failure(self) -> HttpResponse:
        outcome = getattr(self.request, "oidc_outcome", None)
        if outcome == REFUSED:
            context = {"provider_name": provider.display_name()}
            return render(self.request, "signin/refused.html", context, status=403)
        return render(
            self.request,
            "signin/failed.html",
            {"provider_name": provider.display_name()},
            status=400,
        )

    def login_success(self) -> HttpResponse:
        asked = self.request.session.get(STEP_UP)
        if asked is not None:
            # A re-authentication before approving: the same person, authenticated at the
            # provider after it was asked (``prompt=login``, ``max_age=0``).
            info = getattr(self.request, "oidc_signin", {})
            auth_time = float(info.get("auth_time") or 0)
            if self.user != self.request.user or auth_time < float(asked) - 5:
                return self.login_failure()
        response: HttpResponse = super().login_success()
        session.remember_signin(self.request, getattr(self.request, "oidc_signin", {}))
        return response


@csrf_exempt
@never_cache
@require_POST
async def backchannel_logout_view(request: HttpRequest) -> HttpResponse:
    """``POST /signin/oidc/backchannel-logout`` (OpenID Connect Back-Channel Logout 1.0): the
    provider, server to server, with a signed ``logout_token``. 200 when accepted; 400 with
    the reason (never the token) when refused. Asynchronous: the token is checked, and the
    provider's keys awaited when they must be fetched, without holding a thread; only a token
    whose signature holds reaches the database (``signin/logout.py``)."""
    if not provider.enabled():
        return JsonResponse({"error": "invalid_request"}, status=404)
    token = request.POST.get("logout_token", "")
    if not token:
        return JsonResponse({"error": "invalid_request"}, status=400)
    try:
        claims = await verify_logout_token(token)
        await sync_to_async(backchannel_logout)(claims=claims)
    except LogoutTokenRefused as refused:
        log.warning("back-channel logout token refused: %s", refused)
        answer = {"error": "invalid_request", "error_description": str(refused)}
        return JsonResponse(answer, status=400)
    return HttpResponse(status=200)


@login_required
@require_POST
def sign_out_everywhere(request: HttpRequest) -> HttpResponse:
    """``POST /signout/everywhere``: the person ends every session of theirs, this one too."""
    user = request.user
    assert isinstance(user, User)  # noqa: S101 -- login_required
    # This session ends first (Django refuses to save a session whose row went meanwhile).
    logout(request)
    person_sessions_end(user=user)
    return redirect("login")


def _safe_next(request: HttpRequest) -> str:
    wanted = request.POST.get("next") or request.GET.get("next") or "/"
    if url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return "/"


@login_required
@never_cache
def confirm(request: HttpRequest) -> HttpResponse:
    """``/signin/confirm?next=PAGE``: authenticate again before approving (step-up). A company
    session goes to the provider with ``prompt=login``; a console account types its
    password."""
    next_url = _safe_next(request)
    if is_company_session(request):
        request.session[STEP_UP] = int(time.time())
        return redirect(f"{reverse('signin:oidc_start')}?{urlencode({'next': next_url})}")
    error = ""
    if request.method == "POST":
        user = request.user
        assert isinstance(user, User)  # noqa: S101 -- login_required
        again = authenticate(
            request, username=user.get_username(), password=request.POST.get("password", "")
        )
        if again is not None and again.pk == user.pk:
            record_authentication(request, method="password", at=time.time())
            return redirect(next_url)
        error = "wrong"
    return render(request, "signin/confirm.html", {"next": next_url, "error": error})


def _administrator(request: HttpRequest) -> None:
    """The console's administrators are Django's superusers (``manage.py createsuperuser``):
    the people who run ``manage.py console`` may also act here."""
    if not request.user.is_authenticated or not request.user.is_superuser:
        raise PermissionDenied


@login_required
@never_cache
def person_page(request: HttpRequest, username: str) -> HttpResponse:
    """``GET /people/NAME`` (administrators): who the person is, and ending their sessions."""
    _administrator(request)
    person = get_object_or_404(User, username=username)
    identity = OidcIdentity.objects.filter(user=person).first()
    context = {
        "person": person,
        "roles": sorted(person.groups.values_list("name", flat=True)),
        "identity": identity,
        "sessions": len(sessions_of_user(person.pk)),
    }
    return render(request, "signin/person.html", context)


@login_required
@require_POST
def person_sign_out(request: HttpRequest, username: str) -> HttpResponse:
    """``POST /people/NAME/signout`` (administrators): every session of the person ends now,
    their open pages too (as ``manage.py console signout NAME``)."""
    _administrator(request)
    person = get_object_or_404(User, username=username)
    if person.pk == request.user.pk:
        logout(request)
    ended = person_sessions_end(user=person)
    if person.pk == request.user.pk:
        return redirect("login")
    messages.success(
        request,
        ngettext("%(count)d session ended.", "%(count)d sessions ended.", ended) % {"count": ended},
    )
    return redirect("signin:person", username=person.get_username())
