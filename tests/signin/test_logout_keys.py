"""The back-channel logout endpoint's checks and the provider's keys (issue 40, item 6;
``signin/logout.py``, ``signin/keys.py``), against the suite's real provider (and, for a stalled
one, a socket that accepts and never answers): every check a token can fail without the
provider's keys comes first; the keys are kept, fetched once for any number of tokens naming
key ids the provider never published, fetched again only after ``OIDC_JWKS_REFRESH_SECONDS``,
and a stalled provider is asked once while the tokens' wait stays bounded.

What goes to the provider is counted where it leaves: ``provider.fetch_json``, every fetch of the
sign-in's (discovery and keys), wrapped so that it still goes out. The whole endpoint under a
flood, with signed-in people's pages served meanwhile: ``tests/ops/test_anonymous_edge.py``.
"""

import asyncio
import base64
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from orbit_console.signin import keys
from orbit_console.signin import provider as signin_provider
from orbit_console.signin.logout import LogoutTokenRefused, verify_logout_token
from tests.support.oidc import OidcProvider
from tests.support.silent import SilentServer, silent_server

CLIENT = {
    "client_id": "console",
    "client_secret": "a-secret-of-thirty-two-characters!",
    "redirect_uris": ["http://127.0.0.1:9/signin/oidc/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
}
EVENT = {"http://schemas.openid.net/event/backchannel-logout": {}}
FORGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    started = OidcProvider().start([CLIENT])
    yield started
    started.stop()


def configure(settings: Any, monkeypatch: pytest.MonkeyPatch, issuer: str) -> list[str]:
    """The console's settings for ``issuer``, no discovery or keys read yet; the URLs every
    fetch asks the provider for, in order."""
    settings.OIDC_ISSUER = issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT["client_id"]
    settings.OIDC_RP_CLIENT_SECRET = CLIENT["client_secret"]
    settings.OIDC_TIMEOUT = 2
    monkeypatch.setattr(signin_provider, "_cached", None)
    monkeypatch.setattr(keys, "_by_issuer", {})
    fetched: list[str] = []
    fetch = signin_provider.fetch_json

    def counted(url: str) -> dict[str, Any]:
        fetched.append(url)
        return fetch(url)

    monkeypatch.setattr(signin_provider, "fetch_json", counted)
    return fetched


@pytest.fixture
def fetched(settings: Any, monkeypatch: pytest.MonkeyPatch, idp: OidcProvider) -> list[str]:
    return configure(settings, monkeypatch, idp.issuer)


def claims(issuer: str, **changed: Any) -> dict[str, Any]:
    return {
        "iss": issuer,
        "aud": CLIENT["client_id"],
        "iat": int(time.time()),
        "jti": secrets.token_hex(8),
        "sub": "ada",
        "events": EVENT,
        **changed,
    }


def forged(body: dict[str, Any], *, kid: str | None = None, alg: str = "RS256") -> str:
    """Signed with a key the provider never published (``kid``: an invented key id)."""
    header = {"kid": kid if kid is not None else secrets.token_hex(8)}
    key: Any = FORGER if alg.startswith("RS") else "a-shared-secret-of-32-characters"
    return jwt.encode(body, key, algorithm=alg, headers=header)


def verify(*tokens: str) -> list[dict[str, Any] | str]:
    """Each token's claims, or why it was refused; all verified at once."""

    async def one(token: str) -> dict[str, Any] | str:
        try:
            return await verify_logout_token(token)
        except LogoutTokenRefused as refused:
            return str(refused)

    async def all_of() -> list[dict[str, Any] | str]:
        return list(await asyncio.gather(*(one(token) for token in tokens)))

    return asyncio.run(all_of())


def raw(payload: str, header: str = '{"alg":"RS256","kid":"k"}') -> str:
    """A token of exactly this JSON header and payload (which ``jwt.encode`` would not write),
    its signature made up."""
    parts = (header.encode(), payload.encode(), secrets.token_bytes(256))
    return ".".join(base64.urlsafe_b64encode(part).decode().rstrip("=") for part in parts)


def malformed(issuer: str) -> dict[str, str]:
    """Tokens refused on what they say, whoever signed them."""
    hour_ago = int(time.time()) - 3600
    return {
        "not a JWT": "garbage",
        "two parts": "eyJhbGciOiJSUzI1NiJ9.e30",
        "unreadable parts": "eyJh.bGci.T2lK",
        "too long": forged(claims(issuer, padding="x" * 9000)),
        "unsigned": jwt.encode(claims(issuer), None, algorithm="none"),
        "another algorithm": forged(claims(issuer), alg="HS256"),
        "a key id that is not a string": raw(json.dumps(claims(issuer)), '{"alg":"RS256","kid":7}'),
        "another issuer": forged(claims("https://evil.example")),
        "another audience": forged(claims(issuer, aud="another-app")),
        "expired": forged(claims(issuer, iat=hour_ago, exp=hour_ago + 120)),
        "old": forged(claims(issuer, iat=hour_ago)),
        "from the future": forged(claims(issuer, iat=int(time.time()) + 3600)),
        "a time of 1e999": raw(f'{{"iss":"{issuer}","aud":"console","iat":1e999,"jti":"j"}}'),
        "a time of -10**400": raw(
            f'{{"iss":"{issuer}","aud":"console","iat":-{"9" * 400},"jti":"j","sub":"s"}}'
        ),
        "no event": forged(claims(issuer, events={})),
        "a nonce": forged(claims(issuer, nonce="n")),
        "neither sid nor sub": forged(claims(issuer, sub=None)),
        "a jti too long to keep": forged(claims(issuer, jti="j" * 256)),
        "no jti": forged({k: v for k, v in claims(issuer).items() if k != "jti"}),
    }


@pytest.mark.system_extra
def test_malformed_or_misaddressed_logout_tokens_are_refused_before_any_key_is_fetched(
    fetched: list[str], idp: OidcProvider
) -> None:
    """Issue 40: the endpoint fetched the provider's keys for every token, before any check."""
    shapes = malformed(idp.issuer)
    answers = verify(*shapes.values())
    accepted = {why: a for why, a in zip(shapes, answers, strict=True) if not isinstance(a, str)}
    assert accepted == {}
    assert fetched == [], "the provider was asked before the token's own checks"


@pytest.mark.system_extra
def test_invented_key_ids_cost_the_provider_one_fetch_and_its_keys_are_kept(
    fetched: list[str], idp: OidcProvider
) -> None:
    """Issue 40: 16 connections posting RS256 tokens with invented key ids made 120 fetches in
    10 s. Now 60 such tokens at once share one fetch, and 60 more after it make none."""
    issuer = idp.issuer
    first = verify(*(forged(claims(issuer)) for _ in range(60)))
    again = verify(*(forged(claims(issuer)) for _ in range(60)))
    assert set(first + again) == {"no key of the provider's JWKS signed it"}
    keys_fetched = [url for url in fetched if "openid-configuration" not in url]
    assert len(keys_fetched) == 1, fetched
    # The provider's own tokens are verified with the kept keys, nothing asked again.
    [accepted] = verify(idp.sign(claims(issuer)))
    assert isinstance(accepted, dict)
    assert accepted["sub"] == "ada"
    assert len(fetched) == 2  # discovery and the keys, once each


@pytest.mark.system_extra
def test_an_unknown_key_id_reads_the_keys_again_only_after_the_refresh_period(
    fetched: list[str], idp: OidcProvider, settings: Any
) -> None:
    """A provider publishes a key before it signs with it: a key id missing from keys read
    less than ``OIDC_JWKS_REFRESH_SECONDS`` ago is refused without asking; after that, the
    keys are read again, once, and a key published meanwhile is found. (The provider's key
    stands for one published since: the process's keys are set to what it read before.)"""
    settings.OIDC_JWKS_REFRESH_SECONDS = 30
    now = [1000.0]
    held = keys.of_issuer(idp.issuer)
    held.clock = lambda: now[0]
    held._keys, held._fetched_at, held._tried_at = [], now[0], now[0]  # read before it was
    token = idp.sign(claims(idp.issuer))

    now[0] += 29
    assert verify(token) == ["no key of the provider's JWKS signed it"]
    assert fetched == []
    now[0] += 2
    [accepted] = verify(token)
    assert isinstance(accepted, dict), accepted
    assert len([url for url in fetched if url.endswith("/jwks")]) == 1
    assert verify(forged(claims(idp.issuer))) == ["no key of the provider's JWKS signed it"]
    assert len([url for url in fetched if url.endswith("/jwks")]) == 1


@pytest.mark.system_extra
def test_kept_keys_past_their_age_still_serve_while_they_are_read_again(
    fetched: list[str], idp: OidcProvider, settings: Any
) -> None:
    settings.OIDC_JWKS_CACHE_SECONDS = 3600
    now = [1000.0]
    held = keys.of_issuer(idp.issuer)
    held.clock = lambda: now[0]
    assert isinstance(verify(idp.sign(claims(idp.issuer)))[0], dict)
    assert len(fetched) == 2
    now[0] += 3601
    assert isinstance(verify(idp.sign(claims(idp.issuer)))[0], dict)
    keys._fetcher.submit(lambda: None).result(timeout=10)  # the read again, in the background
    assert len([url for url in fetched if url.endswith("/jwks")]) == 2


@pytest.fixture
def stalled(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SilentServer, str]]:
    with silent_server() as silent:
        issuer = f"http://127.0.0.1:{silent.port}"
        configure(settings, monkeypatch, issuer)
        yield silent, issuer


def test_a_stalled_provider_is_asked_once_and_the_tokens_wait_a_bounded_time(
    stalled: tuple[SilentServer, str],
) -> None:
    """Issue 40: with the provider stalled, three posts each waited for its keys on the request
    thread, one after the other. Now three tokens wait for one fetch, at most
    ``OIDC_TIMEOUT_SECONDS``; the next is refused at once (the keys were tried less than
    ``OIDC_JWKS_REFRESH_SECONDS`` ago), and the provider was asked once."""
    silent, issuer = stalled
    began = time.monotonic()
    answers = verify(*(forged(claims(issuer)) for _ in range(3)))
    waited = time.monotonic() - began
    assert answers == ["the provider's keys could not be read"] * 3
    keys._fetcher.submit(lambda: None).result(timeout=10)  # the fetch has given up too
    assert verify(forged(claims(issuer))) == ["the provider's keys could not be read"]
    assert len(silent.held) == 1, "the stalled provider was asked more than once"
    print(f"three tokens, a stalled provider: refused after {waited:.2f} s (bound 2 s)")
