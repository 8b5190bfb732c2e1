"""Nothing typed is lost when a session ends (docs/console.md, "Sessions and drafts").

A view whose form carries typed text is marked with ``keeps_draft``, naming the page that shows
the form. When its POST arrives without a session (``console_view``), or is refused for its CSRF
token while coming from this very site (``session.csrf_failure``), the fields are kept
(``people/drafts.py``) for the person whose browser it is, and the page, once they have signed
in again by whatever means, gives them back (``take_draft``).

Two cookies, both HttpOnly and ending with the browser or sooner:

- ``orbit_person`` says, signed by the server, who last used the console in this browser: a
  draft is kept for that person only (a session that has ended no longer says who it was).
- ``orbit_draft`` holds a random key naming this browser's drafts; only its SHA-256 is stored.
"""

import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core import signing
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _

from orbit_console.people.drafts import Kept, draft_keep, draft_take, drafts_forget

DRAFT_COOKIE = "orbit_draft"
OWNER_COOKIE = "orbit_person"
_OWNER_SALT = "orbit.console.draft.owner"
# The owner cookie is signed again at most this often (a signature per page is cheap; a cookie
# header on every response is not needed).
_OWNER_REFRESH_SECONDS = 600

ResumeAt = Callable[..., str]


def keeps_draft(resume_at: ResumeAt) -> Callable[[Any], Any]:
    """Mark a view whose POST carries what a person typed: ``resume_at(request, **url_kwargs)``
    is the path of the page that shows the form again. Put it below ``console_view``; the
    decorators above copy the mark (``functools.wraps``), so the CSRF failure page finds it
    from the URL too."""

    def mark(view: Any) -> Any:
        view.orbit_resume_at = resume_at
        return view

    return mark


def resume_page(view: Any, request: HttpRequest, kwargs: dict[str, Any]) -> str | None:
    resume_at: ResumeAt | None = getattr(view, "orbit_resume_at", None)
    return resume_at(request, **kwargs) if resume_at is not None else None


def resume_page_of_path(request: HttpRequest) -> str | None:
    """The page to resume at for a POST to ``request.path`` (the CSRF failure page knows only
    the request)."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return resume_page(match.func, request, match.kwargs)


def same_origin(request: HttpRequest) -> bool:
    """The browser says the form was posted by a page of this site: its ``Origin`` is this
    site's, and its ``Sec-Fetch-Site``, when sent, says ``same-origin``. A draft is never kept
    from a form another site could have made a browser post."""
    origin = request.headers.get("Origin", "")
    if not origin or request.headers.get("Sec-Fetch-Site", "same-origin") != "same-origin":
        return False
    try:
        return origin == f"{request.scheme}://{request.get_host()}"
    except DisallowedHost:
        return False


# --- Who uses this browser ----------------------------------------------------------------------


def owner_id(request: HttpRequest) -> int | None:
    """The person the owner cookie names, if it is this server's and young enough to belong to
    a session that may just have ended."""
    max_age = settings.SESSION_COOKIE_AGE + settings.CONSOLE_DRAFT_MINUTES * 60
    try:
        value = signing.loads(
            request.COOKIES.get(OWNER_COOKIE, ""), salt=_OWNER_SALT, max_age=max_age
        )
    except signing.BadSignature:
        return None
    return value if isinstance(value, int) else None


async def remember_owner(request: HttpRequest, response: HttpResponse, user: User) -> None:
    """After a signed-in person's page: the owner cookie names them (signed again now and
    then), and a browser that another person used before keeps none of that person's drafts."""
    cookie = request.COOKIES.get(OWNER_COOKIE, "")
    try:
        named = signing.loads(cookie, salt=_OWNER_SALT, max_age=_OWNER_REFRESH_SECONDS)
    except signing.BadSignature:
        named = None
    if named == user.pk:
        return
    if owner_id(request) not in (None, user.pk) and request.COOKIES.get(DRAFT_COOKIE):
        await sync_to_async(drafts_forget)(
            browser_key=request.COOKIES[DRAFT_COOKIE], keep_owner=user
        )
    response.set_cookie(
        OWNER_COOKIE,
        signing.dumps(user.pk, salt=_OWNER_SALT),
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


def forget_browser(request: HttpRequest, response: HttpResponse) -> None:
    """Signing out: this browser's drafts and both cookies go."""
    key = request.COOKIES.get(DRAFT_COOKIE)
    if key:
        drafts_forget(browser_key=key)
    response.delete_cookie(DRAFT_COOKIE, samesite="Lax")
    response.delete_cookie(OWNER_COOKIE, samesite="Lax")


# --- Keeping and giving back --------------------------------------------------------------------


def keep_draft(request: HttpRequest, response: HttpResponse, *, resume_at: str, owner: int) -> bool:
    """Keep the POST's fields for ``owner`` in this browser; the draft cookie goes on
    ``response``. ``False`` when nothing could be kept."""
    user = User.objects.filter(pk=owner, is_active=True).first()
    if user is None:
        return False
    key = request.COOKIES.get(DRAFT_COOKIE, "")
    if not 32 <= len(key) <= 64 or not key.isascii():
        key = secrets.token_urlsafe(32)
    fields = [(name, value) for name, values in request.POST.lists() for value in values]
    kept = draft_keep(
        browser_key=key, owner=user, posted_to=request.path, resume_at=resume_at, fields=fields
    )
    if kept:
        response.set_cookie(
            DRAFT_COOKIE,
            key,
            max_age=settings.CONSOLE_DRAFT_MINUTES * 60,
            httponly=True,
            samesite="Lax",
            secure=settings.SESSION_COOKIE_SECURE,
        )
    return kept


async def take_draft(request: HttpRequest) -> Kept | None:
    """The draft this browser kept for this page, if the signed-in person is its owner: given
    back once (the page then holds it)."""
    key = request.COOKIES.get(DRAFT_COOKIE)
    if not key:
        return None
    return await sync_to_async(draft_take)(
        browser_key=key,
        owner=request.user,  # type: ignore[arg-type]
        resume_at=request.path,
    )


# --- Without a session --------------------------------------------------------------------------


def sign_in_again(request: HttpRequest, view: Any, kwargs: dict[str, Any]) -> HttpResponse:
    """A request that came without a valid session. A form with typed text is kept and the
    person signs in to the page that shows it again; a page asks to be signed in to itself; any
    other form, to the page it was sent from. A page of htmx (a live part of a page) is told
    401, so that the page says "signed out" instead of showing the sign-in page inside itself."""
    # Someone used the console in this browser and did not sign out: their session ended
    # (expired, idle, or ended elsewhere). The session cookie itself cannot tell: the first
    # answer without its session deletes it.
    ended = owner_id(request) is not None
    if getattr(request, "htmx", False):
        return HttpResponse(status=401, headers={"Orbit-Session": "ended"})
    if request.method != "POST":
        if ended:
            messages.info(request, _("Your session ended; sign in again to continue."))
        return redirect_to_login(request.get_full_path())
    resume_at = resume_page(view, request, kwargs)
    if resume_at is None:
        if ended:
            messages.info(request, _("Your session ended; sign in again to continue."))
        return redirect_to_login(_page_sent_from(request))
    response = redirect_to_login(resume_at)
    owner = owner_id(request)
    if owner is None or not keep_draft(request, response, resume_at=resume_at, owner=owner):
        messages.warning(
            request,
            _(
                "Your session ended before the form was sent, and what it held could not be "
                "kept. Sign in again to continue."
            ),
        )
    return response


def _page_sent_from(request: HttpRequest) -> str:
    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parts = urlsplit(referer)
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return reverse(settings.LOGIN_REDIRECT_URL)
