"""Structured logs (issue 7, E2): a console process logs JSON lines correlated by
``request_id`` between the console and the API it calls, and never a token, a full business
key, a result body, a stored token's ciphertext, a password or a session cookie.

One server per log level (INFO, the default, and DEBUG) runs flows that carry every kind of
secret: sign-ins (one failing), reviews whose result holds a marker, a retry, an answer lost
after the API committed (C9), the work queue filtered by a full business key, and API calls with
every token of a world plus a revoked and an invented one. Then the whole log file is read.
"""

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest

from orbit_console.ledger.models import Task
from orbit_console.lib.secretbox import unseal
from orbit_console.people.credentials import mint_embedded
from orbit_console.people.models import OrbitCredential
from tests.console.web import (
    Console,
    csrf_token_of,
    form_with,
    park_task,
    retry_values,
    review_values,
    signed_in,
    submission_id_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.ops.helpers import self_proxied_server
from tests.support.orbit import bearer, get_task, post, review_body
from tests.support.people import make_person

REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Run:
    """What one server logged while the flows ran, and every secret the flows carried."""

    log: str
    secrets: dict[str, str] = field(default_factory=dict)
    unknown_submission: str = ""

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.splitlines() if line.startswith("{")]


def sign_in_failing(base_url: str, username: str, password: str) -> None:
    with Console(base_url) as console:
        page = console.get("/signin")
        form = form_with(page.text, "username")
        data = [(name, value) for name, value in form.hidden if name != "csrfmiddlewaretoken"]
        data += [
            ("csrfmiddlewaretoken", csrf_token_of(page.text)),
            ("username", username),
            ("password", password),
        ]
        assert console.post("/signin", data).status_code == 200  # the form again, with an error


def run_flows(level: str) -> Run:
    from orbit_console.ledger.seed import seed_world

    run = Run(log="")
    world = seed_world(label="logs")
    marker = f"RESULT-MARKER-{secrets.token_hex(8)}"
    result = json.dumps({"confirmed": True, "marker": marker})
    business_key = f"invoice:{secrets.token_hex(8)}:customer-4711"
    parked = park_task(world["queue_id"], business_key=business_key)
    people = {role: make_person(world, role) for role in ("operator", "supervisor", "auditor")}
    # A person's credential minted twice: the first token is revoked (a failing token).
    revoked_holder = make_person(world, "auditor")
    revoked = unseal(OrbitCredential.objects.get(user=revoked_holder.user).token_ciphertext)
    mint_embedded(
        user=revoked_holder.user, roles=frozenset({"auditor"}), namespace_id=world["namespace_id"]
    )
    invented = "orbit_" + secrets.token_urlsafe(32)

    run.secrets["result marker"] = marker
    run.secrets["business key"] = business_key
    for name, token in world["tokens"].items():
        run.secrets[f"world token {name}"] = token
    run.secrets["revoked token"] = revoked
    run.secrets["invented token"] = invented
    for task in Task.objects.filter(namespace_id=world["namespace_id"]):
        if task.business_key:
            run.secrets[f"business key of {task.id}"] = task.business_key
    for role, person in people.items():
        run.secrets[f"password of {role}"] = person.password
    wrong_password = f"wrong-{secrets.token_urlsafe(12)}"
    run.secrets["wrong password"] = wrong_password

    with self_proxied_server(f"ops-logs-{level.lower()}", env={"LOG_LEVEL": level}) as pair:
        server, proxy = pair
        sign_in_failing(server.url, people["operator"].username, wrong_password)
        with (
            signed_in(server.url, people["operator"]) as operator,
            signed_in(server.url, people["auditor"]) as auditor,
        ):
            run.secrets["operator session"] = operator.http.cookies["sessionid"]
            run.secrets["auditor session"] = auditor.http.cookies["sessionid"]
            operator_page = operator.get("/", params={"business_key": business_key})
            assert operator_page.status_code == 200
            assert parked in operator_page.text
            assert operator.get(f"/tasks/{parked}").status_code == 200

            reviewed = world["tasks"]["needs_review"]
            confirm = wizard_to_confirm(operator, reviewed, "review", review_values(result=result))
            submission_id_of(wizard_submit(operator, reviewed, "review", confirm.text))
            assert marker in operator.get(f"/tasks/{reviewed}").text  # shown, never logged
            failed = world["tasks"]["failed"]
            confirm = wizard_to_confirm(operator, failed, "retry", retry_values())
            submission_id_of(wizard_submit(operator, failed, "retry", confirm.text))

            # The API commits this review; its answer is lost on the way back (C9).
            lost = world["tasks"]["needs_review_2"]
            confirm = wizard_to_confirm(operator, lost, "review", review_values(result=result))
            proxy.set_mode("drop_writes")
            try:
                answer = wizard_submit(operator, lost, "review", confirm.text)
            finally:
                proxy.set_mode("pass")
            run.unknown_submission = submission_id_of(answer)
            assert operator.get(f"/submissions/{run.unknown_submission}").status_code == 200

            assert auditor.get(f"/tasks/{reviewed}").status_code == 200
            # Answers Django itself logs (4xx), each with the business key in the query.
            nowhere = operator.get("/no-such-page", params={"business_key": business_key})
            assert nowhere.status_code == 404
            assert (
                auditor.get(
                    f"/tasks/{reviewed}/review", params={"business_key": business_key}
                ).status_code
                == 403
            )
            forged = operator.http.post(
                "/signin",
                params={"business_key": business_key},
                data={"username": people["auditor"].username, "password": wrong_password},
            )
            assert forged.status_code == 403  # no CSRF token
            assert auditor.get("/audit", params={"task_id": reviewed}).status_code == 200

        with httpx.Client(base_url=server.url, timeout=60) as api:
            for token in [*world["tokens"].values(), revoked, invented]:
                get_task(api, parked, token)
                api.get("/v1/tasks", params={"business_key": business_key}, headers=bearer(token))
            # A stale revision and a body the API refuses, both carrying the marker.
            admin = world["tokens"]["admin"]
            nowhere = api.get("/v1/nowhere", params={"business_key": business_key})
            assert nowhere.status_code == 404
            stale = post(api, reviewed, "review", admin, review_body(result=result))
            assert stale.status_code == 409
            bad = post(api, parked, "review", admin, review_body(result=result, outcome="MAYBE"))
            assert bad.status_code == 400
            assert post(api, parked, "review", admin, review_body(result=result)).status_code == 200
        for person in [*people.values(), revoked_holder]:
            ciphertext = OrbitCredential.objects.get(user=person.user).token_ciphertext
            run.secrets[f"ciphertext of {person.username}"] = ciphertext
            run.secrets[f"token of {person.username}"] = unseal(ciphertext)
        server.stop()  # flush everything before reading
        run.log = server.log_text()
    return run


@pytest.fixture(scope="module", params=["INFO", "DEBUG"])
def logged(
    request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any
) -> Iterator[Run]:
    with django_db_blocker.unblock():
        yield run_flows(request.param)


def spellings(secret: str) -> set[str]:
    """The ways a secret could be written into a log line: as is, URL-encoded (a query
    string, a request's repr), JSON-escaped."""
    return {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]}


def test_logs_hold_no_token_business_key_result_cookie_or_password_E2(logged: Run) -> None:
    assert logged.log.strip(), "the server logged nothing"
    leaked = [
        name
        for name, secret in logged.secrets.items()
        if any(spelling in logged.log for spelling in spellings(secret))
    ]
    assert leaked == []


def test_every_json_looking_line_is_json(logged: Run) -> None:
    json_lines = [line for line in logged.log.splitlines() if line.startswith("{")]
    assert json_lines, "the server logged no JSON line"
    for line in json_lines:
        assert isinstance(json.loads(line), dict), line


def test_access_lines_carry_request_ids_and_paths_without_queries(logged: Run) -> None:
    access = [line for line in logged.lines() if line.get("logger") == "orbit.access"]
    assert access
    for line in access:
        assert REQUEST_ID.match(line["request_id"]), line
        assert "?" not in line["path"] and "business_key" not in json.dumps(line)
        assert {"method", "path", "status", "duration_ms", "view"} <= set(line)
    queue = [line for line in access if line["view"] == "console:work_queue"]
    assert queue and all(line["path"] == "/" for line in queue)
    ids = [line["request_id"] for line in access]
    assert len(ids) == len(set(ids)), "two requests share a request id"


def test_console_calls_and_api_answers_are_correlated(logged: Run) -> None:
    lines = logged.lines()
    calls = [line for line in lines if line["message"] == "orbit api call"]
    answers = [line for line in lines if line["message"] == "api answer"]
    answered_by_id = {line["request_id"]: line for line in answers}
    for operation, outcome in (("ReviewTask", "200"), ("RetryTask", "201"), ("GetTask", "200")):
        matching = [
            call for call in calls if (call["operation"], call["outcome"]) == (operation, outcome)
        ]
        assert matching, f"no {operation} call answered {outcome}"
        for call in matching:
            assert REQUEST_ID.match(call["request_id"])
            answer = answered_by_id.get(call["api_request_id"])
            assert answer is not None, f"no api answer for {call}"
            assert answer["caller_request_id"] == call["request_id"]
            assert str(answer["status"]) == outcome
    # The lost answer: the console never learned the API's request id, but the API's line
    # names the console request that caused the commit.
    [unknown] = [
        call for call in calls if (call["operation"], call["outcome"]) == ("ReviewTask", "unknown")
    ]
    assert unknown["api_request_id"] is None
    committed = [line for line in answers if line["caller_request_id"] == unknown["request_id"]]
    assert [line["status"] for line in committed] == [200]
    # Calls made straight to the API (no console in between) name no caller.
    assert any(line["caller_request_id"] is None for line in answers)
