"""The step-up before a decision (``signin/stepup.py``): a decision POSTed with an
authentication too old is not taken; what it carried is kept as a draft for the same person in
this browser, and they are sent to authenticate again and back to the page it came from, with
the form filled again (views/drafts.py)."""

from datetime import UTC, datetime
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from orbit_console.console.views.drafts import keep_draft
from orbit_console.decisions.submissions import Authenticated
from orbit_console.signin.stepup import authentication, is_fresh


async def step_up_detour(request: HttpRequest, *, resume_at: str) -> HttpResponse | None:
    """``None`` when the person's authentication is fresh enough to decide; else the detour."""
    if await sync_to_async(is_fresh)(request):
        return None
    confirm = f"{reverse('signin:confirm')}?{urlencode({'next': resume_at})}"
    response = HttpResponseRedirect(confirm, status=303)
    user_id = request.user.pk
    if user_id is not None:
        await sync_to_async(keep_draft)(request, response, resume_at=resume_at, owner=user_id)
    return response


async def authenticated_of(request: HttpRequest) -> Authenticated | None:
    """How and when the person last authenticated, for the audit record of their decision;
    None when nobody said when (a provider's ID token without ``auth_time``, step-up off)."""
    kept = await sync_to_async(authentication)(request)
    if kept is None or kept.get("at") is None:
        return None
    how = "oidc" if kept.get("method") == "oidc" else "password"
    if kept.get("acr"):
        how += f" acr={str(kept['acr'])[:100]}"
    return Authenticated(how=how, at=datetime.fromtimestamp(float(kept["at"]), UTC))
