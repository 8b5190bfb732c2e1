"""``manage.py signin check`` (docs/sign-in.md, "Checking the settings against the provider"):
what company sign-in will meet at the provider, asked of the provider itself before anyone
signs in — its discovery document and keys against the settings, the client's credentials at
the token endpoint, and the very requests the console sends to the authorization endpoint.

Each finding is ``ok``, a ``note`` (worth knowing, fails nothing) or ``FAIL`` (will fail, with
what to change). Nothing is signed in and nothing changes; no secret or token is printed.
"""

import base64
import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import httpx
from django.conf import settings
from django.urls import reverse

from orbit_console.lib.namespaces import NamespaceAmbiguous, NamespaceNotFound
from orbit_console.signin import flows, provider

OK, NOTE, FAIL = "ok", "note", "FAIL"
# Claims of every ID token (OpenID Connect Core 2): a rule reading one needs no note.
STANDARD_CLAIMS = {"sub", "iss", "aud", "exp", "iat", "nonce", "auth_time", "acr", "sid"}


@dataclass(frozen=True)
class Finding:
    level: str
    text: str

    def __str__(self) -> str:
        return f"{self.level:<4}  {self.text}"


def callback_url() -> str:
    return settings.CONSOLE_BASE_URL.rstrip("/") + reverse("signin:oidc_callback")


def check() -> list[Finding]:
    """Every finding, in the order an administrator would fix them."""
    if not provider.enabled():
        return [Finding(FAIL, "OIDC_ISSUER is not set: company sign-in is off")]
    return list(_findings())


def _findings() -> Iterator[Finding]:
    issuer = provider.issuer()
    url = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
    try:
        document = provider.fetch_json(url)
    except provider.ProviderUnavailable as unavailable:
        yield Finding(FAIL, f"the discovery document: {unavailable}")
        return
    yield from _issuer(document, issuer)
    missing = [
        name
        for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")
        if not isinstance(document.get(name), str) or not document[name]
    ]
    if missing:
        yield Finding(FAIL, f"the discovery document has no {', '.join(missing)}")
        return
    yield Finding(OK, f"discovery: {url}")
    yield from _keys(document)
    yield from _client(document)
    yield from _authorization(document)
    yield from _claims(document)
    yield from _namespaces()
    yield from _logout(document)


def _issuer(document: dict[str, Any], issuer: str) -> Iterator[Finding]:
    named = document.get("issuer")
    if named == issuer:
        yield Finding(OK, f"the issuer is exactly OIDC_ISSUER ({issuer})")
    elif isinstance(named, str) and named.rstrip("/") == issuer.rstrip("/"):
        yield Finding(
            FAIL,
            f"the provider's issuer is {named!r} and OIDC_ISSUER is {issuer!r}: issuers are "
            f"compared as exact strings, a final '/' included: set OIDC_ISSUER={named}",
        )
    else:
        yield Finding(
            FAIL,
            f"the discovery document names the issuer {str(named)[:300]!r}, not OIDC_ISSUER "
            f"{issuer!r}",
        )


def _keys(document: dict[str, Any]) -> Iterator[Finding]:
    algorithm = settings.OIDC_RP_SIGN_ALGO
    offered = document.get("id_token_signing_alg_values_supported")
    if isinstance(offered, list) and algorithm not in offered:
        yield Finding(
            FAIL,
            f"OIDC_SIGN_ALGO is {algorithm} and the provider signs ID tokens with "
            f"{', '.join(map(str, offered))}",
        )
    try:
        jwks = provider.fetch_json(document["jwks_uri"])
    except provider.ProviderUnavailable as unavailable:
        yield Finding(FAIL, f"the keys (jwks_uri): {unavailable}")
        return
    family = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}.get(algorithm[:2])
    keys = [key for key in jwks.get("keys", []) if isinstance(key, dict)]
    usable = [
        key
        for key in keys
        if key.get("kty") == family
        and key.get("use", "sig") == "sig"
        and key.get("alg", algorithm) == algorithm
    ]
    if usable:
        yield Finding(OK, f"keys: {len(usable)} of the provider's {len(keys)} verify {algorithm}")
    else:
        yield Finding(
            FAIL,
            f"the provider's keys ({len(keys)}) hold none for {algorithm} (OIDC_SIGN_ALGO): "
            "every ID token would be refused (authentik: choose a signing key for the provider)",
        )


def _client(document: dict[str, Any]) -> Iterator[Finding]:
    """The token endpoint is sent a code that cannot exist, with the client's credentials as
    sign-in sends them: ``invalid_grant`` means the client was recognised."""
    data = {
        "grant_type": "authorization_code",
        "code": secrets.token_urlsafe(24),
        "redirect_uri": callback_url(),
        "code_verifier": secrets.token_urlsafe(48),
    }
    data, auth = provider.client_credentials(data)
    try:
        answer = httpx.post(
            document["token_endpoint"], data=data, auth=auth, timeout=settings.OIDC_TIMEOUT
        )
    except httpx.HTTPError as failed:
        yield Finding(FAIL, f"the token endpoint did not answer ({type(failed).__name__})")
        return
    error = _error_of(answer)
    if error == "invalid_grant":
        yield Finding(OK, "the token endpoint accepts OIDC_CLIENT_ID and OIDC_CLIENT_SECRET")
    elif error in ("invalid_client", "unauthorized_client") or answer.status_code == 401:
        yield Finding(
            FAIL,
            f"the token endpoint refuses OIDC_CLIENT_ID {settings.OIDC_RP_CLIENT_ID!r} with "
            f"OIDC_CLIENT_SECRET ({error or answer.status_code}): check both at the provider",
        )
    else:
        yield Finding(
            NOTE,
            f"the token endpoint answered a made-up code with {error or answer.status_code}: "
            "whether it knows the client is not certain",
        )
    # Discovery's default when the member is absent is client_secret_basic (Discovery 3).
    methods = document.get("token_endpoint_auth_methods_supported", ["client_secret_basic"])
    method = settings.OIDC_TOKEN_AUTH_METHOD
    if isinstance(methods, list) and method not in methods:
        yield Finding(
            FAIL,
            f"the provider does not list {method} (OIDC_TOKEN_AUTH_METHOD), how the console "
            f"sends the client's secret (it lists {', '.join(map(str, methods))})",
        )


def _error_of(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return ""
    return str(body.get("error", ""))[:100] if isinstance(body, dict) else ""


def _authorization(document: dict[str, Any]) -> Iterator[Finding]:
    scopes = settings.OIDC_RP_SCOPES.split()
    if "openid" not in scopes:
        yield Finding(FAIL, "OIDC_SCOPES lacks openid: there would be no ID token")
    listed = document.get("scopes_supported")
    if isinstance(listed, list):
        unlisted = [scope for scope in scopes if scope not in listed]
        if unlisted:
            yield Finding(
                NOTE,
                f"the provider does not list the scope(s) {', '.join(unlisted)} of OIDC_SCOPES "
                "(some list only some; the request below says whether they are refused)",
            )
    methods = document.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        yield Finding(FAIL, "the provider does not list PKCE's S256, which sign-in uses")
    requests: list[tuple[str, dict[str, str]]] = [("the sign-in request", {})]
    if settings.OIDC_STEP_UP == "login" and settings.STEP_UP_MAX_AGE_SECONDS:
        requests.append(
            ("the step-up request (prompt=login, max_age=0)", flows.params(flows.STEP_UP))
        )
    for what, extra in requests:
        yield _authorization_request(document["authorization_endpoint"], what, extra)
    if settings.OIDC_STEP_UP == "auth_time" and "auth_time" not in _claims_listed(document):
        yield Finding(
            NOTE,
            "OIDC_STEP_UP=auth_time needs auth_time in the ID token and the provider does not "
            "list it (Google: turn on session age claims)",
        )
    if "offline_access" not in scopes:
        yield Finding(
            NOTE,
            "no offline_access in OIDC_SCOPES: without a refresh token the re-check goes through "
            "the browser with prompt=none (docs/access.md)",
        )


def _authorization_request(endpoint: str, what: str, extra: dict[str, str]) -> Finding:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    params = {
        "response_type": "code",
        "client_id": settings.OIDC_RP_CLIENT_ID,
        "redirect_uri": callback_url(),
        "scope": settings.OIDC_RP_SCOPES,
        "state": secrets.token_urlsafe(16),
        "nonce": secrets.token_urlsafe(16),
        "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
        **extra,
    }
    if settings.OIDC_ACR_VALUES:
        params["acr_values"] = settings.OIDC_ACR_VALUES
    separator = "&" if urlparse(endpoint).query else "?"
    try:
        answer = httpx.get(
            f"{endpoint}{separator}{urlencode(params)}", timeout=settings.OIDC_TIMEOUT
        )
    except httpx.HTTPError as failed:
        return Finding(
            FAIL, f"{what}: the authorization endpoint did not answer ({type(failed).__name__})"
        )
    if answer.is_redirect:
        location = urljoin(endpoint, answer.headers.get("location", ""))
        back = parse_qs(urlparse(location).query)
        if location.startswith(callback_url()) and "error" in back:
            error = back["error"][0][:100]
            description = back.get("error_description", [""])[0][:300]
            return Finding(FAIL, f"{what} is refused: {error} {description!r}".rstrip())
        return Finding(OK, f"{what} is accepted (the provider goes on to its sign-in)")
    if answer.status_code == 200:
        return Finding(OK, f"{what} is accepted (the provider shows its sign-in)")
    return Finding(
        FAIL,
        f"{what}: the provider answered {answer.status_code} without sending the browser back — "
        f"most often the redirect URI {callback_url()} (CONSOLE_BASE_URL) is not registered "
        "for the client, or the client id is unknown",
    )


def _claims_listed(document: dict[str, Any]) -> list[str]:
    listed = document.get("claims_supported")
    return [str(claim) for claim in listed] if isinstance(listed, list) else []


def _claims(document: dict[str, Any]) -> Iterator[Finding]:
    listed = _claims_listed(document)
    groups = settings.OIDC_GROUPS_CLAIM
    read = [groups if rule.claim is None else rule.claim for rule in settings.OIDC_ROLE_RULES]
    if not listed:
        return
    unlisted = sorted({claim for claim in read if claim not in listed} - STANDARD_CLAIMS)
    if unlisted:
        yield Finding(
            NOTE,
            f"the rules read {', '.join(unlisted)}, which the provider does not list among its "
            "claims (custom claims often go unlisted; a first sign-in tells)",
        )
    else:
        yield Finding(OK, f"the claims the rules read are listed: {', '.join(sorted(set(read)))}")


def _namespaces() -> Iterator[Finding]:
    if not settings.ORBIT_API_EMBEDDED:
        return
    from orbit_console.people.namespaces import known_namespaces

    known = known_namespaces()
    for position, rule in enumerate(settings.OIDC_ROLE_RULES, 1):
        for name in rule.namespaces:
            try:
                known.id_of(name)
            except NamespaceAmbiguous as ambiguous:
                yield Finding(FAIL, f"OIDC_ROLE_RULES rule {position}: {ambiguous}")
            except NamespaceNotFound as missing:
                yield Finding(
                    NOTE, f"OIDC_ROLE_RULES rule {position}: {missing} (skipped until it exists)"
                )


def _logout(document: dict[str, Any]) -> Iterator[Finding]:
    if document.get("backchannel_logout_supported") is True:
        yield Finding(
            OK,
            "back-channel logout is offered: register "
            f"{settings.CONSOLE_BASE_URL.rstrip('/')}{reverse('signin:oidc_backchannel_logout')}"
            " at the provider (with the session required)",
        )
    else:
        yield Finding(
            NOTE,
            "no back-channel logout: a person removed at the provider loses access within "
            f"OIDC_RECHECK_SECONDS ({settings.OIDC_RECHECK_SECONDS} s), before deciding within "
            f"OIDC_DECISION_RECHECK_SECONDS ({settings.OIDC_DECISION_RECHECK_SECONDS} s)",
        )
    if not document.get("end_session_endpoint"):
        yield Finding(NOTE, "no end_session_endpoint: signing out ends the console's session only")
