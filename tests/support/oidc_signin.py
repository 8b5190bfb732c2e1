"""Company sign-in without a browser: Django's test client for the console (in this process),
plain HTTP for the suite's real provider (``tests/support/oidc.py``) and its own sign-in form.

The console sends the "browser" to the provider's authorization endpoint with state, nonce and
PKCE; the provider's form is filled and sent; its redirect back to the console's callback is
followed by the test client, and the console exchanges the code at the provider's token
endpoint over real HTTP. Cheaper than Chromium by seconds per sign-in, for tests about what the
console makes of the person, not about pages in a browser (tests/browser/test_oidc.py).
"""

import json
import re
from typing import Any
from urllib.parse import urljoin, urlparse

import httpx
from django.http import HttpResponse
from django.test import Client

from orbit_console.signin import provider as signin_provider
from orbit_console.signin.rules import parse_filter, parse_rules
from tests.support.oidc import OidcProvider

CLIENT_ID = "orbit-console-in-process"
CLIENT_SECRET = "a-secret-of-thirty-two-characters-in-process"
CALLBACK = "http://testserver/signin/oidc/callback"


def client_metadata() -> dict[str, Any]:
    """The console of these tests as a client of the provider (``OidcProvider.start``)."""
    return {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [CALLBACK],
        "grant_types": ["authorization_code", "refresh_token"],
    }


def configure(settings: Any, idp: OidcProvider, rules: list[dict[str, Any]]) -> None:
    """Company sign-in on, in this process, against ``idp`` (pytest-django's ``settings``)."""
    settings.OIDC_ISSUER = idp.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    settings.OIDC_ROLE_RULES = parse_rules(json.dumps(rules))
    settings.OIDC_GROUPS_FILTER = parse_filter("^orbit-")
    backend = "orbit_console.signin.backends.OidcBackend"
    if backend not in settings.AUTHENTICATION_BACKENDS:
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    signin_provider._cached = None  # this provider's discovery document


def company_sign_in(client: Client, idp: OidcProvider, login: str, **extra: Any) -> HttpResponse:
    """Sign ``client`` in as ``login`` at the provider; the console's answer to the callback."""
    start = client.get("/signin/oidc", **extra)
    assert start.status_code == 302, start.status_code
    with httpx.Client(timeout=30) as browser:
        answer = browser.get(start["Location"])
        while answer.is_redirect and not _is_callback(answer):
            answer = browser.get(urljoin(str(answer.url), answer.headers["location"]))
        if not _is_callback(answer):
            form = re.search(r'<form[^>]*action="([^"]+)"', answer.text)
            assert form is not None, answer.text[:500]
            hidden = dict(
                re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', answer.text)
            )
            answer = browser.post(
                urljoin(str(answer.url), form.group(1)),
                data={**hidden, "login": login, "password": "any password"},
            )
            while answer.is_redirect and not _is_callback(answer):
                answer = browser.get(urljoin(str(answer.url), answer.headers["location"]))
        assert _is_callback(answer), (answer.status_code, answer.text[:500])
        back = urlparse(answer.headers["location"])
    return client.get(f"{back.path}?{back.query}", **extra)


def _is_callback(answer: httpx.Response) -> bool:
    return answer.is_redirect and answer.headers["location"].startswith(CALLBACK)
