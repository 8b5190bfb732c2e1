"""The company's identity provider: whether it is configured, and its endpoints, read from the
issuer's discovery document (``/.well-known/openid-configuration``).

Outgoing HTTP to the provider goes through ``fetch_json``: a timeout and a size cap. The issuer
is the administrator's (an environment variable), not something a person types, so loopback
and private addresses are allowed (an identity provider inside the network is common).
"""

import threading
import time
from typing import Any

import httpx
from django.conf import settings

MAX_DOCUMENT_BYTES = 512 * 1024
DISCOVERY_SECONDS = 3600

_lock = threading.Lock()
_cached: tuple[float, dict[str, Any]] | None = None


class ProviderUnavailable(Exception):
    """The provider did not answer, or answered something that is not what was asked."""


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def display_name() -> str:
    return str(settings.OIDC_PROVIDER_NAME)


def fetch_json(url: str) -> dict[str, Any]:
    """A GET of a JSON object, in ``OIDC_TIMEOUT`` for the whole exchange (an answer dripped a
    byte at a time never trips a read timeout) and at most ``MAX_DOCUMENT_BYTES``."""
    deadline = time.monotonic() + settings.OIDC_TIMEOUT
    try:
        with httpx.stream("GET", url, timeout=settings.OIDC_TIMEOUT) as answer:
            if answer.status_code != 200:
                raise ProviderUnavailable(f"{url} answered {answer.status_code}")
            body = b""
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise ProviderUnavailable(f"{url} answered more than {MAX_DOCUMENT_BYTES} B")
                if time.monotonic() > deadline:
                    raise ProviderUnavailable(f"{url} took longer than {settings.OIDC_TIMEOUT} s")
    except httpx.HTTPError as failed:
        raise ProviderUnavailable(f"{url}: {type(failed).__name__}") from None
    try:
        document = httpx.Response(200, content=body).json()
    except ValueError:
        raise ProviderUnavailable(f"{url} answered something that is not JSON") from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} answered something that is not a JSON object")
    return document


def fetch_json_with_token(url: str, access_token: str) -> dict[str, Any]:
    """A GET with a bearer token (userinfo), with the same timeout and size cap."""
    try:
        answer = httpx.get(
            url,
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=settings.OIDC_TIMEOUT,
        )
    except httpx.HTTPError:
        raise ProviderUnavailable(f"{url} did not answer") from None
    if answer.status_code != 200 or len(answer.content) > MAX_DOCUMENT_BYTES:
        raise ProviderUnavailable(f"{url} answered {answer.status_code}")
    try:
        document = answer.json()
    except ValueError:
        raise ProviderUnavailable(f"{url} answered something that is not JSON") from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} answered something that is not a JSON object")
    return document


def issuer() -> str:
    """``OIDC_ISSUER`` exactly as set: issuers are compared as exact strings (OpenID Connect
    Core 3.1.3.7, Discovery 4.3), a final "/" included (Auth0, Authentik, Ory Hydra end theirs
    with one)."""
    return str(settings.OIDC_ISSUER)


def discovery() -> dict[str, Any]:
    """The issuer's discovery document, fetched at most once an hour per process."""
    global _cached
    with _lock:
        if _cached is not None and time.monotonic() - _cached[0] < DISCOVERY_SECONDS:
            return _cached[1]
    # Discovery 4: a terminating "/" of the issuer goes before the well-known path is appended.
    document = fetch_json(f"{issuer().rstrip('/')}/.well-known/openid-configuration")
    named = document.get("issuer")
    if named != issuer():
        raise ProviderUnavailable(
            f"the discovery document names the issuer {str(named)[:300]!r} and OIDC_ISSUER is "
            f"{issuer()!r}: they must be the same string"
        )
    with _lock:
        _cached = (time.monotonic(), document)
    return document


def endpoint(name: str) -> str:
    """``authorization_endpoint``, ``token_endpoint``, ``userinfo_endpoint``, ``jwks_uri``,
    ``end_session_endpoint``: from the discovery document."""
    value = discovery().get(name)
    if not isinstance(value, str) or not value:
        raise ProviderUnavailable(f"the discovery document has no {name}")
    return value


# mozilla-django-oidc's settings for the provider's endpoints, answered from discovery.
ENDPOINT_SETTINGS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


def client_credentials(data: dict[str, str]) -> tuple[dict[str, str], tuple[str, str] | None]:
    """``data`` for the token endpoint with the client's credentials, as
    ``OIDC_TOKEN_AUTH_METHOD`` says, and the HTTP Basic credentials to send with it, if any: the
    one way every call to the token endpoint authenticates (mozilla-django-oidc's sign-in reads
    the same setting as ``OIDC_TOKEN_USE_BASIC_AUTH``)."""
    client = (settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET)
    if settings.OIDC_TOKEN_AUTH_METHOD == "client_secret_basic":  # noqa: S105 -- a name
        return data, client
    return {**data, "client_id": client[0], "client_secret": client[1]}, None


def library_setting(name: str, *default: Any) -> Any:
    """What mozilla-django-oidc reads as a setting: its endpoints from discovery, the rest
    from settings."""
    if name in ENDPOINT_SETTINGS:
        return endpoint(ENDPOINT_SETTINGS[name])
    if default:
        return getattr(settings, name, default[0])
    return getattr(settings, name)
