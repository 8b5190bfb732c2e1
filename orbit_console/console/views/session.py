"""Signing in and out, what a page knows of its session, and the refused form that keeps what
it carried (docs/console.md, "Sessions and drafts").

Signing in is the password form, and company sign-in (OpenID Connect, ``signin/``) beside it
when configured. Nothing here depends on the form: the page a person signs in to (``next``)
gives back their draft, whoever authenticated them.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.views import LoginView, LogoutView
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from orbit_console.console.views.drafts import (
    DRAFT_COOKIE,
    forget_browser,
    keep_draft,
    owner_id,
    resume_page_of_path,
    same_origin,
)
from orbit_console.ops.sessions import timing, touch
from orbit_console.people.drafts import draft_waiting
from orbit_console.signin import provider as oidc_provider
from orbit_console.signin.logout import provider_logout_url
from orbit_console.signin.session import KEY as OIDC_SESSION
from orbit_console.signin.stepup import record_authentication


class SignInView(LoginView):
    template_name = "console/signin.html"
    redirect_authenticated_user = True

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        record_authentication(self.request, method="password", at=time.time())
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        key = self.request.COOKIES.get(DRAFT_COOKIE, "")
        context["draft_waiting"] = bool(key) and draft_waiting(browser_key=key)
        if oidc_provider.enabled():
            context["oidc_provider_name"] = oidc_provider.display_name()
        return context


# A password is checked (Argon2id: about 150 ms of CPU) on a thread of its own, never on the
# worker's one sync thread that signed-in people's pages wait for: a flood of wrong passwords held
# a supervisor's pages for seconds though it waited in the anonymous lane (issue 40). One check at
# a time per worker; the next wait in the anonymous lane (ops/lanes.py), never in people's.
_password_checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="password-checks")
_sign_in_view = SignInView.as_view()


async def sign_in(request: HttpRequest) -> HttpResponseBase:
    """``/signin``: the page is served as any page; the form's POST, which checks a password,
    on the password thread, with a database connection of its own, rendered there too."""
    if request.method != "POST":
        page: HttpResponseBase = await sync_to_async(_sign_in_view)(request)
        return page
    checked: HttpResponseBase = await sync_to_async(
        _sign_in_off_the_sync_thread, thread_sensitive=False, executor=_password_checks
    )(request)
    return checked


def _sign_in_off_the_sync_thread(request: HttpRequest) -> HttpResponseBase:
    # The thread's connection is looked after as a request's is (CONN_MAX_AGE, health checks).
    close_old_connections()
    try:
        response = _sign_in_view(request)
        if isinstance(response, TemplateResponse):
            response.render()
        return response
    finally:
        close_old_connections()


class SignOutView(LogoutView):
    """Signing out on purpose: nothing of this browser's is kept for later."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        company = request.session.get(OIDC_SESSION) if oidc_provider.enabled() else None
        # RP-initiated logout: signed in through the provider, signed out of it too.
        at_provider = (
            provider_logout_url(request, id_token_sealed=company.get("id_token"))
            if isinstance(company, dict)
            else None
        )
        response = super().post(request, *args, **kwargs)
        if at_provider is not None:
            response = HttpResponseRedirect(at_provider)
        forget_browser(request, response)
        return response


def session_state(request: HttpRequest) -> dict[str, Any]:
    """What a page is told of its session: when it ends (the sooner of the idle end and the
    sign-in's end), whether "stay signed in" can move that, and how long before it to warn.
    Times are Unix milliseconds, with the server's now, so that a page whose clock is off
    still warns on time."""
    if not request.user.is_authenticated:
        return {"signed_in": False}
    state = timing(request.session)
    return {
        "signed_in": True,
        "expires_at": int(state.expires_at.timestamp() * 1000),
        "ends_at": int(state.ends_at.timestamp() * 1000),
        "extendable": state.extendable,
        "warn_seconds": state.warn_seconds,
        "now": int(timezone.now().timestamp() * 1000),
    }


@never_cache
@require_GET
def session_status(request: HttpRequest) -> JsonResponse:
    """``GET /session``: a look, not a request of the person's: it moves no end."""
    return JsonResponse(session_state(request))


@never_cache
@require_POST
def session_extend(request: HttpRequest) -> JsonResponse:
    """``POST /session/extend`` ("stay signed in"; CSRF-protected as every POST): the idle end
    moves to now + ``SESSION_IDLE_TIMEOUT``, never past the sign-in's end."""
    if not request.user.is_authenticated:
        return JsonResponse({"signed_in": False}, status=401)
    touch(request.session, extend=True)
    return JsonResponse(session_state(request))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: the styled page, in the reader's language (Django's default
    renders without the request's context). A form with typed text whose token went out of
    date — most often because the person signed in again in another tab, which gives the
    browser a new token — is still refused, and nothing is done; what it carried is kept when
    the browser says the form came from this site (``same_origin``), and the page offers to
    continue where they left off."""
    context: dict[str, Any] = {}
    response = HttpResponse(status=403)
    resume_at = resume_page_of_path(request) if request.method == "POST" else None
    if resume_at is not None and same_origin(request):
        owner = request.user.pk if request.user.is_authenticated else owner_id(request)
        if owner is not None and keep_draft(request, response, resume_at=resume_at, owner=owner):
            context["resume_url"] = resume_at
    page = render(request, "403_csrf.html", context, status=403)
    page.cookies.update(response.cookies)
    return page
