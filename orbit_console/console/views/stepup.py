"""Before a decision (``signin/stepup.py``, ``signin/recheck.py``): a decision POSTed with an
authentication too old, or by a company person whom the provider was last asked about more
than ``OIDC_DECISION_RECHECK_SECONDS`` ago, is not taken at once. The provider is asked again
(with the refresh token, right here; without one, through the browser); what the form carried
is kept as a draft for the same person in this browser whenever they are sent elsewhere, and
the page they come back to has the form filled again (views/drafts.py)."""

from datetime import UTC, datetime
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext as _

from orbit_console.console.views.drafts import keep_draft
from orbit_console.decisions.submissions import Authenticated
from orbit_console.signin import provider
from orbit_console.signin.recheck import Checked, recheck, round_trip
from orbit_console.signin.stepup import authentication, is_fresh


def _detour(request: HttpRequest, *, resume_at: str) -> HttpResponse | None:
    if not is_fresh(request):
        confirm = f"{reverse('signin:confirm')}?{urlencode({'next': resume_at})}"
        return HttpResponseRedirect(confirm, status=303)
    checked = recheck(request, max_age=settings.OIDC_DECISION_RECHECK_SECONDS)
    if checked is Checked.CURRENT:
        return None
    if checked is Checked.ROUND_TRIP:
        messages.info(
            request,
            _(
                "Nothing was decided yet: %(provider)s confirmed your sign-in first. Send the "
                "form again to decide."
            )
            % {"provider": provider.display_name()},
        )
        return HttpResponseRedirect(round_trip(request, next_url=resume_at), status=303)
    if checked is Checked.UNANSWERED:
        messages.error(
            request,
            _("%(provider)s did not answer, so nothing was decided. Try again in a moment.")
            % {"provider": provider.display_name()},
        )
        return HttpResponseRedirect(resume_at, status=303)
    # Signed out: the provider no longer admits them.
    messages.warning(
        request,
        _("%(provider)s no longer confirms your sign-in. Sign in again to continue.")
        % {"provider": provider.display_name()},
    )
    signed_out = redirect_to_login(resume_at)
    signed_out.status_code = 303
    return signed_out


async def step_up_detour(request: HttpRequest, *, resume_at: str) -> HttpResponse | None:
    """``None`` when the person may decide now; else where to go first, the form kept."""
    user_id = request.user.pk
    response = await sync_to_async(_detour)(request, resume_at=resume_at)
    if response is not None and user_id is not None:
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
