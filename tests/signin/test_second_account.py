"""A second account of the same person, through the suite's real provider (issue 39, items 3-5;
docs/sign-in.md "A second account of the same person", docs/approvals.md).

The console runs in this process (Django's test client), the provider is panva's oidc-provider
over real HTTP (``tests/support/oidc_signin.py``). Every person here has a random tail: the test
database is shared by the whole run, and a name that looks like another test's account would be
held.
"""

import re
import secrets
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from orbit_console.decisions.models import Approval, Proposal
from orbit_console.people.accounts import accounts_of, is_company
from orbit_console.people.names import skeleton
from orbit_console.signin.models import HeldSignin, OidcIdentity
from tests.approvals.conftest import REQUIRED_ROLE_PERMISSIONS, pending_retry, required_policy
from tests.signin.conftest import LIKE_OKTA
from tests.support.oidc import OidcProvider
from tests.support.oidc_signin import company_sign_in, configure
from tests.support.people import TestPerson, make_person

pytestmark = pytest.mark.system_extra

SUPERVISORS = "orbit-supervisors"


@pytest.fixture
def idp(providers: Callable[..., OidcProvider]) -> OidcProvider:
    """The run's provider that sends ``auth_time`` in every ID token (Okta's shape), so that a
    sign-in is fresh enough to decide: these tests are about who decides, not when."""
    return providers(**LIKE_OKTA)


@pytest.fixture
def company(settings: Any, idp: OidcProvider, world: dict[str, Any]) -> OidcProvider:
    """Company sign-in on in this process, supervisors mapped to the world's namespace, and the
    production approval policy."""
    namespace = world["namespace_id"]
    configure(
        settings,
        idp,
        [{"value": SUPERVISORS, "roles": ["supervisor", "operator"], "namespaces": [namespace]}],
    )
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    settings.CONSOLE_ROLE_PERMISSIONS = REQUIRED_ROLE_PERMISSIONS
    return idp


def at_provider(idp: OidcProvider, **claims: Any) -> str:
    """A new person at the provider, in the supervisors' group, with ``claims`` over the
    defaults: their login."""
    login = f"idp-{secrets.token_hex(4)}"
    idp.set_account(login, groups=[SUPERVISORS], claims=claims)
    return login


def local_operator(world: dict[str, Any], name: str, email: str = "") -> TestPerson:
    operator = make_person(world, "operator", name=name)
    if email:
        operator.user.email = email
        operator.user.save(update_fields=["email"])
    return operator


def approve(client: Client, proposal: Proposal) -> str:
    """POST an approval as the client's person; the page it lands on."""
    answer = client.post(f"/proposals/{proposal.id}/approve", {"note": "looks right"}, follow=True)
    assert answer.status_code == 200
    return answer.content.decode()


def held_of(login: str) -> HeldSignin:
    return HeldSignin.objects.get(subject=login)


def test_a_company_person_named_like_a_local_account_is_held_then_linked_and_approves_nothing(
    company: OidcProvider, world: dict[str, Any]
) -> None:
    """The issue's case: the local ``operator`` proposes; a company person whose
    ``preferred_username`` is also ``operator`` and whom the provider makes a supervisor was
    given ``operator-2`` and approved it. Now the sign-in is held (no account, no role, a page
    that says so); the administrator decides it is the same person; the company account is
    made, linked, and can neither approve nor reject what the local account proposed."""
    name = f"operator-{secrets.token_hex(3)}"
    operator = local_operator(world, name)
    proposal = pending_retry(world, operator)
    login = at_provider(company, preferred_username=name)
    browser = Client()

    held = company_sign_in(browser, company, login)
    assert held.status_code == 403
    page = held.content.decode()
    assert 'id="signin-held"' in page and "administrator decides" in page
    assert held_of(login).id in page
    assert not OidcIdentity.objects.filter(subject=login).exists()
    assert not User.objects.filter(username__startswith=f"{name}-").exists()
    assert browser.get("/").status_code == 302  # not signed in

    out = StringIO()
    call_command("console", "link", "--held", held_of(login).id, "--same-as", name, stderr=out)
    made = OidcIdentity.objects.get(subject=login).user
    assert made.username == f"{name}-2" and is_company(made)
    assert accounts_of(made.pk) == {made.pk, operator.user.pk}
    assert "one person" in out.getvalue()

    assert company_sign_in(browser, company, login).status_code == 302
    assert set(made.groups.values_list("name", flat=True)) == {"supervisor", "operator"}
    refused = approve(browser, proposal)
    assert "another account of yours" in refused
    rejected = browser.post(f"/proposals/{proposal.id}/reject", {"reason": "no"}, follow=True)
    assert "another account of yours" in rejected.content.decode()
    proposal.refresh_from_db()
    assert proposal.is_pending
    assert not Approval.objects.filter(proposal=proposal).exists()
    # Its page offers neither, and marks the proposal as theirs.
    page = browser.get(f"/proposals/{proposal.id}").content.decode()
    assert f'action="/proposals/{proposal.id}/approve"' not in page


def test_a_verified_address_of_a_local_account_links_at_once(
    company: OidcProvider, world: dict[str, Any]
) -> None:
    """The provider vouches for the address (``email_verified``) that an administrator gave
    the local account (``console user --email``): the company account is made with a name of
    its own and linked — one person, who approves nothing the other proposed."""
    tail = secrets.token_hex(3)
    operator = local_operator(world, f"ops-{tail}", email=f"Ops.{tail}@Example.com")
    proposal = pending_retry(world, operator)
    login = at_provider(company, preferred_username=f"o.{tail}", email=f"ops.{tail}@example.com")
    browser = Client()

    assert company_sign_in(browser, company, login).status_code == 302
    made = OidcIdentity.objects.get(subject=login).user
    assert made.username == f"o.{tail}"
    assert accounts_of(made.pk) == {made.pk, operator.user.pk}
    assert "another account of yours" in approve(browser, proposal)
    proposal.refresh_from_db()
    assert proposal.is_pending


@pytest.mark.parametrize(
    "claims",
    [
        {"email_verified": False},
        {"email_verified": None},  # the provider does not say
        {"email_verified": "false"},
    ],
    ids=["unverified", "omitted", "a string"],
)
def test_an_address_the_provider_does_not_vouch_for_holds_the_sign_in(
    company: OidcProvider, world: dict[str, Any], claims: dict[str, Any]
) -> None:
    tail = secrets.token_hex(3)
    local_operator(world, f"ann-{tail}", email=f"ann.{tail}@example.com")
    login = at_provider(
        company, preferred_username=f"zed-{tail}", email=f"ann.{tail}@example.com", **claims
    )
    assert company_sign_in(Client(), company, login).status_code == 403
    assert not OidcIdentity.objects.filter(subject=login).exists()
    assert held_of(login).email_verified is False


def test_a_provider_that_omits_the_user_name_is_compared_by_the_address(
    company: OidcProvider, world: dict[str, Any]
) -> None:
    """No ``preferred_username``: the name would come from the address; its part before "@"
    still finds the local account of that name."""
    name = f"bea-{secrets.token_hex(3)}"
    local_operator(world, name)
    login = at_provider(company, preferred_username=None, email=f"{name}@corp.example")
    assert company_sign_in(Client(), company, login).status_code == 403
    assert [u.username for u in held_of(login).matches.all()] == [name]


@pytest.mark.parametrize(
    "looks_like",
    ["\u0455", "S", "\uff53"],  # a Cyrillic dze, a capital, a full-width s
    ids=["cyrillic", "capital", "full-width"],
)
def test_a_lookalike_of_a_local_name_is_held_and_gets_a_name_of_its_own(
    company: OidcProvider, world: dict[str, Any], looks_like: str
) -> None:
    """``supervisor`` and a company ``\u0455upervisor`` (or ``Supervisor``) read alike in the
    header, the approvals, the record and the notifications. The sign-in is held; decided to
    be someone else, it gets a name whose skeleton nobody's has, and is marked as a company
    account in the header, in both languages."""
    tail = secrets.token_hex(3)
    make_person(world, "supervisor", name=f"supervisor-{tail}")
    login = at_provider(company, preferred_username=f"{looks_like}upervisor-{tail}")
    browser = Client()
    assert company_sign_in(browser, company, login).status_code == 403

    call_command("console", "link", "--held", held_of(login).id, "--apart", stderr=StringIO())
    made = OidcIdentity.objects.get(subject=login).user
    assert accounts_of(made.pk) == {made.pk}
    others = User.objects.exclude(pk=made.pk).values_list("username", flat=True)
    assert skeleton(made.username) not in {skeleton(name) for name in others}

    assert company_sign_in(browser, company, login).status_code == 302
    header = re.search(r'<span class="who">(.*?)</span> ·', browser.get("/").content.decode())
    assert header is not None and "company" in header.group(1)
    chinese = browser.get("/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "企业" in re.search(r'<span class="who">(.*?)</span> ·', chinese).group(1)  # type: ignore[union-attr]


def test_wrong_confirmations_at_one_address_leave_company_sign_in_open(
    company: OidcProvider, world: dict[str, Any]
) -> None:
    """Item 5: ten wrong passwords at ``/signin/confirm`` from one address locked the address,
    company sign-in included (django-axes counted them by address)."""
    address = {"REMOTE_ADDR": f"198.51.100.{secrets.randbelow(250) + 1}"}
    someone = make_person(world, "supervisor")
    guesser = Client(**address)
    guesser.force_login(someone.user)
    for _ in range(10):
        guesser.post("/signin/confirm", {"password": "not it", "next": "/"})
    login = at_provider(company)
    assert company_sign_in(Client(**address), company, login, **address).status_code == 302
