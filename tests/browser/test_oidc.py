"""Company sign-in in Chromium against a real OpenID Connect provider (issue 31,
docs/sign-in.md): panva's certified oidc-provider on Node.js (tests/support/oidc.py), its own
sign-in form, a groups claim, back-channel logout.

- "Sign in with <provider>" on the sign-in page, in both languages.
- A person in a mapped group is signed in with the group's role and a credential in its
  namespace; a person in no mapped group is refused with a page that says so, no account made.
- A change of groups at the provider changes the roles at the next sign-in.
- A replayed authorization code is refused; a provider's ID token for another client is refused.
- Back-channel logout from the provider ends the person's session and closes the open live
  page's socket at once; a forged, expired, replayed or misdirected logout token is refused.
- Signing out signs out of the provider too (RP-initiated logout); "sign out everywhere" ends
  every session of the person's.
- Going through the provider's open session again (no form, no ``auth_time``) never makes a
  session fresh enough to decide: deciding asks for the password at the provider.
"""

import json
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import jwt
import pytest
from django.contrib.auth.models import User
from playwright.sync_api import BrowserContext, Page, Route, expect

from orbit_console.decisions.models import ConsoleEvent
from orbit_console.ledger.seed import seed_world
from orbit_console.people.models import OrbitCredential
from orbit_console.signin.models import OidcIdentity
from tests.approvals.conftest import pending_retry
from tests.support.oidc import OidcProvider, console_client
from tests.support.people import make_person
from tests.support.servers import DaphneServer

pytestmark = [pytest.mark.browser, pytest.mark.system_extra]

CLIENT_ID = "orbit-console"
CLIENT_SECRET = secrets.token_urlsafe(32)
OTHER_CLIENT_ID = "another-app"
RECHECK_SECONDS = 3
STEP_UP_SECONDS = 8


@pytest.fixture(scope="module")
def oidc_world(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        return seed_world(label=f"oidc-{secrets.token_hex(3)}")


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    started = OidcProvider()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: Any, idp: OidcProvider, oidc_world: dict[str, Any]
) -> Iterator[DaphneServer]:
    namespace = oidc_world["namespace_id"]
    rules = [
        {
            "claim": "groups",
            "value": "orbit-supervisors",
            "roles": ["supervisor", "operator"],
            "namespaces": [namespace],
        },
        {
            "claim": "groups",
            "value": "orbit-operators",
            "roles": ["operator"],
            "namespaces": [namespace],
        },
        {
            "claim": "groups",
            "value": "orbit-auditors",
            "roles": ["auditor"],
            "namespaces": [namespace],
        },
    ]
    console = DaphneServer(
        "oidc-browser",
        env={
            "OIDC_ISSUER": idp.issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_PROVIDER_NAME": "Example SSO",
            "OIDC_ROLE_RULES": json.dumps(rules),
            "OIDC_GROUPS_FILTER": "^orbit-",
            # Sockets look at their session rarely: a socket that closes at once after a
            # back-channel logout was told so, not found out by looking.
            "SESSION_RECHECK_SECONDS": "600",
            "OIDC_RECHECK_SECONDS": str(RECHECK_SECONDS),
            "STEP_UP_MAX_AGE_SECONDS": str(STEP_UP_SECONDS),
        },
    )
    clients = [
        console_client(console.url, CLIENT_ID, CLIENT_SECRET),
        {
            "client_id": OTHER_CLIENT_ID,
            "client_secret": secrets.token_urlsafe(32),
            "redirect_uris": [f"{console.url}/signin/oidc/callback"],
            "grant_types": ["authorization_code"],
        },
    ]
    idp.start(clients)
    with django_db_blocker.unblock():
        console.start()
    yield console
    console.stop()


def company_sign_in(page: Page, server: DaphneServer, login: str) -> None:
    """Through the console's button and the provider's own sign-in form."""
    page.goto(f"{server.url}/signin")
    page.locator("#oidc-signin").click()
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    page.locator("button[type=submit]").click()


def signed_in_at_company(
    page: Page, server: DaphneServer, idp: OidcProvider, name: str, groups: list[str]
) -> str:
    """A new account of the provider (``name`` and a random tail) in ``groups``, signed in
    through the company's sign-in: its login."""
    login = f"{name}-{secrets.token_hex(3)}"
    idp.set_account(login, groups=groups)
    company_sign_in(page, server, login)
    expect(page.locator("header .who")).to_contain_text(login)
    return login


def person(login: str) -> User:
    return OidcIdentity.objects.select_related("user").get(subject=login).user


def roles_of(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_a_person_in_a_mapped_group_signs_in_with_its_role(
    page: Page, server: DaphneServer, idp: OidcProvider, oidc_world: dict[str, Any], live_db: None
) -> None:
    login = f"ada-{secrets.token_hex(3)}"
    idp.set_account(login, groups=["everyone", "orbit-operators"])
    page.goto(f"{server.url}/signin")
    expect(page.locator("#oidc-signin")).to_have_text("Sign in with Example SSO")
    company_sign_in(page, server, login)
    expect(page.locator("header .who")).to_contain_text(login)
    user = person(login)
    assert roles_of(user) == {"operator"}
    assert not user.has_usable_password()
    [credential] = OrbitCredential.objects.filter(user=user)
    assert credential.namespace_id == oidc_world["namespace_id"]
    assert "tasks:review" in credential.permissions.split()


def test_the_button_speaks_the_readers_language(page: Page, server: DaphneServer) -> None:
    page.context.set_extra_http_headers({"Accept-Language": "zh-Hans"})
    page.goto(f"{server.url}/signin")
    expect(page.locator("#oidc-signin")).to_contain_text("Example SSO")
    expect(page.locator("#oidc-signin")).to_have_text("使用 Example SSO 登录")


def test_a_person_in_no_mapped_group_is_refused_and_no_account_is_made(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    login = f"eve-{secrets.token_hex(3)}"
    idp.set_account(login, groups=["everyone", "marketing"])
    company_sign_in(page, server, login)
    expect(page.locator("#signin-refused")).to_contain_text("none of your groups")
    assert not OidcIdentity.objects.filter(subject=login).exists()
    assert not User.objects.filter(username=login).exists()
    page.goto(f"{server.url}/")
    expect(page).to_have_url(f"{server.url}/signin?next=/")


def test_a_change_of_groups_changes_the_roles_at_the_next_sign_in(
    context: BrowserContext,
    page: Page,
    server: DaphneServer,
    idp: OidcProvider,
    oidc_world: dict[str, Any],
    live_db: None,
) -> None:
    login = signed_in_at_company(page, server, idp, "grace", ["orbit-operators"])
    first = OrbitCredential.objects.get(user=person(login))
    idp.set_account(login, groups=["orbit-supervisors"])
    context.clear_cookies()
    company_sign_in(page, server, login)
    expect(page.locator("header .who")).to_contain_text(login)
    assert roles_of(person(login)) == {"operator", "supervisor"}
    assert (
        OrbitCredential.objects.get(user=person(login)).token_ciphertext == first.token_ciphertext
    )
    # To auditor: read only, a credential minted again with fewer permissions.
    idp.set_account(login, groups=["orbit-auditors"])
    context.clear_cookies()
    company_sign_in(page, server, login)
    expect(page.locator("header .who")).to_contain_text(login)
    assert roles_of(person(login)) == {"auditor"}
    second = OrbitCredential.objects.get(user=person(login))
    assert second.token_ciphertext != first.token_ciphertext
    assert set(second.permissions.split()) == {"tasks:read", "tasks:audit:read"}
    assert "tasks:review" in first.permissions.split()
    # Out of every mapped group: refused, and the roles and the credential are no more.
    idp.set_account(login, groups=[])
    context.clear_cookies()
    company_sign_in(page, server, login)
    expect(page.locator("#signin-refused")).to_be_visible()
    assert roles_of(person(login)) == set()
    assert not OrbitCredential.objects.filter(user=person(login)).exists()


def test_a_replayed_authorization_code_is_refused(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    login = f"mallory-{secrets.token_hex(3)}"
    idp.set_account(login, groups=["orbit-operators"])
    callbacks: list[str] = []
    page.on(
        "request",
        lambda request: (
            callbacks.append(request.url) if "/signin/oidc/callback" in request.url else None
        ),
    )
    company_sign_in(page, server, login)
    expect(page.locator("header .who")).to_contain_text(login)
    [callback] = callbacks
    page.goto(callback)
    expect(page.locator("#signin-failed")).to_be_visible()
    # The same code in another browser: refused too.
    with httpx.Client(base_url=server.url, timeout=30) as other:
        refused = other.get(urlparse(callback).path + "?" + urlparse(callback).query)
        assert refused.status_code == 400
        assert "sessionid" not in other.cookies


def test_an_id_token_issued_to_another_client_is_refused(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    """A code for another client of the same provider, brought to the console's callback with
    this browser's state: the token endpoint refuses it, and nobody is signed in."""
    login = f"oscar-{secrets.token_hex(3)}"
    idp.set_account(login, groups=["orbit-operators"])
    authorizations: list[str] = []

    def to_another_client(route: Route) -> None:
        answer = route.fetch(max_redirects=0)
        location = answer.headers["location"]
        authorizations.append(location)
        forged = location.replace(f"client_id={CLIENT_ID}", f"client_id={OTHER_CLIENT_ID}")
        route.fulfill(status=answer.status, headers={**answer.headers, "location": forged})

    page.route(re.compile(re.escape(f"{server.url}/signin/oidc?")), to_another_client)
    page.route(re.compile(re.escape(f"{server.url}/signin/oidc") + "$"), to_another_client)
    company_sign_in(page, server, login)
    expect(page.locator("#signin-failed")).to_be_visible()
    assert parse_qs(urlparse(authorizations[0]).query)["client_id"] == [CLIENT_ID]
    assert not OidcIdentity.objects.filter(subject=login).exists()


def test_back_channel_logout_ends_the_session_and_closes_the_open_live_page_at_once(
    page: Page, server: DaphneServer, idp: OidcProvider, oidc_world: dict[str, Any], live_db: None
) -> None:
    login = signed_in_at_company(page, server, idp, "linus", ["orbit-operators"])
    task_id = oidc_world["tasks"]["needs_review"]
    page.goto(f"{server.url}/tasks/{task_id}")
    badge = page.locator("#timeline-live")
    expect(badge).to_have_text("live")
    cookies = {c["name"]: c["value"] for c in page.context.cookies() if c["name"] == "sessionid"}

    started = time.monotonic()
    [sent] = idp.backchannel_logout(login)
    assert sent["ok"], sent
    expect(badge).to_have_text("signed out", timeout=5_000)
    closed_after = time.monotonic() - started
    with httpx.Client(base_url=server.url, cookies=cookies, timeout=30) as same_session:
        refused = same_session.get(f"/tasks/{task_id}")
    assert refused.status_code == 302
    assert refused.headers["location"].startswith("/signin")
    # The socket was told, not left to find out (its own look comes every 600 s).
    assert closed_after < 5
    print(f"back-channel logout -> socket closed and page signed out: {closed_after:.2f} s")


def logout_token(idp: OidcProvider, **claims: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": idp.issuer,
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 120,
        "jti": secrets.token_hex(8),
        "sub": "nobody-in-particular",
        "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
        **claims,
    }


def post_logout(server: DaphneServer, token: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}/signin/oidc/backchannel-logout", data={"logout_token": token}, timeout=30
    )


def forged(claims: dict[str, Any]) -> str:
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "forged"})


def test_a_forged_expired_replayed_or_misdirected_logout_token_is_refused(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    login = signed_in_at_company(page, server, idp, "ken", ["orbit-operators"])
    hour_ago = int(time.time()) - 3600
    refused = {
        "forged": forged(logout_token(idp, sub=login)),
        "expired": idp.sign(logout_token(idp, sub=login, iat=hour_ago, exp=hour_ago + 120)),
        "another client": idp.sign(logout_token(idp, sub=login, aud=OTHER_CLIENT_ID)),
        "another issuer": idp.sign(logout_token(idp, sub=login, iss="https://evil.example")),
        "no event": idp.sign(logout_token(idp, sub=login, events={})),
        "a nonce": idp.sign(logout_token(idp, sub=login, nonce="n")),
        "no sid or sub": idp.sign({**logout_token(idp), "sub": None}),
        "unsigned": jwt.encode(logout_token(idp, sub=login), None, algorithm="none"),
    }
    for why, token in refused.items():
        assert post_logout(server, token).status_code == 400, why
    page.reload()
    expect(page.locator("header .who")).to_contain_text(login)  # still signed in

    valid = idp.sign(logout_token(idp, sub="someone-else"))
    assert post_logout(server, valid).status_code == 200
    assert post_logout(server, valid).status_code == 400  # its jti was used


def test_a_logout_token_naming_only_the_providers_session_ends_that_session_alone(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    """Back-Channel Logout 1.0 names a session by ``sid`` (or the person by ``sub``): a token
    with only the ``sid`` of one of the person's sessions ends that one, not their others."""
    from orbit_console.signin.models import OidcSession

    login = signed_in_at_company(page, server, idp, "sid", ["orbit-operators"])
    [named] = [c["value"] for c in page.context.cookies() if c["name"] == "sessionid"]
    record = OidcSession.objects.get(session_key=named)
    assert record.sid, "the provider's ID token named its session"
    other = page.context.browser.new_context() if page.context.browser else None
    assert other is not None
    try:
        second = other.new_page()
        company_sign_in(second, server, login)  # the same person, another provider session
        expect(second.locator("header .who")).to_contain_text(login)
        [kept] = [c["value"] for c in other.cookies() if c["name"] == "sessionid"]
        assert OidcSession.objects.get(session_key=kept).sid != record.sid

        token = logout_token(idp, sid=record.sid)
        del token["sub"]
        assert post_logout(server, idp.sign(token)).status_code == 200
        page.reload()
        expect(page).to_have_url(re.compile(r"/signin"))
        second.reload()
        expect(second.locator("header .who")).to_contain_text(login)  # the other session stays
    finally:
        other.close()


def test_signing_out_signs_out_of_the_provider_too(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    signed_in_at_company(page, server, idp, "rp", ["orbit-operators"])
    page.locator("form[action='/signout'] button").click()
    # The provider's own page asks to confirm, then comes back to the console's sign-in.
    expect(page).to_have_url(re.compile(re.escape(idp.issuer) + "/session/end"))
    page.locator("button[autofocus], button[type=submit]").first.click()
    expect(page).to_have_url(f"{server.url}/signin")
    # Signed out at the provider: signing in asks for the password again.
    page.locator("#oidc-signin").click()
    expect(page.locator("input[name=login]")).to_be_visible()


def test_sign_out_everywhere_ends_every_session_of_the_person(
    browser: Any, page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    login = signed_in_at_company(page, server, idp, "sue", ["orbit-operators"])
    other = browser.new_context()
    try:
        other_page = other.new_page()
        company_sign_in(other_page, server, login)
        expect(other_page.locator("header .who")).to_contain_text(login)
        page.locator("#sign-out-everywhere button").click()
        expect(page).to_have_url(re.compile(re.escape(f"{server.url}/signin")))
        other_page.reload()
        expect(other_page).to_have_url(re.compile(re.escape(f"{server.url}/signin")))
    finally:
        other.close()


def test_a_change_of_groups_changes_the_roles_at_the_next_re_check_and_a_refused_refresh_signs_out(
    page: Page, server: DaphneServer, idp: OidcProvider, live_db: None
) -> None:
    login = signed_in_at_company(page, server, idp, "rita", ["orbit-supervisors"])
    assert roles_of(person(login)) == {"operator", "supervisor"}

    idp.set_account(login, groups=["orbit-auditors"])
    time.sleep(RECHECK_SECONDS + 0.5)
    page.goto(f"{server.url}/")
    expect(page.locator("header .who")).to_contain_text(login)  # still signed in
    assert roles_of(person(login)) == {"auditor"}

    idp.set_account(login, disabled=True)  # the identity team disables the person
    time.sleep(RECHECK_SECONDS + 0.5)
    page.goto(f"{server.url}/")
    expect(page).to_have_url(re.compile(re.escape(f"{server.url}/signin")))


def test_a_silent_sign_in_never_lets_a_supervisor_decide_and_the_step_up_keeps_the_reason(
    page: Page, server: DaphneServer, idp: OidcProvider, oidc_world: dict[str, Any], live_db: None
) -> None:
    """Issue 39 item 1: the provider's ID tokens carry no ``auth_time`` unless ``max_age`` is
    asked (oidc-provider's default, as Google's and Entra ID's). Going through
    ``/signin/oidc`` again rides the provider's open session — no form — and before, its
    ``iat`` made the session fresh: the supervisor decided with no sign-in at all."""
    login = f"sam-{secrets.token_hex(3)}"
    idp.set_account(login, groups=["orbit-supervisors"])
    operator = make_person(oidc_world, "operator")
    proposal = pending_retry(oidc_world, operator)
    company_sign_in(page, server, login)
    expect(page.locator("header .who")).to_contain_text(login)
    page.goto(f"{server.url}/signin/oidc?next=/proposals/{proposal.id}")
    expect(page).to_have_url(f"{server.url}/proposals/{proposal.id}")  # asked nothing
    reason = "Wrong revision: the task moved after the review"
    page.fill("#reject-reason", reason)
    reject = page.locator("#reject-reason").locator("xpath=ancestor::form")
    reject.locator("button[type=submit]").click()

    # The provider asks for the password again (prompt=login), whatever its own session.
    expect(page.locator("input[name=login]")).to_be_visible()
    proposal.refresh_from_db()
    assert proposal.is_pending
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    again_at = time.time()
    page.locator("button[type=submit]").click()

    expect(page).to_have_url(f"{server.url}/proposals/{proposal.id}")
    expect(page.locator("#reject-reason")).to_have_value(reason)
    reject.locator("button[type=submit]").click()
    expect(page.locator("#proposal-state")).to_contain_text("Rejected")
    event = ConsoleEvent.objects.get(proposal=proposal, kind="proposal.rejected")
    assert event.authenticated_how == "oidc"
    assert event.authenticated_at is not None
    assert abs(event.authenticated_at.timestamp() - again_at) < 5
