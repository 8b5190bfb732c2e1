"""Generated input at the sign-in edge (issue 40): the anonymous endpoints — the sign-in page and
form, company sign-in's start and callback, back-channel logout — under requests schemathesis
generates, sent over real HTTP to a console configured for a real OpenID Connect provider.

    uv run python bench/fuzz_signin.py [--requests 2000] [--seed 0] [--label L]

The console's pages have no OpenAPI document; ``signin_document`` describes these endpoints'
parameters (what a browser, a provider's redirect or a provider's back-channel call can send),
and schemathesis generates requests valid by it (positive generation, as ``fuzz_api.py`` does for
the recovery API). A logout token is generated as what it must look like and in every way it
can fail (``logout_tokens``): compact JWS of generated headers and claims — every algorithm,
key ids the provider published and invented ones, issuers and audiences right and wrong, times
from now to ``1e999`` and ``-10**400``, ``jti`` of any type and length, events present or not —
with made-up signatures, besides raw text. The form's POST carries the session's CSRF token, so
that it reaches the sign-in itself (and django-axes' pause).

Every answer must be one of the endpoints' own: a 5xx is a finding (the requests are sent one
at a time, so the console is never busy). Printed and written to
``var/bench/fuzz_signin[-<label>].json`` (docs/reliability.md); ``tests/ops/test_anonymous_edge.py``
runs the same driver at a small fixed budget in the suite. Needs Node.js and the suite's provider
(``npm ci --prefix tests/support/oidc``).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import requests
import schemathesis
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench.fuzz_api and tests.support from here
    sys.path.insert(0, str(ROOT))
from bench.fuzz_api import Findings, send_all  # noqa: E402

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"
LOGOUT_JWT_FORMAT = "orbit-logout-jwt"


FORGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def invented_key_logout_token(issuer: str, audience: str) -> str:
    """A logout token as a provider would send it, addressed to the console, signed with a
    key id the provider never published (issue 40's flood)."""
    claims = {
        "iss": issuer,
        "aud": audience,
        "iat": int(time.time()),
        "jti": secrets.token_hex(8),
        "sub": f"someone-{secrets.token_hex(3)}",
        "events": {BACKCHANNEL_EVENT: {}},
    }
    return jwt.encode(claims, FORGER, algorithm="RS256", headers={"kid": secrets.token_hex(8)})


def signin_document() -> dict[str, Any]:
    """The anonymous endpoints' parameters, as an OpenAPI document."""
    text = {"type": "string", "maxLength": 300}
    answers = {"default": {"description": "the endpoint's page or answer"}}

    def query(*names: str) -> list[dict[str, Any]]:
        return [{"name": name, "in": "query", "required": False, "schema": text} for name in names]

    def form(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        schema = {"type": "object", "properties": properties, "required": required}
        return {
            "required": True,
            "content": {"application/x-www-form-urlencoded": {"schema": schema}},
        }

    return {
        "openapi": "3.0.3",
        "info": {"title": "Orbit Console: the sign-in edge", "version": "1"},
        "paths": {
            "/signin": {
                "get": {"parameters": query("next"), "responses": answers},
                "post": {
                    "parameters": query("next"),
                    "requestBody": form(
                        {"username": text, "password": text, "next": text},
                        ["username", "password"],
                    ),
                    "responses": answers,
                },
            },
            "/signin/oidc": {"get": {"parameters": query("next"), "responses": answers}},
            "/signin/oidc/callback": {
                "get": {
                    "parameters": query(
                        "code", "state", "error", "error_description", "iss", "session_state"
                    ),
                    "responses": answers,
                }
            },
            "/signin/oidc/backchannel-logout": {
                "post": {
                    "requestBody": form(
                        {"logout_token": {"type": "string", "format": LOGOUT_JWT_FORMAT}},
                        ["logout_token"],
                    ),
                    "responses": answers,
                }
            },
        },
    }


def _segment(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _mostly(usual: st.SearchStrategy[Any], *others: st.SearchStrategy[Any]) -> Any:
    """``usual`` three times in four, else one of ``others`` (``st.one_of`` weighs its
    branches alike, and the same branch given twice counts once)."""
    return st.integers(0, 3).flatmap(lambda n: usual if n else st.one_of(*others))


def logout_tokens(issuer: str, audience: str, kids: list[str]) -> st.SearchStrategy[str]:
    """Logout tokens as they must look and in every way they can fail (the module's
    docstring), their signatures made up: mostly what a provider sends, each part sometimes
    anything, so that every check is reached."""
    now = int(time.time())
    anything = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=40),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    )
    times = _mostly(
        st.integers(now - 400, now + 90),
        st.sampled_from([10**400, -(10**400), 0, now - 10**6]),
        st.floats(allow_nan=True, allow_infinity=True),
        anything,
    )
    header = st.fixed_dictionaries(
        {"alg": _mostly(st.just("RS256"), st.sampled_from(["RS512", "HS256", "none"]), anything)},
        optional={
            "kid": _mostly(st.sampled_from(kids), st.text(min_size=1, max_size=20), anything),
            "typ": _mostly(st.just("logout+jwt"), anything),
        },
    )
    claims = st.fixed_dictionaries(
        {
            "iss": _mostly(st.just(issuer), st.just(issuer + "/"), anything),
            "aud": _mostly(st.just(audience), st.just([audience, "x"]), st.just(["x"]), anything),
            "iat": times,
            "jti": _mostly(st.text(min_size=1, max_size=64), st.text(min_size=256), anything),
            "events": _mostly(st.just({BACKCHANNEL_EVENT: {}}), st.just({}), anything),
        },
        optional={
            "exp": times,
            "nbf": times,
            "sub": _mostly(st.text(min_size=1, max_size=64), anything),
            "sid": _mostly(st.text(min_size=1, max_size=64), anything),
            "nonce": anything,
        },
    )
    # Every check but the signature holds: it reaches the keys.
    well_formed = st.fixed_dictionaries(
        {
            "iss": st.just(issuer),
            "aud": st.just(audience),
            "iat": st.integers(now - 200, now),
            "jti": st.text(min_size=1, max_size=64),
            "sub": st.text(min_size=1, max_size=64),
            "events": st.just({BACKCHANNEL_EVENT: {}}),
        }
    )
    compact = st.builds(
        lambda h, c, s: f"{_segment(h)}.{_segment(c)}.{_segment(s)}",
        header,
        st.one_of(claims, well_formed),
        st.binary(min_size=1, max_size=512),
    )
    return _mostly(
        compact,
        st.text(max_size=200),
        st.from_regex(
            r"[A-Za-z0-9_-]{0,60}\.[A-Za-z0-9_-]{0,60}\.[A-Za-z0-9_-]{0,60}", fullmatch=True
        ),
    )


def fuzz_signin(
    base_url: str,
    *,
    issuer: str,
    audience: str,
    requests_wanted: int,
    seed: int = 0,
) -> Findings:
    """At least ``requests_wanted`` generated requests, spread evenly over the endpoints."""
    discovery = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
    jwks_uri = httpx.get(discovery, timeout=30).json()["jwks_uri"]
    keys = httpx.get(jwks_uri, timeout=30).json()["keys"]
    kids = [key["kid"] for key in keys if "kid" in key] or ["none-published"]
    schemathesis.openapi.format(LOGOUT_JWT_FORMAT, logout_tokens(issuer, audience, kids))
    schema = schemathesis.openapi.from_dict(signin_document())
    operations = [result.ok() for result in schema.get_all_operations()]
    findings = Findings()
    share = -(-requests_wanted // len(operations))
    with requests.Session() as session:
        page = session.get(f"{base_url}/signin", timeout=30)
        assert page.status_code == 200, page.status_code
        for operation in operations:
            strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
            if operation.method.upper() == "POST" and operation.path == "/signin":
                strategy = strategy.map(lambda case: _with_csrf(case, session))
            target = _Target(base_url)
            send_all(
                strategy,
                operation.label,
                share,
                seed,
                target,
                session,
                findings,
                allow_redirects=False,  # the console's answers, not the provider's pages
            )
    return findings


class _Target:
    """What ``fuzz_api.send_all`` needs of a target: where the requests go (no real tasks)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.tasks: dict[str, list[str]] = {}


def _with_csrf(case: Any, session: requests.Session) -> Any:
    token = session.cookies.get("csrftoken")
    if isinstance(case.body, dict) and token:
        case.body = {**case.body, "csrfmiddlewaretoken": token}
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2_000, help="at least this many")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).parent))
    from support import BENCH_DIR, ServedProcess, loadavg, machine, manage, setup_django

    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    database = BENCH_DIR / "fuzz_signin.sqlite3"
    database.unlink(missing_ok=True)
    url = f"sqlite:///{database}"
    setup_django(url)
    manage(url, "migrate", "--no-input")
    from tests.support.oidc import OidcProvider

    client_id, client_secret = "orbit-console", secrets.token_urlsafe(32)
    idp = OidcProvider()
    server = ServedProcess(
        url,
        shape="worker",
        log_path=BENCH_DIR / "fuzz_signin.log",
        extra_env={
            "OIDC_ISSUER": idp.issuer,
            "OIDC_CLIENT_ID": client_id,
            "OIDC_CLIENT_SECRET": client_secret,
            "OIDC_ROLE_RULES": json.dumps([{"value": "orbit", "roles": ["auditor"]}]),
        },
    )
    idp.start(
        [
            {
                "client_id": client_id,
                "client_secret": client_secret,
                "redirect_uris": [f"{server.url}/signin/oidc/callback"],
                "grant_types": ["authorization_code"],
            }
        ]
    )
    load_before = loadavg()
    began = time.perf_counter()
    try:
        server.start()
        findings = fuzz_signin(
            server.url,
            issuer=idp.issuer,
            audience=client_id,
            requests_wanted=args.requests,
            seed=args.seed,
        )
    finally:
        server.stop()
        idp.stop()
    result = {
        "machine": machine(),
        "load_before": load_before,
        "seconds": round(time.perf_counter() - began, 1),
        "load_after": loadavg(),
        "requests": findings.sent,
        "server_errors": len(findings.server_errors),
        "statuses": dict(sorted(findings.statuses.items())),
        "examples": findings.server_errors[:10],
    }
    name = f"fuzz_signin{'-' + args.label if args.label else ''}.json"
    (BENCH_DIR / name).write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
