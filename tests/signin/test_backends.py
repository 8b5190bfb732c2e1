"""The issuer (issue 40 item 1): OpenID Connect compares issuers as exact strings (Core 3.1.3.7
for the ID token, Discovery 4.3 for the discovery document, Back-Channel Logout 2.6 for the
logout token), so the console compares them with exactly what ``OIDC_ISSUER`` and discovery
say. An issuer that ends with "/" — Auth0's, Authentik's, Ory Hydra's — signs in; a setting
that differs from discovery's by a slash says so in the log."""

import logging
import runpy
import secrets
import time
from collections.abc import Callable
from typing import Any

import pytest

import orbit_console.settings
from orbit_console.signin.models import OidcIdentity
from tests.signin.conftest import CLIENT_ID, LIKE_GOOGLE, Company
from tests.support.oidc import OidcProvider


def logout_token(idp: OidcProvider, sub: str) -> str:
    now = int(time.time())
    claims = {
        "iss": idp.issuer,
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 120,
        "jti": secrets.token_hex(8),
        "sub": sub,
        "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
    }
    return idp.sign(claims)


@pytest.mark.system_extra
def test_an_issuer_that_ends_with_a_slash_signs_in_and_its_logout_tokens_end_sessions(
    providers: Callable[..., OidcProvider], company: Callable[[OidcProvider], Company]
) -> None:
    idp = providers(issuer_trailing_slash=True)
    assert idp.issuer.endswith("/")
    me = company(idp)
    me.sign_in()
    assert me.console.get("/").status_code == 200
    assert OidcIdentity.objects.get(subject=me.login).issuer == idp.issuer

    ended = me.console.post(
        "/signin/oidc/backchannel-logout", {"logout_token": logout_token(idp, me.login)}
    )
    assert ended.status_code == 200, ended.content
    assert me.console.get("/")["Location"].startswith("/signin")


@pytest.mark.system_extra
def test_an_issuer_setting_that_differs_from_discovery_by_a_slash_is_named_in_the_log(
    providers: Callable[..., OidcProvider],
    company: Callable[[OidcProvider], Company],
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Discovery 4.3: the document's ``issuer`` must be the very URL it was fetched for. The
    administrator is told which issuer the provider names, not "Signing in did not work"."""
    idp = providers(**LIKE_GOOGLE)
    me = company(idp)
    settings.OIDC_ISSUER = idp.issuer + "/"
    with caplog.at_level(logging.WARNING, logger="orbit_console.signin"):
        answer = me.console.get("/signin/oidc")
    assert answer.status_code == 503
    assert f"'{idp.issuer}'" in caplog.text
    assert f"'{idp.issuer}/'" in caplog.text


def test_the_issuer_setting_is_kept_exactly_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OIDC_ISSUER", "https://tenant.example.auth0.com/")
    monkeypatch.setenv("OIDC_CLIENT_ID", "console")
    monkeypatch.setenv("OIDC_CLIENT_SECRET", "a-secret")
    monkeypatch.setenv("OIDC_ROLE_RULES", '[{"value": "ops", "roles": ["auditor"]}]')
    read = runpy.run_path(orbit_console.settings.__file__)  # the module, read afresh
    assert read["OIDC_ISSUER"] == "https://tenant.example.auth0.com/"
    assert read["SECURE_CSP"]["form-action"][1] == "https://tenant.example.auth0.com"
