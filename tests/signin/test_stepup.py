"""Step-up with company sign-in (issue 39 item 1), against the suite's real provider with its
login session still open, as a browser keeps it.

Freshness comes only from the ID token's ``auth_time``; a token without one is never fresh; only
the re-authentication the console asked for (``prompt=login`` and ``max_age=0``, answered with
an ``auth_time`` later than the request, and an ``acr`` of ``OIDC_ACR_VALUES`` when set) renews
step-up; an ordinary sign-in never makes a session fresher than its ``auth_time``.
"""

import time
from collections.abc import Callable
from typing import Any

import pytest

from orbit_console.decisions.models import ConsoleEvent, Proposal
from orbit_console.signin.stepup import AUTH, step_up_refusal
from tests.approvals.conftest import pending_retry
from tests.signin.conftest import LIKE_GOOGLE, LIKE_OKTA, Company
from tests.support.oidc import OidcProvider
from tests.support.people import make_person

pytestmark = pytest.mark.system_extra


def a_proposal(world: dict[str, Any]) -> tuple[Proposal, str]:
    proposal = pending_retry(world, make_person(world, "operator"))
    return proposal, f"/proposals/{proposal.id}"


REASON = "The evidence names another task"


def reject(me: Company, page: str) -> Any:
    return me.console.post(f"{page}/reject", {"reason": REASON})


def test_a_silent_sign_in_without_auth_time_never_makes_the_session_fresh(
    providers: Callable[..., OidcProvider],
    company: Callable[[OidcProvider], Company],
    world: dict[str, Any],
) -> None:
    """``GET /signin/oidc`` rides the provider's open session without a sign-in form; its ID
    token has no ``auth_time`` (none was asked with ``max_age``). Before: its ``iat`` was taken
    as the moment of authentication, and the supervisor decided with no sign-in at all."""
    me = company(providers(**LIKE_GOOGLE))  # auth_time only when max_age is asked
    me.sign_in()
    assert me.at_provider.asked_to_sign_in
    proposal, page = a_proposal(world)

    me.sign_in(next_path=page)  # back through the provider, asked nothing
    assert not me.at_provider.asked_to_sign_in
    answer = reject(me, page)
    assert answer.status_code == 303
    assert answer["Location"].startswith("/signin/confirm")
    proposal.refresh_from_db()
    assert proposal.is_pending
    assert me.console.session[AUTH] == {"method": "oidc", "at": None}


def test_only_the_re_authentication_the_console_asked_for_renews_step_up(
    providers: Callable[..., OidcProvider],
    company: Callable[[OidcProvider], Company],
    world: dict[str, Any],
) -> None:
    """The step-up's answer is bound to its own authorization request (its ``state``): an
    ordinary request started earlier and answered meanwhile renews nothing, even while a
    step-up is under way."""
    me = company(providers(**LIKE_GOOGLE))
    me.sign_in()
    proposal, page = a_proposal(world)
    ordinary = me.start(next=page)
    asked_at = int(time.time())
    step_up = me.step_up_request(page)
    assert (me.asked["prompt"], me.asked["max_age"]) == ("login", "0")

    me.come_back(ordinary)
    assert not me.at_provider.asked_to_sign_in
    assert reject(me, page)["Location"].startswith("/signin/confirm")

    answer = me.come_back(step_up)
    assert me.at_provider.asked_to_sign_in  # whatever its own session: prompt=login
    assert answer["Location"] == page
    assert reject(me, page)["Location"] == page
    proposal.refresh_from_db()
    assert proposal.state == "rejected"
    event = ConsoleEvent.objects.get(proposal=proposal, kind="proposal.rejected")
    assert event.authenticated_how == "oidc"
    assert event.authenticated_at is not None
    assert asked_at <= event.authenticated_at.timestamp() <= time.time()


def test_an_ordinary_sign_in_is_never_fresher_than_its_auth_time(
    providers: Callable[..., OidcProvider], company: Callable[[OidcProvider], Company]
) -> None:
    """A provider that always sends ``auth_time`` (Okta, Keycloak): the sign-in where the
    password was typed counts from that moment, and a later silent one from that same
    moment, not from when its token was issued."""
    me = company(providers(**LIKE_OKTA))
    me.sign_in()
    typed_at = me.console.session[AUTH]["at"]
    assert typed_at is not None
    time.sleep(1.05 - time.time() % 1)  # the next second: a later iat
    me.sign_in()
    assert not me.at_provider.asked_to_sign_in
    assert me.console.session[AUTH]["at"] == typed_at < int(time.time())


def test_a_step_up_without_an_acr_of_oidc_acr_values_renews_nothing(
    providers: Callable[..., OidcProvider],
    company: Callable[[OidcProvider], Company],
    world: dict[str, Any],
    settings: Any,
) -> None:
    """``OIDC_ACR_VALUES`` asks the provider for a strength (MFA, say); the suite's provider
    signs in with a password only and names no ``acr``: the step-up is refused at its return,
    not left to ask again and again."""
    me = company(providers(**LIKE_GOOGLE))
    me.sign_in()
    settings.OIDC_ACR_VALUES = "urn:orbit:mfa"
    _, page = a_proposal(world)
    step_up = me.step_up_request(page)
    assert me.asked["acr_values"] == "urn:orbit:mfa"
    answer = me.come_back(step_up)
    assert answer.status_code == 400
    assert b"signin-failed" in answer.content
    assert reject(me, page)["Location"].startswith("/signin/confirm")


def test_a_step_up_answer_renews_only_with_an_auth_time_since_the_request(settings: Any) -> None:
    """What the suite's provider never sends, but a provider could: an answer to the step-up
    without ``auth_time`` (against Core 3.1.2.1, ``max_age`` was asked), or with the time of
    an earlier sign-in (``prompt=login`` ignored)."""
    settings.OIDC_ACR_VALUES = ""
    asked_at = int(time.time())
    assert step_up_refusal(auth_time=None, acr=None, asked_at=asked_at) is not None
    assert step_up_refusal(auth_time=asked_at - 1, acr=None, asked_at=asked_at) is not None
    assert step_up_refusal(auth_time=asked_at, acr=None, asked_at=asked_at) is None
