"""A fresh sign-in before approving (step-up, docs/sign-in.md): approving or rejecting a
proposal or a batch needs an authentication younger than ``STEP_UP_MAX_AGE_SECONDS``.

The session keeps how and when its person last authenticated (``AUTH``): a password typed
here, or the provider's ``auth_time`` (and ``acr``) from the ID token. Older than the limit,
the decision is not taken: what the form carried is kept as a draft and the person is sent to
authenticate again — company sign-in with ``prompt=login`` and ``max_age``, the provider's
``auth_time`` checked on return (and its ``acr`` when ``OIDC_ACR_VALUES`` asks for one); a
console account types its password again — and comes back to the page with the form filled.
"""

import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest

AUTH = "orbit.auth"
STEP_UP = "orbit.stepup"  # the company re-authentication under way: when it was asked


def record_authentication(
    request: HttpRequest, *, method: str, at: float, acr: str | None = None
) -> None:
    request.session[AUTH] = {"method": method, "at": int(at), **({"acr": acr} if acr else {})}


def authentication(request: HttpRequest) -> dict[str, Any] | None:
    """How and when this session's person last authenticated, if the session knows."""
    kept = request.session.get(AUTH)
    return kept if isinstance(kept, dict) else None


def is_fresh(request: HttpRequest) -> bool:
    limit = settings.STEP_UP_MAX_AGE_SECONDS
    if not limit:
        return True
    kept = authentication(request)
    if kept is None:
        return False
    wants_acr = kept.get("method") == "oidc" and settings.OIDC_ACR_VALUES
    if wants_acr and kept.get("acr") not in settings.OIDC_ACR_VALUES.split():
        return False
    return time.time() - float(kept.get("at", 0)) <= limit


def is_company_session(request: HttpRequest) -> bool:
    kept = authentication(request)
    return kept is not None and kept.get("method") == "oidc"


def step_up_params(request: HttpRequest) -> dict[str, str]:
    """The authorization request's extra parameters for a re-authentication under way."""
    if STEP_UP not in request.session:
        return {}
    return {"prompt": "login", "max_age": "0"}


def describe(kept: dict[str, Any] | None) -> str:
    """For the audit record: how and when (UTC, ISO 8601) the person authenticated."""
    if kept is None:
        return "authenticated: unknown"
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(kept.get("at", 0))))
    how = "company sign-in" if kept.get("method") == "oidc" else "password"
    acr = f", acr {kept['acr']}" if kept.get("acr") else ""
    return f"authenticated: {how} at {at}{acr}"
