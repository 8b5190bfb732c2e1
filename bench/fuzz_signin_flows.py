"""Generated input for company sign-in's flows (issue 40), beyond the anonymous edge that
``fuzz_signin.py`` covers: the start (``GET /signin/oidc``), the callback
(``GET /signin/oidc/callback``) and the step-up (``/signin/confirm``), asked by a browser
signed out and by one signed in, with parameters made from a seeded generator of the
awkward: empty, huge, control characters and NUL, other scripts, URLs to elsewhere, JSON, numbers
past any integer, percent-encodings, and now and then a real ``state`` the console issued (so
that the code exchange with the provider runs too). None may fail the server (5xx).

Not schema-driven: what matters here is the state behind the request (a signed-in session, a
state the console issued, a step-up under way), not the parameters' shapes, which
``fuzz_signin.py`` generates from a document. The same seed makes the same requests.

``tests/signin/test_fuzz_signin_flows.py`` runs it in the suite in-process against the real
provider; ``send_over_http`` sends the same cases to a running console:

    uv run python bench/fuzz_signin_flows.py --url http://127.0.0.1:8000 --requests 5000
"""

import argparse
import json
import random
import string
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

START = "/signin/oidc"
CALLBACK = "/signin/oidc/callback"
CONFIRM = "/signin/confirm"

# (method, path, parameters) -> (status, the Location header or "")
Send = Callable[[str, str, dict[str, str]], tuple[int, str]]


def awkward(rng: random.Random) -> str:
    """One awkward value."""
    kind = rng.randrange(14)
    if kind == 0:
        return ""
    if kind == 1:
        return "".join(rng.choices(string.printable, k=rng.randrange(1, 40)))
    if kind == 2:
        return "x" * rng.choice((1_000, 10_000, 100_000))
    if kind == 3:
        return "".join(chr(rng.randrange(0, 32)) for _ in range(rng.randrange(1, 12)))
    if kind == 4:
        return rng.choice(
            ("\x00", "a\x00b", "\u202eevil", "\ufeff", "\ud7ff\ue000", "\U0001d530\U0001d532")
        )
    if kind == 5:
        return rng.choice(
            (
                "//evil.example/",
                "https://evil.example/",
                "javascript:alert(1)",
                "/\\evil.example",
                "http:/evil",
                "/%2F%2Fevil.example",
            )
        )
    if kind == 6:
        return json.dumps({"a": [1] * rng.randrange(1, 50)})
    if kind == 7:
        return str(rng.choice((10**400, -(10**30), 1e308))) + "e99999"
    if kind == 8:
        return "%" + "".join(rng.choices("0123456789ABCDEFGZ%", k=rng.randrange(1, 20)))
    if kind == 9:
        return rng.choice(
            ("access_denied", "invalid_scope", "login_required", "server_error", "<b>x</b>")
        )
    if kind == 10:
        return "/" + "/".join(rng.choices(("proposals", "..", "%00", "approvals", "x"), k=3))
    if kind == 11:
        return "".join(chr(rng.randrange(0x4E00, 0x4E00 + 500)) for _ in range(rng.randrange(9)))
    if kind == 12:
        return "' OR 1=1 --"
    return rng.choice(("0", "-1", "true", "null", "[]", "{}"))


CALLBACK_PARAMETERS = ("code", "state", "error", "error_description", "iss", "session_state")


@dataclass
class Findings:
    sent: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    server_errors: list[dict[str, Any]] = field(default_factory=list)

    def record(self, method: str, path: str, params: dict[str, str], status: int) -> None:
        self.sent += 1
        self.statuses[f"{method} {path} {status}"] += 1
        if status >= 500:
            shown = {name: value[:200] for name, value in params.items()}
            self.server_errors.append({"method": method, "path": path, "params": shown})


def cases(rng: random.Random, states: list[str]) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Requests for ever: ``states`` holds the states the console issued so far."""
    while True:
        which = rng.randrange(5)
        if which == 0:
            yield "GET", START, {"next": awkward(rng)} if rng.random() < 0.8 else {}
        elif which in (1, 2):
            names = rng.sample(CALLBACK_PARAMETERS, rng.randrange(1, len(CALLBACK_PARAMETERS)))
            params = {name: awkward(rng) for name in names}
            if states and rng.random() < 0.3:
                params["state"] = rng.choice(states)
            yield "GET", CALLBACK, params
        elif which == 3:
            yield "GET", CONFIRM, {"next": awkward(rng)}
        else:
            yield "POST", CONFIRM, {"next": awkward(rng), "password": awkward(rng)}


def fuzz_signin_flows(senders: list[Send], *, requests_wanted: int, seed: int = 40) -> Findings:
    """Send ``requests_wanted`` generated requests, each by one of ``senders`` (browsers of
    their own: signed out, signed in) in turn."""
    rng = random.Random(seed)
    findings = Findings()
    states: list[str] = []
    for number, (method, path, params) in enumerate(cases(rng, states)):
        if number >= requests_wanted:
            break
        status, location = senders[number % len(senders)](method, path, params)
        findings.record(method, path, params, status)
        if path == START and status == 302:
            states.extend(parse_qs(urlparse(location).query).get("state", [])[:1])
    return findings


def send_over_http(base_url: str) -> Send:
    """A browser of its own (its cookies) at a running console."""
    import httpx

    client = httpx.Client(base_url=base_url, timeout=30, follow_redirects=False)

    def send(method: str, path: str, params: dict[str, str]) -> tuple[int, str]:
        # A request line past 8 KiB is the server's business (the proxy answers 414): over HTTP
        # each value stays under it, as the edge's targets do (docs/reliability.md).
        params = {name: value[:1_000] for name, value in params.items()}
        if method == "GET":
            answer = client.get(path, params=params)
        else:
            answer = client.post(path, data=params, headers={"Origin": base_url})
        return answer.status_code, answer.headers.get("location", "")

    return send


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a running console with OIDC_ISSUER set")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=40)
    options = parser.parse_args()
    findings = fuzz_signin_flows(
        [send_over_http(options.url)], requests_wanted=options.requests, seed=options.seed
    )
    print(json.dumps({"sent": findings.sent, "statuses": dict(findings.statuses)}, indent=2))
    if findings.server_errors:
        print(json.dumps(findings.server_errors[:20], indent=2))
        sys.exit(1)


if __name__ == "__main__":
    main()
