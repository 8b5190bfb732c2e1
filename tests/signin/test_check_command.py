"""``manage.py signin check`` (issue 40 item 4): asked of the suite's real provider, in the shape
of each documented provider, it says what will fail with the settings as they are — and that
nothing will with the worked example as written."""

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from orbit_console.signin import provider as signin_provider
from tests.signin.conftest import Company
from tests.support.oidc_signin import CALLBACK

pytestmark = pytest.mark.system_extra

Shaped = Callable[[str], tuple[Company, dict[str, str]]]


@pytest.fixture(autouse=True)
def _console_address(settings: Any) -> None:
    settings.CONSOLE_BASE_URL = CALLBACK.removesuffix("/signin/oidc/callback")


def signin_check() -> tuple[int, list[str]]:
    out = StringIO()
    try:
        call_command("signin", "check", stdout=out)
        status = 0
    except SystemExit as exited:
        status = int(exited.code or 0)
    return status, out.getvalue().splitlines()


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("FAIL")]


def test_a_documented_example_as_written_passes_and_its_logout_is_said(shaped: Shaped) -> None:
    shaped("okta")
    status, lines = signin_check()
    assert status == 0, lines
    assert failures(lines) == []
    text = "\n".join(lines)
    assert "ok    the issuer is exactly OIDC_ISSUER" in text
    assert "ok    keys: 1 of the provider's 1 verify RS256" in text
    assert "ok    the token endpoint accepts OIDC_CLIENT_ID and OIDC_CLIENT_SECRET" in text
    assert "ok    the sign-in request is accepted" in text
    assert "ok    the step-up request (prompt=login, max_age=0) is accepted" in text
    assert "note  no back-channel logout: a person removed at the provider loses access" in text
    assert lines[-1] == "company sign-in: nothing will fail"


def test_what_will_fail_is_printed_with_what_to_change(
    shaped: Shaped, settings: Any, world: dict[str, Any]
) -> None:
    from orbit_console.ledger.lifecycle import namespace_create
    from orbit_console.signin.rules import parse_rules

    shaped("okta")
    settings.OIDC_RP_SCOPES = "openid profile email groups offline_access"  # the old example
    settings.OIDC_RP_CLIENT_SECRET = "not the secret"
    shared = f"twice-{world['namespace_id'][:6]}"
    namespace_create(name=shared)
    namespace_create(name=shared)
    settings.OIDC_ROLE_RULES = parse_rules(
        f'[{{"value": "orbit-ops", "roles": ["operator"], "namespaces": ["{shared}"]}}]'
    )
    status, lines = signin_check()
    assert status == 1
    assert failures(lines) == [
        "FAIL  the token endpoint refuses OIDC_CLIENT_ID 'orbit-console-in-process' with "
        "OIDC_CLIENT_SECRET (invalid_client): check both at the provider",
        "FAIL  the sign-in request is refused: invalid_scope "
        "'The requested scope is invalid: groups'",
        "FAIL  the step-up request (prompt=login, max_age=0) is refused: invalid_scope "
        "'The requested scope is invalid: groups'",
        f"FAIL  OIDC_ROLE_RULES rule 1: several namespaces are named {shared!r} "
        f"({', '.join(sorted(ids_named(shared)))}): pass the id of one",
    ]
    assert lines[-1] == "4 check(s) will fail: company sign-in will not work as set"


def ids_named(name: str) -> list[str]:
    from orbit_console.ledger.models import Namespace

    return list(Namespace.objects.filter(name=name).values_list("id", flat=True))


def test_google_refusing_prompt_login_and_an_issuer_without_its_slash_are_caught(
    shaped: Shaped, settings: Any
) -> None:
    shaped("google")
    settings.OIDC_STEP_UP = "login"
    status, lines = signin_check()
    assert status == 1
    assert failures(lines) == [
        "FAIL  the step-up request (prompt=login, max_age=0) is refused: invalid_request "
        "'Invalid parameter value for prompt: Invalid prompt: login'"
    ]
    settings.OIDC_STEP_UP = "auth_time"
    assert signin_check()[0] == 0

    me, _ = shaped("auth0")
    settings.OIDC_ISSUER = me.idp.issuer.rstrip("/")  # as docs said before issue 40
    signin_provider._cached = None
    status, lines = signin_check()
    assert status == 1
    assert failures(lines) == [
        f"FAIL  the provider's issuer is {me.idp.issuer!r} and OIDC_ISSUER is "
        f"{me.idp.issuer.rstrip('/')!r}: issuers are compared as exact strings, a final '/' "
        f"included: set OIDC_ISSUER={me.idp.issuer}"
    ]


def test_company_sign_in_off_or_a_provider_away_is_a_failure(settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    assert signin_check() == (
        1,
        [
            "FAIL  OIDC_ISSUER is not set: company sign-in is off",
            "1 check(s) will fail: company sign-in will not work as set",
        ],
    )
    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # nothing listens there
    status, lines = signin_check()
    assert status == 1
    assert lines[0].startswith("FAIL  the discovery document: http://127.0.0.1:9/.well-known")


def test_a_client_secret_sent_the_way_the_provider_does_not_take_is_caught(
    providers: Callable[..., Any], company: Callable[..., Company], settings: Any
) -> None:
    """An application that takes its secret in an HTTP Basic header only (Okta's default):
    the console set to send it in the body is told so, twice, before anyone signs in."""
    company(providers(client_auth="client_secret_basic"))
    settings.OIDC_TOKEN_AUTH_METHOD = "client_secret_post"
    status, lines = signin_check()
    assert status == 1
    assert [line.split(" (")[0] for line in failures(lines)] == [
        "FAIL  the token endpoint refuses OIDC_CLIENT_ID 'orbit-console-in-process' with "
        "OIDC_CLIENT_SECRET",
        "FAIL  the provider does not list client_secret_post",
    ]
    settings.OIDC_TOKEN_AUTH_METHOD = "client_secret_basic"
    status, lines = signin_check()
    assert failures(lines) == [], lines
