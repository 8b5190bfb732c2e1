"""A real OpenID Connect provider for the sign-in tests: panva's certified ``oidc-provider`` on
the machine's Node.js (``tests/support/oidc/provider.mjs``, its version pinned by the committed
``package-lock.json``).

As with Chromium (``tests/support/chromium.py``) and the deployment tools
(``tests/support/tools.py``): off CI, a machine without Node.js or without the provider
installed skips the tests that need it, and the run ends with one line saying how to get it;
under CI (``CI`` set) a missing provider fails the run.
"""

import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal
from urllib.parse import urljoin

import httpx
import pytest

from tests.support.servers import LOG_DIR, LoggedProcess, free_port, wait_answering

HERE = Path(__file__).parent / "oidc"
HOW_TO_GET = (
    "install Node.js 18 or later ('apt-get install nodejs npm') and the test provider "
    "('npm ci --prefix tests/support/oidc')"
)


def node() -> str:
    """The path of ``node`` with the provider installed; skips the calling test without them
    (fails under CI)."""
    path = shutil.which("node")
    installed = (HERE / "node_modules" / "oidc-provider" / "package.json").exists()
    if path and installed:
        return path
    message = f"no OpenID Connect provider: {HOW_TO_GET}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}")
    pytest.skip(message)


@dataclass(frozen=True)
class Quirks:
    """How a provider departs from the suite's usual one, as real providers do: the console is
    tested against each shape it must meet, not only the one configuration
    (``provider.mjs`` applies them; a name it does not know stops its start).

    To add a quirk: a field here, with the providers that have it, and the same name in
    ``provider.mjs``'s ``QUIRKS`` with what it changes there."""

    # The issuer ends with "/" (and so does every token's ``iss``): Auth0, Authentik, Ory Hydra.
    issuer_trailing_slash: bool = False
    # False: no refresh token is issued. Google with ``openid profile email``; any provider
    # whose client is not allowed ``offline_access``.
    refresh_tokens: bool = True
    # "when_asked": ``auth_time`` only in ID tokens of a request with ``max_age`` (or
    # ``prompt=login``), as oidc-provider does by default and many certified providers do;
    # "always": in every ID token, as Okta and Keycloak.
    auth_time: Literal["when_asked", "always"] = "when_asked"
    # The groups claim rides in the ID token too, not only in userinfo.
    groups_in_id_token: bool = False
    # The claim that carries the groups: Entra ID's app roles ("roles"), Auth0's namespaced
    # claim set by an Action.
    groups_claim: str = "groups"
    # False: no "groups" scope asks for the groups claim; it rides in every ID token (Okta's
    # claim "included in any scope", Keycloak's mapper on the client's own scope, Entra ID,
    # Auth0, Authentik).
    groups_scope: bool = True
    # False: no back-channel logout (Okta, Entra ID, Google): not in discovery, none sent.
    backchannel_logout: bool = True
    # False: prompt=login is refused (invalid_request): Google takes none, consent and
    # select_account only.
    prompt_login: bool = True
    # The one way the token endpoint takes the client's secret, the other refused (401
    # invalid_client): "client_secret_post" (Auth0's "Post" applications), "client_secret_basic"
    # (Okta's default). None: either, as oidc-provider itself.
    client_auth: Literal["client_secret_post", "client_secret_basic"] | None = None
    # The only scopes a request may ask for, any other refused (invalid_scope): Okta's default
    # authorization server without a "groups" scope, Keycloak 10+ with an unknown one. None:
    # oidc-provider's own way, which leaves out scopes it does not know.
    scopes: tuple[str, ...] | None = None


def console_client(console_url: str, client_id: str, client_secret: str) -> dict[str, Any]:
    """A console served at ``console_url`` as a client of the provider: the code flow with
    refresh tokens, its callback, its sign-in page after logout, and its back-channel logout
    endpoint (left out by a provider of the shape ``backchannel_logout=False``)."""
    return {
        "client_id": client_id,
        "client_secret": client_secret,
        "redirect_uris": [f"{console_url}/signin/oidc/callback"],
        "post_logout_redirect_uris": [f"{console_url}/signin"],
        "grant_types": ["authorization_code", "refresh_token"],
        "backchannel_logout_uri": f"{console_url}/signin/oidc/backchannel-logout",
        "backchannel_logout_session_required": True,
    }


class OidcProvider(LoggedProcess):
    """One provider process on a port of its own; ``clients`` is oidc-provider's client
    metadata (``client_id``, ``client_secret``, ``redirect_uris``, ...)."""

    def __init__(self, quirks: Quirks | None = None) -> None:
        self.port = free_port()
        self.quirks = quirks or Quirks()
        # Where it answers; the issuer is that, exactly as the provider spells it.
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.issuer = self.base_url + ("/" if self.quirks.issuer_trailing_slash else "")
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"oidc-provider-{self.port}-{os.getpid()}.log"

    def start(self, clients: list[dict[str, Any]]) -> "OidcProvider":
        executable = node()
        env = {
            **os.environ,
            "OIDC_PORT": str(self.port),
            "OIDC_CLIENTS": json.dumps(clients),
            "OIDC_QUIRKS": json.dumps(asdict(self.quirks)),
        }
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [executable, str(HERE / "provider.mjs")],
            cwd=HERE,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_answering(self.discovery_url, self.process, 60, interval=0.1)
        except AssertionError as failed:
            raise RuntimeError(
                f"the OpenID Connect provider: {failed}; see {self.log_path}"
            ) from None
        return self

    @property
    def discovery_url(self) -> str:
        return f"{self.base_url}/.well-known/openid-configuration"

    # What the identity team does at the provider.
    def set_account(
        self,
        sub: str,
        *,
        groups: list[str] | None = None,
        disabled: bool | None = None,
        claims: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``claims`` go over the provider's defaults for the person (``preferred_username``
        is the ``sub``, ``email`` ``sub@example.com``, ``email_verified`` true); ``None`` for a
        claim leaves it out."""
        body: dict[str, Any] = {}
        if groups is not None:
            body["groups"] = groups
        if disabled is not None:
            body["disabled"] = disabled
        if claims is not None:
            body["claims"] = claims
        done = httpx.put(f"{self.base_url}/test/accounts/{sub}", json=body, timeout=10)
        done.raise_for_status()
        return dict(done.json())

    def backchannel_logout(self, sub: str) -> list[dict[str, Any]]:
        """Send every client a logout token for ``sub``'s sessions; what each answered."""
        done = httpx.post(f"{self.base_url}/test/backchannel/{sub}", timeout=30)
        done.raise_for_status()
        return list(done.json()["sent"])

    def sign(self, claims: dict[str, Any], *, typ: str | None = None) -> str:
        """A JWT of ``claims`` signed with the provider's own key."""
        done = httpx.post(f"{self.base_url}/test/sign", json={"claims": claims, "typ": typ})
        done.raise_for_status()
        return str(done.json()["token"])


class AtTheProvider:
    """A browser's side at the provider, without a browser: its cookies there (so its session
    at the provider, once signed in), the provider's redirects followed and its own sign-in form
    filled. For tests that drive the console in-process (Django's test client) and need only
    the provider to be real."""

    def __init__(self, provider: OidcProvider) -> None:
        self.provider = provider
        self.http = httpx.Client(timeout=30)
        self.asked_to_sign_in = False

    def authorize(self, url: str, *, login: str | None = None) -> str:
        """Follow the authorization request ``url`` until the provider sends the browser away
        (to the console's callback, with a code or an error): where to. Signs in as ``login``
        when the provider asks for it (``asked_to_sign_in`` says whether it did); asked
        without a ``login``, fails."""
        self.asked_to_sign_in = False
        answer = self.http.get(url)
        for _ in range(12):
            if answer.is_redirect:
                url = urljoin(url, answer.headers["location"])
                if not url.startswith(self.provider.base_url + "/"):
                    return url
                answer = self.http.get(url)
                continue
            form = re.search(r'<form[^>]*action="([^"]+)"', answer.text)
            if answer.status_code != 200 or form is None or 'name="login"' not in answer.text:
                raise AssertionError(f"the provider answered {answer.status_code}: {answer.text}")
            assert login is not None, "the provider asked to sign in"
            self.asked_to_sign_in = True
            fields = {"prompt": "login", "login": login, "password": "any password"}
            answer = self.http.post(urljoin(url, form.group(1)), data=fields)
        raise AssertionError("the provider never sent the browser back")

    def forget(self) -> None:
        """Its cookies at the provider go (a browser of its own, signed in nowhere)."""
        self.http.cookies.clear()

    def close(self) -> None:
        self.http.close()
