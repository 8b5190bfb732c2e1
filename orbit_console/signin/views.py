"""Company sign-in's pages: the start (to the provider), the callback (back from it), and what a
person sees when it does not let them in."""

import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from orbit_console.lib.ids import is_id
from orbit_console.ops.sessions import sessions_of_user
from orbit_console.ops.sockets import end_sessions
from orbit_console.people.accounts import (
    LinkRefused,
    account_unlink,
    accounts_link,
    linked_accounts,
    mark_company,
)
from orbit_console.people.models import Account
from orbit_console.signin import confirmations, flows, provider, refusals, session
from orbit_console.signin.backends import HELD, MISCONFIGURED, REFUSED
from orbit_console.signin.logout import (
    LogoutTokenRefused,
    backchannel_logout,
    person_sessions_end,
    verify_logout_token,
)
from orbit_console.signin.models import HeldSignin, OidcIdentity
from orbit_console.signin.services import held_signin_decide
from orbit_console.signin.stepup import is_company_session, record_authentication, step_up_refusal

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
        except provider.ProviderUnavailable as unavailable:
            log.warning("company sign-in unavailable: %s", unavailable)
            return render(request, "signin/unavailable.html", status=503)
        self.purpose = flows.wanted(request)
        response: HttpResponse = super().get(request)
        [state] = parse_qs(urlparse(response["Location"]).query)["state"]
        flows.made(request, state=state, purpose=self.purpose)
        return response

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        return session.extra_auth_params(self.purpose)


class OidcCallback(OIDCAuthenticationCallbackView):
    """``GET /signin/oidc/callback``: the provider sends the browser back with a code."""

    get_settings = staticmethod(provider.library_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        # Which of the session's requests this answers (flows.py), and what to end if it
        # is a re-check refused: read before the library reloads or flushes the session.
        self.flow = flows.answered(request, request.GET.get("state", ""))
        self.session_key = request.session.session_key
        self.next_url = request.session.get("oidc_login_next") or "/"
        if "error" in request.GET:
            return self.provider_refused()
        try:
            response: HttpResponse = super().get(request)
        except SuspiciousOperation:  # a state this browser did not start: the page, not a 400
            return self.login_failure()
        return response

    def provider_refused(self) -> HttpResponse:
        """The provider answered with an error (RFC 6749 4.1.2.1, OpenID Connect Core
        3.1.2.6) instead of a code: logged with its ``error`` and ``error_description``
        under a reference the page gives the person. Nobody is signed out by it — except a
        re-check refused, which is what a re-check is for: a link to the callback with an
        error, which anyone can make, ends no session."""
        request = self.request
        refusal = refusals.of(request.GET)
        states = request.session.get("oidc_states")
        if isinstance(states, dict) and states.pop(request.GET.get("state", ""), None):
            request.session.modified = True  # answered: never again
        level = logging.INFO if self.flow.purpose == flows.RECHECK else logging.WARNING
        log.log(
            level, "company sign-in refused by the provider (%s): %s", self.flow.purpose, refusal
        )
        if self.flow.purpose == flows.RECHECK:
            return self.recheck_refused()
        context = {
            "provider_name": provider.display_name(),
            "refusal": refusal,
            "next": self.next_url if self.flow.purpose == flows.STEP_UP else "/",
        }
        return render(request, "signin/provider_refused.html", context, status=403)

    def login_failure(self) -> HttpResponse:
        if self.flow.purpose == flows.RECHECK:
            return self.recheck_refused()
        outcome = getattr(self.request, "oidc_outcome", None)
        if outcome == REFUSED:
            context = {"provider_name": provider.display_name()}
            return render(self.request, "signin/refused.html", context, status=403)
        if outcome == MISCONFIGURED:
            return render(self.request, "signin/unavailable.html", status=503)
        if outcome == HELD:
            context = {
                "provider_name": provider.display_name(),
                "held_id": getattr(self.request, "oidc_held", ""),
            }
            return render(self.request, "signin/held.html", context, status=403)
        # A browser signed in already (an answer opened again, a step-up refused) still is.
        failed: dict[str, Any] = {
            "provider_name": provider.display_name(),
            "step_up": self.flow.purpose == flows.STEP_UP,
            "sign_in_there_again": settings.OIDC_STEP_UP == "auth_time",
            "next": self.next_url,
        }
        return render(self.request, "signin/failed.html", failed, status=400)

    def login_success(self) -> HttpResponse:
        info = getattr(self.request, "oidc_signin", {})
        same_person = self.user == self.request.user
        if self.flow.purpose == flows.RECHECK:
            if not same_person:  # the provider's session is someone else's now
                return self.recheck_refused()
            session.remember_recheck(self.request, info)
            return HttpResponseRedirect(self.success_url)
        if self.flow.purpose == flows.STEP_UP:
            # The same person, authenticated at the provider since the console asked.
            refused = "another person" if not same_person else None
            refused = refused or step_up_refusal(
                auth_time=info.get("auth_time"), acr=info.get("acr"), asked_at=self.flow.asked_at
            )
            if refused:
                log.warning("step-up refused: %s", refused)
                return self.login_failure()
        response: HttpResponse = super().login_success()
        session.remember_signin(self.request, info)
        return response

    def recheck_refused(self) -> HttpResponse:
        """The provider no longer admits the person (their session there ended, they were
        disabled, no rule admits their groups): signed out here, sockets too. A form they
        were sending is kept (it was, before the round trip) for when they sign in again."""
        logout(self.request)
        end_sessions([self.session_key or ""])
        log.info("company sign-in re-check refused: signed out")
        messages.warning(
            self.request,
            _("%(provider)s no longer confirms your sign-in. Sign in again to continue.")
            % {"provider": provider.display_name()},
        )
        return redirect_to_login(self.next_url)


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
        return redirect(flows.ask(request, flows.STEP_UP, next_url=next_url))
    user = request.user
    assert isinstance(user, User)  # noqa: S101 -- login_required
    # The person's own throttle, not django-axes' (which counts by address): confirmations.py.
    error, until = "", confirmations.locked_until(user)
    if request.method == "POST":
        done = confirmations.stepup_confirm(user=user, password=request.POST.get("password", ""))
        if done.outcome == confirmations.CONFIRMED:
            record_authentication(request, method="password", at=time.time())
            return redirect(next_url)
        error, until = done.outcome, done.locked_until
    if until is not None:
        error = confirmations.LOCKED
    context = {"next": next_url, "error": error, "locked_until": until}
    return render(request, "signin/confirm.html", context, status=429 if until else 200)


def _administrator(request: HttpRequest) -> None:
    """The console's administrators are Django's superusers (``manage.py createsuperuser``):
    the people who run ``manage.py console`` may also act here."""
    if not request.user.is_authenticated or not request.user.is_superuser:
        raise PermissionDenied


@login_required
@never_cache
def person_page(request: HttpRequest, username: str) -> HttpResponse:
    """``GET /people/NAME`` (administrators): who the person is, which accounts are theirs, the
    company sign-ins held because they match this account, and ending their sessions."""
    _administrator(request)
    person = get_object_or_404(User, username=username)
    identity = OidcIdentity.objects.filter(user=person).first()
    linked = linked_accounts(person)
    mark_company([person, *(account.user for account in linked)])
    context = {
        "person": person,
        "roles": sorted(person.groups.values_list("name", flat=True)),
        "identity": identity,
        "sessions": len(sessions_of_user(person.pk)),
        "linked": linked,
        "own": Account.objects.filter(user=person).first(),
        "held": HeldSignin.objects.filter(matches=person).order_by("created_at"),
    }
    return render(request, "signin/person.html", context)


@login_required
@require_POST
def person_link(request: HttpRequest, username: str) -> HttpResponse:
    """``POST /people/NAME/link`` (administrators): NAME and the account named ``other`` are
    one person (as ``manage.py console link NAME OTHER``); ``unlink``: NAME is a person of its
    own again."""
    _administrator(request)
    person = get_object_or_404(User, username=username)
    by = request.user.get_username()
    try:
        if request.POST.get("unlink"):
            account_unlink(user=person)
            messages.success(request, _("%(name)s is a person of its own again.") % _name(person))
        else:
            wanted = request.POST.get("other", "")[:150]
            other = User.objects.filter(username=wanted).first()
            if other is None:
                raise LinkRefused(_("No account has that name, exactly."))
            accounts_link(user=person, other=other, how=Account.ADMINISTRATOR, by=by)
            messages.success(
                request,
                _("%(name)s and %(other)s are one person: neither decides what the other proposes.")
                % {**_name(person), "other": other.get_username()},
            )
    except LinkRefused as refused:
        messages.error(request, str(refused))
    return redirect("signin:person", username=person.get_username())


@login_required
@require_POST
def person_held(request: HttpRequest, username: str, held_id: str) -> HttpResponse:
    """``POST /people/NAME/held/ID`` (administrators): decide a company sign-in held because it
    matches NAME — ``same`` (NAME's person: its account is made and linked) or ``apart``
    (someone else: its account is made, a person of its own)."""
    _administrator(request)
    person = get_object_or_404(User, username=username)
    decision = request.POST.get("decision")
    held = HeldSignin.objects.filter(id=held_id, matches=person).first() if is_id(held_id) else None
    if held is None or decision not in ("same", "apart"):
        raise Http404("no such held sign-in")
    made = held_signin_decide(
        held_id=held.id,
        same_as=person if decision == "same" else None,
        by=request.user.get_username(),
    )
    messages.success(
        request,
        _("Made %(made)s, a company account; its roles come from its groups when it signs in.")
        % {"made": made.get_username()},
    )
    return redirect("signin:person", username=person.get_username())


def _name(user: User) -> dict[str, str]:
    return {"name": user.get_username()}


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
