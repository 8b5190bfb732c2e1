"""A fresh sign-in before approving (step-up, docs/sign-in.md): approving or rejecting a
proposal or a batch needs an authentication younger than ``STEP_UP_MAX_AGE_SECONDS``.

The session keeps how and when its person last authenticated (``AUTH``): a password typed
here, or the provider's ``auth_time`` (and ``acr``) from the ID token — only ``auth_time``: an
ID token without one leaves the time unknown, and an unknown time is never fresh. Older than
the limit, the decision is not taken: what the form carried is kept as a draft and the person
is sent to authenticate again — company sign-in with ``prompt=login`` and ``max_age=0``
(``flows.py``), renewed only by the answer to that very request, with an ``auth_time`` later
than it (and an ``acr`` of ``OIDC_ACR_VALUES`` when set); a console account types its password
again — and comes back to the page with the form filled.

``OIDC_STEP_UP`` says how a company session steps up, for providers that cannot do the above
(docs/sign-in.md): ``auth_time`` — Google offers no ``prompt=login`` — takes the provider's
``auth_time`` from the answer to the step-up request as it is, fresh when younger than the
limit (the person signs in at the provider again to make it so); ``off`` asks nothing of
company sessions.
"""

import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest

AUTH = "orbit.auth"


def record_authentication(
    request: HttpRequest, *, method: str, at: float | None, acr: str | None = None
) -> None:
    """``at`` None: the person authenticated, but nobody said when (never fresh)."""
    when = None if at is None else int(at)
    request.session[AUTH] = {"method": method, "at": when, **({"acr": acr} if acr else {})}


def step_up_refusal(*, auth_time: int | None, acr: Any, asked_at: int) -> str | None:
    """Why the answer to a step-up request made at ``asked_at`` renews nothing, if it does
    not: the provider must say it authenticated the person since (``auth_time``) — or, with
    ``OIDC_STEP_UP=auth_time``, within ``STEP_UP_MAX_AGE_SECONDS`` — with the strength asked
    for (``acr``)."""
    if auth_time is None:
        return "the ID token has no auth_time"
    if settings.OIDC_STEP_UP == "auth_time":
        if time.time() - auth_time > settings.STEP_UP_MAX_AGE_SECONDS:
            return (
                "the provider last authenticated the person longer ago than "
                "STEP_UP_MAX_AGE_SECONDS (OIDC_STEP_UP=auth_time: they sign in there again)"
            )
    elif auth_time < asked_at:
        return "the provider did not authenticate the person again (auth_time before the request)"
    if settings.OIDC_ACR_VALUES and acr not in settings.OIDC_ACR_VALUES.split():
        return "the ID token's acr is not one of OIDC_ACR_VALUES"
    return None


def authentication(request: HttpRequest) -> dict[str, Any] | None:
    """How and when this session's person last authenticated, if the session knows."""
    kept = request.session.get(AUTH)
    return kept if isinstance(kept, dict) else None


def is_fresh(request: HttpRequest) -> bool:
    limit = settings.STEP_UP_MAX_AGE_SECONDS
    if not limit:
        return True
    kept = authentication(request)
    if kept is not None and kept.get("method") == "oidc" and settings.OIDC_STEP_UP == "off":
        return True
    if kept is None or kept.get("at") is None:
        return False
    wants_acr = kept.get("method") == "oidc" and settings.OIDC_ACR_VALUES
    if wants_acr and kept.get("acr") not in settings.OIDC_ACR_VALUES.split():
        return False
    return time.time() - float(kept.get("at", 0)) <= limit


def is_company_session(request: HttpRequest) -> bool:
    kept = authentication(request)
    return kept is not None and kept.get("method") == "oidc"
