"""The suite's identity provider itself (tests/support/oidc.py): what the sign-in tests rely on
it to do, checked against it directly."""

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.core.exceptions import SuspiciousOperation

from orbit_console.signin import provider as signin_provider
from orbit_console.signin.backends import OidcBackend
from tests.signin.conftest import CALLBACK, CLIENT_ID, CLIENT_SECRET, LIKE_GOOGLE
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.system_extra


@pytest.fixture
def provider(providers: Callable[..., OidcProvider]) -> OidcProvider:
    return providers(**LIKE_GOOGLE)


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
            "client_id": CLIENT_ID,
            "response_type": "code",
            "scope": "openid",
            "redirect_uri": CALLBACK,
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


def id_token_claims(provider: OidcProvider, **claims: object) -> dict[str, object]:
    now = int(time.time())
    return {
        "iss": provider.issuer,
        "aud": CLIENT_ID,
        "sub": "ada",
        "iat": now,
        "exp": now + 300,
        "nonce": "n",
        **claims,
    }


@pytest.mark.parametrize(
    ("why", "claims"),
    [
        ("another client", {"aud": "another-app"}),
        ("several audiences, issued to another", {"aud": [CLIENT_ID, "x"], "azp": "x"}),
        ("another issuer", {"iss": "https://evil.example"}),
        ("expired", {"iat": 1_000_000, "exp": 1_000_300}),
    ],
)
def test_an_id_token_the_console_was_not_meant_to_accept_is_refused(
    provider: OidcProvider,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    why: str,
    claims: dict[str, object],
) -> None:
    """Signed with the provider's own key: the library checks the signature and the nonce,
    the console's backend the rest (signin/backends.py)."""
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    monkeypatch.setattr(signin_provider, "_cached", None)  # this provider's discovery
    backend = OidcBackend()
    good = provider.sign(id_token_claims(provider))
    assert backend.verify_token(good, nonce="n")["sub"] == "ada"
    token = provider.sign(id_token_claims(provider, **claims))
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(token, nonce="n")
