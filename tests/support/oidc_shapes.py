"""The documented providers' shapes (issue 40 item 3): for each worked example of
docs/sign-in.md, the suite's provider shaped as that provider is (``Quirks``, from the
provider's own documentation) and the console configured with the example's settings exactly
as written there — read from the document, so an example that stops working fails a test.

Only what must differ in the suite is replaced: the issuer, client id and secret become the
suite provider's (the issuer still ends with "/" exactly where the example's does), and the
namespace the rules name (``payments``) becomes the test's.
"""

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings

from orbit_console.signin.rules import parse_filter, parse_rules
from tests.support.oidc import OidcProvider, Quirks

DOC = Path(django_settings.BASE_DIR) / "docs" / "sign-in.md"
EXAMPLE_NAMESPACE = "payments"


@dataclass(frozen=True)
class Shape:
    heading: str  # the example's heading in docs/sign-in.md
    quirks: Quirks


SHAPES = {
    "okta": Shape(
        "Okta",
        # /oauth2/default: no "groups" scope (refused), the groups claim in any scope, auth_time
        # in every ID token, no back-channel logout.
        Quirks(
            auth_time="always",
            groups_scope=False,
            backchannel_logout=False,
            scopes=("openid", "profile", "email", "offline_access", "address", "phone"),
            client_auth="client_secret_basic",  # a Web Application's "Client secret"
        ),
    ),
    "entra": Shape(
        "Microsoft Entra ID",
        # App roles in "roles", auth_time as the optional claim the example adds, front-channel
        # logout only.
        Quirks(
            auth_time="always",
            groups_claim="roles",
            groups_scope=False,
            backchannel_logout=False,
        ),
    ),
    "google": Shape(
        "Google",
        # No refresh token with "openid profile email", no prompt=login, auth_time with session
        # age claims on, no back-channel logout, no groups (hd).
        Quirks(
            auth_time="always",
            refresh_tokens=False,
            prompt_login=False,
            backchannel_logout=False,
        ),
    ),
    "keycloak": Shape(
        "Keycloak",
        # Unknown scopes refused, groups from a mapper on the client's own scope, auth_time in
        # every ID token, back-channel logout.
        Quirks(
            auth_time="always",
            groups_scope=False,
            scopes=("openid", "profile", "email", "offline_access", "roles", "web-origins", "acr"),
        ),
    ),
    "auth0": Shape(
        "Auth0",
        # An issuer ending in "/", groups in a namespaced claim an Action sets, auth_time only
        # when asked (max_age), back-channel logout.
        Quirks(
            issuer_trailing_slash=True,
            groups_claim="https://orbit.example/groups",
            groups_scope=False,
            client_auth="client_secret_post",  # a Regular Web Application's "Post"
        ),
    ),
    "authentik": Shape(
        "authentik",
        # An issuer ending in "/", groups in the profile scope's claims.
        Quirks(issuer_trailing_slash=True, groups_scope=False),
    ),
}


def example(heading: str) -> dict[str, str]:
    """The environment of the first ``sh`` block under ``### heading`` in docs/sign-in.md."""
    text = DOC.read_text()
    section = re.search(rf"^### {re.escape(heading)}\n(.*?)(?=^##)", text, re.S | re.M)
    assert section, f"docs/sign-in.md has no example {heading!r}"
    block = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    assert block, f"the example {heading!r} has no sh block"
    env = {}
    for line in block.group(1).splitlines():
        [assignment] = shlex.split(line)
        name, value = assignment.split("=", 1)
        env[name] = value
    return env


def configure(settings: Any, shape: Shape, idp: OidcProvider, *, namespace: str) -> dict[str, str]:
    """The console (pytest-django's ``settings``) set up as ``shape``'s example says, against
    ``idp``: the example's environment."""
    from tests.support.oidc_signin import CLIENT_ID, CLIENT_SECRET

    env = example(shape.heading)
    assert env["OIDC_ISSUER"].endswith("/") == shape.quirks.issuer_trailing_slash
    settings.OIDC_ISSUER = idp.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = env["OIDC_PROVIDER_NAME"]
    settings.OIDC_RP_SCOPES = env.get("OIDC_SCOPES", "openid profile email groups")
    settings.OIDC_GROUPS_CLAIM = env.get("OIDC_GROUPS_CLAIM", "groups")
    settings.OIDC_GROUPS_FILTER = parse_filter(env.get("OIDC_GROUPS_FILTER", ""))
    settings.OIDC_STEP_UP = env.get("OIDC_STEP_UP", "login")
    settings.OIDC_TOKEN_AUTH_METHOD = env.get("OIDC_TOKEN_AUTH_METHOD", "client_secret_post")
    settings.OIDC_TOKEN_USE_BASIC_AUTH = settings.OIDC_TOKEN_AUTH_METHOD == "client_secret_basic"
    rules = json.loads(env["OIDC_ROLE_RULES"])
    for rule in rules:
        rule["namespaces"] = [
            namespace if named == EXAMPLE_NAMESPACE else named for named in rule["namespaces"]
        ]
    settings.OIDC_ROLE_RULES = parse_rules(json.dumps(rules))
    backend = "orbit_console.signin.backends.OidcBackend"
    if backend not in settings.AUTHENTICATION_BACKENDS:
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    from orbit_console.signin import provider as signin_provider

    signin_provider._cached = None  # this provider's discovery document
    return env


def admitted_by_first_rule(idp: OidcProvider, login: str, env: dict[str, str]) -> None:
    """``login`` at ``idp`` holds what the example's first rule admits: its value in the claim
    it reads (the groups claim, or another such as Google's ``hd``)."""
    [first, *_] = json.loads(env["OIDC_ROLE_RULES"])
    if "claim" in first:
        idp.set_account(login, groups=[], claims={first["claim"]: first["value"]})
    else:
        idp.set_account(login, groups=[first["value"]])
