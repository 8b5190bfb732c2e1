"""What each of a session's requests to the provider is for (docs/sign-in.md).

Three kinds go to the provider's ``authorization_endpoint``, and their answers come back to the
same callback:

- a **sign-in** (the button on the sign-in page, or ``/signin/oidc``);
- a **step-up** before deciding (``/signin/confirm``): with ``OIDC_STEP_UP=login``,
  ``prompt=login`` and ``max_age=0``, so the provider authenticates the person again whatever
  its own session; with ``auth_time`` (a provider that cannot be asked, Google), an ordinary
  request whose answer says when the person last authenticated there (``stepup.py``);
- a **re-check** without a refresh token (``recheck.py``): ``prompt=none``, so the provider
  answers at once from its own session, or refuses.

A page that wants a step-up or a re-check says so in the session (``ask``) and sends the
browser to ``/signin/oidc``; the request made there takes that purpose and is bound to it by
its ``state``, which the provider hands back. At the callback the purpose is the one of the
request answered (``answered``), not of whatever the session wants now: an answer to an
ordinary sign-in, started earlier and brought back meanwhile, renews no step-up.
"""

import time
from dataclasses import dataclass
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse

SIGN_IN = "sign-in"
STEP_UP = "step-up"
RECHECK = "re-check"

WANTED = "orbit.oidc.wanted"  # the purpose the next request to the provider is for
UNDER_WAY = "orbit.oidc.flows"  # state -> [purpose, when the request was made]
# A person may start a few in several tabs; more than this and the oldest are forgotten (their
# answers then count as sign-ins, which renew nothing).
MAX_UNDER_WAY = 8


@dataclass(frozen=True)
class Flow:
    purpose: str
    asked_at: int  # when the console made the request (Unix seconds)


def ask(request: HttpRequest, purpose: str, *, next_url: str) -> str:
    """The next request to the provider is a ``purpose`` (``STEP_UP`` or ``RECHECK``): where to
    send the browser for it, back to ``next_url`` afterwards."""
    request.session[WANTED] = purpose
    return f"{reverse('signin:oidc_start')}?{urlencode({'next': next_url})}"


def wanted(request: HttpRequest) -> str:
    """The purpose of the request about to be made (once: the next one is a sign-in again). A
    step-up or a re-check is only for a signed-in person."""
    purpose = request.session.pop(WANTED, SIGN_IN)
    if not request.user.is_authenticated or purpose not in (STEP_UP, RECHECK):
        return SIGN_IN
    return str(purpose)


def params(purpose: str) -> dict[str, str]:
    """The authorization request's parameters for ``purpose``."""
    if purpose == STEP_UP and settings.OIDC_STEP_UP == "login":
        return {"prompt": "login", "max_age": "0"}
    if purpose == RECHECK:
        return {"prompt": "none"}
    return {}


def made(request: HttpRequest, *, state: str, purpose: str) -> None:
    """The request with ``state`` was made now, for ``purpose``."""
    under_way = dict(request.session.get(UNDER_WAY) or {})
    under_way[state] = [purpose, int(time.time())]
    request.session[UNDER_WAY] = dict(list(under_way.items())[-MAX_UNDER_WAY:])


def answered(request: HttpRequest, state: str) -> Flow:
    """The request the provider answered (by its ``state``), forgotten now: each is answered
    once. One the session does not know counts as a sign-in."""
    under_way = request.session.get(UNDER_WAY)
    if not isinstance(under_way, dict) or state not in under_way:
        return Flow(SIGN_IN, 0)  # and a browser without a session is given none
    found = under_way.pop(state)
    request.session[UNDER_WAY] = under_way
    return Flow(str(found[0]), int(found[1]))
