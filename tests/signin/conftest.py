"""Company sign-in in-process: the console through Django's test client, the identity provider
real (panva's oidc-provider, ``tests/support/oidc.py``), in each shape a test asks for
(``Quirks``), each shape started once per test process.

The console's side of the flow runs in this process, so a test can look at the session it
leaves; the provider's side runs over real HTTP with the browser's cookies there
(``AtTheProvider``): its session stays open between sign-ins, as a browser's does.
"""

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from django.contrib.auth.models import User
from django.test import Client

from orbit_console.signin import provider as signin_provider
from orbit_console.signin.models import OidcIdentity
from orbit_console.signin.rules import parse_rules
from orbit_console.signin.session import KEY as OIDC_SESSION
from tests.support.oidc import AtTheProvider, OidcProvider, Quirks
from tests.support.oidc_shapes import SHAPES, admitted_by_first_rule
from tests.support.oidc_shapes import configure as configure_shape
from tests.support.oidc_signin import CALLBACK, CLIENT_ID, CLIENT_SECRET, client_metadata

# Google's shape for refresh tokens: none with "openid profile email"; and auth_time only when
# max_age is asked, as oidc-provider by default and many certified providers. Most tests here
# use it: one provider start fewer per test process.
LIKE_GOOGLE = {"refresh_tokens": False}
# Okta's and Keycloak's: a refresh token, and auth_time in every ID token.
LIKE_OKTA = {"auth_time": "always"}


@pytest.fixture(scope="session")
def providers() -> Iterator[Callable[..., OidcProvider]]:
    """``providers(**quirks)``: the run's provider of that shape (``Quirks``), started at
    first use."""
    started: dict[Quirks, OidcProvider] = {}

    def of(**quirks: Any) -> OidcProvider:
        shape = Quirks(**quirks)
        if shape not in started:
            started[shape] = OidcProvider(shape).start([client_metadata()])
        return started[shape]

    yield of
    for provider in started.values():
        provider.stop()


@dataclass
class Company:
    """One browser of one person at the console (``console``) and at the provider."""

    idp: OidcProvider
    console: Client
    at_provider: AtTheProvider
    login: str = field(default_factory=lambda: f"sam-{secrets.token_hex(3)}")
    authorization_urls: list[str] = field(default_factory=list)

    def start(self, path: str = "/signin/oidc", **params: str) -> str:
        """The console's redirect to the provider for ``path`` (with its query, or
        ``params``): the authorization request."""
        started = self.console.get(path, params or None)
        assert started.status_code == 302, started
        url = str(started["Location"])
        self.authorization_urls.append(url)
        return url

    def step_up_request(self, page: str) -> str:
        """The step-up asked before deciding on ``page`` (``/signin/confirm``): its
        authorization request."""
        return self.start(self.console.get("/signin/confirm", {"next": page})["Location"])

    def come_back(self, authorization_url: str) -> Any:
        """Through the provider (signing in there if it asks) and back to the console's
        callback: the callback's answer."""
        callback = self.at_provider.authorize(authorization_url, login=self.login)
        assert callback.startswith(CALLBACK), callback
        return self.console.get(callback)

    def sign_in(self, next_path: str = "/") -> Any:
        answer = self.come_back(self.start(next=next_path))
        assert answer.status_code == 302, answer.content
        assert answer["Location"] == next_path
        return answer

    def follow(self, answer: Any) -> Any:
        """Follow the console's redirects, through the provider when it sends the browser
        there: the first answer that is not a redirect."""
        for _ in range(10):
            if answer.status_code not in (301, 302, 303):
                return answer
            location = str(answer["Location"])
            if location.startswith(self.idp.base_url):
                self.authorization_urls.append(location)
                answer = self.come_back(location)
            else:
                answer = self.console.get(location)
        raise AssertionError("redirected for ever")

    @property
    def asked(self) -> dict[str, str]:
        """The last authorization request's parameters."""
        query = parse_qs(urlparse(self.authorization_urls[-1]).query)
        return {name: values[0] for name, values in query.items()}

    def age_the_check(self, seconds: float) -> None:
        """As if the provider was last asked about the person ``seconds`` earlier."""
        session = self.console.session
        kept = session[OIDC_SESSION]
        kept["checked_at"] -= seconds
        session[OIDC_SESSION] = kept
        session.save()

    @property
    def user(self) -> User:
        return OidcIdentity.objects.select_related("user").get(subject=self.login).user


@pytest.fixture
def company(
    settings: Any, monkeypatch: pytest.MonkeyPatch, world: dict[str, Any]
) -> Iterator[Callable[[OidcProvider], Company]]:
    """``company(idp)``: the console configured for ``idp`` (as the environment would:
    ``OIDC_ISSUER`` exactly as the provider spells it), and a new person there in the
    supervisors' group."""
    browsers: list[AtTheProvider] = []

    def configure(idp: OidcProvider) -> Company:
        namespace = world["namespace_id"]
        settings.OIDC_ISSUER = idp.issuer
        settings.OIDC_RP_CLIENT_ID = CLIENT_ID
        settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
        settings.OIDC_ROLE_RULES = parse_rules(
            json.dumps(
                [
                    {
                        "value": "orbit-supervisors",
                        "roles": ["supervisor", "operator"],
                        "namespaces": [namespace],
                    }
                ]
            )
        )
        backend = "orbit_console.signin.backends.OidcBackend"
        if backend not in settings.AUTHENTICATION_BACKENDS:
            settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
        monkeypatch.setattr(signin_provider, "_cached", None)  # this provider's discovery
        at_provider = AtTheProvider(idp)
        browsers.append(at_provider)
        person = Company(idp=idp, console=Client(), at_provider=at_provider)
        idp.set_account(person.login, groups=["orbit-supervisors"])
        return person

    yield configure
    for browser in browsers:
        browser.close()


@pytest.fixture
def shaped(
    settings: Any, providers: Callable[..., OidcProvider], world: dict[str, Any]
) -> Iterator[Callable[[str], tuple[Company, dict[str, str]]]]:
    """``shaped(name)``: the console set up exactly as docs/sign-in.md's example for the
    provider ``name`` of ``SHAPES`` says, against the run's provider of that provider's shape,
    and a new person there whom the example's first rule admits; with the example's
    environment."""
    browsers: list[AtTheProvider] = []

    def configure_as(name: str) -> tuple[Company, dict[str, str]]:
        shape = SHAPES[name]
        idp = providers(**asdict(shape.quirks))
        env = configure_shape(settings, shape, idp, namespace=world["namespace_id"])
        at_provider = AtTheProvider(idp)
        browsers.append(at_provider)
        person = Company(idp=idp, console=Client(), at_provider=at_provider)
        admitted_by_first_rule(idp, person.login, env)
        return person, env

    yield configure_as
    for browser in browsers:
        browser.close()
