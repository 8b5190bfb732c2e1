"""The suite's identity provider itself (tests/support/oidc.py): what the sign-in tests rely on
it to do, checked against it directly."""

from collections.abc import Iterator

import httpx
import pytest

from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.system_extra

CLIENT = {
    "client_id": "console",
    "client_secret": "a-secret-of-thirty-two-characters!",
    "redirect_uris": ["http://127.0.0.1:9/oidc/callback/"],
    "grant_types": ["authorization_code", "refresh_token"],
    "backchannel_logout_uri": "http://127.0.0.1:9/oidc/backchannel-logout",
    "backchannel_logout_session_required": True,
}


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    started = OidcProvider().start([CLIENT])
    yield started
    started.stop()


def test_the_provider_publishes_what_the_console_needs(provider: OidcProvider) -> None:
    document = httpx.get(provider.discovery_url, timeout=10).json()
    assert document["issuer"] == provider.issuer
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["backchannel_logout_supported"] is True
    assert document["backchannel_logout_session_supported"] is True
    assert "end_session_endpoint" in document
    assert "groups" in document["claims_supported"]
    keys = httpx.get(document["jwks_uri"], timeout=10).json()["keys"]
    assert [key["kty"] for key in keys] == ["RSA"]


def test_the_provider_refuses_a_request_without_pkce(provider: OidcProvider) -> None:
    answer = httpx.get(
        f"{provider.issuer}/auth",
        params={
            "client_id": "console",
            "response_type": "code",
            "scope": "openid",
            "redirect_uri": CLIENT["redirect_uris"][0],
            "state": "s",
            "nonce": "n",
        },
        timeout=10,
    )
    assert answer.status_code == 303
    assert "error=invalid_request" in answer.headers["location"]
    assert "PKCE" in answer.headers["location"]


def test_the_identity_team_can_change_a_persons_groups(provider: OidcProvider) -> None:
    assert provider.set_account("ada", groups=["orbit-operators"])["groups"] == ["orbit-operators"]
