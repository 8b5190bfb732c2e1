"""Generated input for company sign-in's start, callback and step-up pages in the states the
anonymous edge's run (tests/ops/test_anonymous_edge.py) does not reach (issue 40, "the
generated-input run covers the sign-in endpoints with 0 5xx"): ``bench/fuzz_signin_flows.py``'s
seeded cases, sent by a browser signed out and by one signed in, the console in-process, the
provider real (some callbacks carry a state the console issued, so the code exchange with the
provider runs as well)."""

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from bench.fuzz_signin_flows import CALLBACK, CONFIRM, START, Send, fuzz_signin_flows
from tests.signin.conftest import LIKE_GOOGLE, Company
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.system_extra

REQUESTS = 300


def sender(client: Client) -> Send:
    client.raise_request_exception = False  # a failure is a 500 here, counted

    def send(method: str, path: str, params: dict[str, str]) -> tuple[int, str]:
        answer = client.get(path, params) if method == "GET" else client.post(path, params)
        return answer.status_code, answer.get("Location", "")

    return send


def test_generated_input_to_the_sign_in_pages_never_fails_the_server(
    providers: Callable[..., OidcProvider],
    company: Callable[[OidcProvider], Company],
    settings: Any,
) -> None:
    me = company(providers(**LIKE_GOOGLE))
    me.sign_in()
    findings = fuzz_signin_flows([sender(Client()), sender(me.console)], requests_wanted=REQUESTS)
    assert findings.sent == REQUESTS
    assert findings.server_errors == []
    answered = {key.rsplit(" ", 1)[0] for key in findings.statuses}
    assert {f"GET {START}", f"GET {CALLBACK}", f"GET {CONFIRM}", f"POST {CONFIRM}"} <= answered
    statuses = {key.rsplit(" ", 1)[1] for key in findings.statuses}
    assert {"302", "400", "403"} <= statuses
