"""Errors an administrator can act on (issue 40 item 4): an error the provider sends back to the
callback is logged with its ``error`` and ``error_description`` (escaped, cut, never a token),
and the page says the provider refused, what kind of refusal, and whom to ask; an answer opened
again in a signed-in browser says the person is still signed in. Against the suite's real
provider, the console in-process."""

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.signin.conftest import LIKE_GOOGLE, Company
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.system_extra

CALLBACK = "/signin/oidc/callback"


def refusals_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused by the provider" in r.getMessage()]


def test_a_provider_error_is_logged_and_explained_and_signs_nobody_out(
    providers: Callable[..., OidcProvider],
    company: Callable[[OidcProvider], Company],
    caplog: pytest.LogCaptureFixture,
    settings: Any,
) -> None:
    """Before: the log said ``Bad Request``, the page that the answer "may have been used
    already", and the library signed the person out — so any link to the callback with an
    ``error`` signed a signed-in person out."""
    me = company(providers(**LIKE_GOOGLE))
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    me.sign_in()
    description = "User is not assigned to the client application.\n\x1b[31mforged log line"
    query = {"error": "access_denied", "error_description": description, "state": "unknown"}
    with caplog.at_level(logging.WARNING, logger="orbit_console.signin.views"):
        answer = me.console.get(f"{CALLBACK}?{urlencode(query)}")
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "Example SSO refused the sign-in" in page
    assert 'data-kind="access"' in page
    assert "ask the people who manage your Example SSO account" in page
    assert f"You are still signed in as {me.user.username}" in page
    assert "not assigned" not in page.split('<div class="signin panel">')[1]  # anyone's text
    [logged] = refusals_logged(caplog)
    assert "error='access_denied'" in logged
    assert "not assigned to the client application.\\n\\x1b[31mforged log line'" in logged
    assert answer.context["refusal"].reference in logged
    assert me.console.get("/").status_code == 200  # still signed in


def test_an_unknown_error_code_is_not_repeated_and_counts_as_a_settings_mismatch(
    providers: Callable[..., OidcProvider], company: Callable[[OidcProvider], Company]
) -> None:
    me = company(providers(**LIKE_GOOGLE))
    query = {"error": "<b>call 555-0100</b>", "state": "x"}
    answer = me.console.get(f"{CALLBACK}?{urlencode(query)}")
    assert answer.status_code == 403
    page = answer.content.decode().split('<div class="signin panel">')[1]
    assert 'data-kind="settings"' in page
    assert "555-0100" not in page  # (only in the language switch's link back, URL-encoded)
    assert "You are not signed in." in page


def test_an_answer_opened_again_in_a_signed_in_browser_says_it_is_still_signed_in(
    providers: Callable[..., OidcProvider], company: Callable[[OidcProvider], Company]
) -> None:
    """The back button to the callback: its state was used. Before, the page said "You are
    not signed in" to a person who was."""
    me = company(providers(**LIKE_GOOGLE))
    callback = me.at_provider.authorize(me.start(), login=me.login)
    assert me.console.get(callback).status_code == 302
    again = me.console.get(callback)
    assert again.status_code == 400
    page = again.content.decode()
    assert "You are not signed in" not in page
    assert f"You are still signed in as {me.user.username}" in page
    assert 'id="signin-failed"' in page
    assert me.console.get("/").status_code == 200
