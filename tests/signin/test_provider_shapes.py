"""The worked examples of docs/sign-in.md work as written (issue 40 item 3), in-process against
the suite's provider shaped as each provider is (``tests/support/oidc_shapes.py``): groups in
another claim read by rules that name none, a scope the provider does not have refused there,
and step-up where the provider takes no ``prompt=login`` (Google). Every shape also signs in
and steps up in Chromium (``tests/browser/test_oidc_shapes.py``)."""

import json
import logging
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from orbit_console.decisions.models import Proposal
from orbit_console.signin.rules import parse_rules
from orbit_console.signin.stepup import AUTH, is_fresh, step_up_refusal
from tests.approvals.conftest import pending_retry
from tests.signin.conftest import Company
from tests.support.people import make_person

pytestmark = pytest.mark.system_extra

Shaped = Callable[[str], tuple[Company, dict[str, str]]]


def roles_of(me: Company) -> set[str]:
    return set(me.user.groups.values_list("name", flat=True))


def a_proposal(world: dict[str, Any]) -> tuple[Proposal, str]:
    proposal = pending_retry(world, make_person(world, "operator"))
    return proposal, f"/proposals/{proposal.id}"


def test_groups_in_another_claim_are_read_by_rules_that_name_no_claim(shaped: Shaped) -> None:
    """Entra ID's app roles arrive in ``roles``; the example sets ``OIDC_GROUPS_CLAIM=roles``
    and its rules name no claim. Before, a rule without a claim read ``groups`` whatever
    ``OIDC_GROUPS_CLAIM`` said, and everyone was refused."""
    me, env = shaped("entra")
    assert env["OIDC_GROUPS_CLAIM"] == "roles"
    assert all("claim" not in rule for rule in json.loads(env["OIDC_ROLE_RULES"]))
    me.sign_in()
    assert roles_of(me) == {"supervisor", "operator"}

    me.idp.set_account(me.login, groups=["Orbit.Operator"])  # the app role changed
    me.console.logout()
    me.sign_in()
    assert roles_of(me) == {"operator"}


def test_a_scope_the_provider_does_not_have_is_refused_there_and_the_page_and_log_say_so(
    shaped: Shaped, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Okta's ``/oauth2/default`` has no ``groups`` scope and refuses one (``invalid_scope``),
    as the old example asked for it. The provider's answer is logged with its ``error`` and
    ``error_description``; the person reads that the provider refused and whom to ask, with
    the reference the log has (issue 40 item 4). The example as written now signs in."""
    me, env = shaped("okta")
    assert "groups" not in env["OIDC_SCOPES"].split()
    settings.OIDC_RP_SCOPES = "openid profile email groups offline_access"  # the old example
    with caplog.at_level(logging.WARNING, logger="orbit_console.signin.views"):
        answer = me.come_back(me.start())
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "Okta refused the sign-in" in page
    assert 'data-kind="settings"' in page and "administrator to fix" in page
    assert 'id="refusal-error">invalid_scope<' in page
    assert "You are not signed in." in page
    [logged] = [
        r.getMessage() for r in caplog.records if "refused by the provider" in r.getMessage()
    ]
    assert "error='invalid_scope'" in logged
    assert "error_description='The requested scope is invalid: groups'" in logged
    assert answer.context["refusal"].reference in logged
    assert me.console.get("/").status_code == 302  # nobody signed in

    settings.OIDC_RP_SCOPES = env["OIDC_SCOPES"]
    me.sign_in()
    assert roles_of(me) == {"supervisor", "operator"}


def test_google_takes_no_prompt_login_so_its_example_steps_up_by_its_auth_time(
    shaped: Shaped, settings: Any, world: dict[str, Any]
) -> None:
    """Google refuses ``prompt=login``: a step-up asking for it came back as an error, and the
    supervisor could never decide. The example's ``OIDC_STEP_UP=auth_time`` asks with no
    prompt and takes Google's ``auth_time`` (session age claims) when younger than
    ``STEP_UP_MAX_AGE_SECONDS``."""
    me, env = shaped("google")
    assert env["OIDC_STEP_UP"] == "auth_time"
    # Deciding takes a supervisor; the example's rule admits the domain as auditors.
    [rule] = json.loads(env["OIDC_ROLE_RULES"])
    rule.update(roles=["supervisor", "operator"], namespaces=[world["namespace_id"]])
    settings.OIDC_ROLE_RULES = parse_rules(json.dumps([rule]))
    me.sign_in()
    proposal, page = a_proposal(world)
    session = me.console.session
    session[AUTH] = {**session[AUTH], "at": session[AUTH]["at"] - 3600}  # an hour ago
    session.save()

    settings.OIDC_STEP_UP = "login"  # as the example said before
    refused = me.come_back(me.step_up_request(page))
    assert me.asked["prompt"] == "login"
    assert refused.status_code == 403
    assert "You are still signed in as" in refused.content.decode()
    assert refused.context["refusal"].error == "invalid_request"
    proposal.refresh_from_db()
    assert proposal.is_pending

    settings.OIDC_STEP_UP = "auth_time"
    back = me.come_back(me.step_up_request(page))
    assert "prompt" not in me.asked and "max_age" not in me.asked
    assert not me.at_provider.asked_to_sign_in  # Google is not asked to ask again
    assert back.status_code == 302 and back["Location"] == page
    answer = me.console.post(f"{page}/reject", {"reason": "The evidence names another task"})
    assert answer["Location"] == page
    proposal.refresh_from_db()
    assert proposal.state == "rejected"


def test_with_auth_time_step_up_an_old_sign_in_at_the_provider_renews_nothing(
    settings: Any,
) -> None:
    settings.OIDC_STEP_UP = "auth_time"
    settings.STEP_UP_MAX_AGE_SECONDS = 600
    now = int(time.time())
    assert step_up_refusal(auth_time=now - 60, acr=None, asked_at=now) is None
    refused = step_up_refusal(auth_time=now - 601, acr=None, asked_at=now)
    assert refused is not None and "sign in there again" in refused
    assert step_up_refusal(auth_time=None, acr=None, asked_at=now) is not None


def test_step_up_off_spares_company_sessions_only(settings: Any) -> None:
    settings.OIDC_STEP_UP = "off"
    settings.STEP_UP_MAX_AGE_SECONDS = 600
    company = SimpleNamespace(session={AUTH: {"method": "oidc", "at": None}})
    console = SimpleNamespace(session={AUTH: {"method": "password", "at": time.time() - 700}})
    assert is_fresh(company)  # type: ignore[arg-type]
    assert not is_fresh(console)  # type: ignore[arg-type]


def test_oidc_step_up_takes_one_of_its_ways_or_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from orbit_console.lib.env import env_choice

    ways = ("login", "auth_time", "off")
    monkeypatch.delenv("OIDC_STEP_UP", raising=False)
    assert env_choice("OIDC_STEP_UP", "login", ways) == "login"
    monkeypatch.setenv("OIDC_STEP_UP", "auth_time")
    assert env_choice("OIDC_STEP_UP", "login", ways) == "auth_time"
    monkeypatch.setenv("OIDC_STEP_UP", "max_age")
    with pytest.raises(ImproperlyConfigured, match="OIDC_STEP_UP must be one of login"):
        env_choice("OIDC_STEP_UP", "login", ways)
