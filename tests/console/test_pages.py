"""The console's pages over real HTTP: sign-in, the work queue, the task page, errors, safety
headers and languages. A person signs in through the real sign-in form and the console reaches
the recovery API over HTTP with their own credential."""

import json
import re
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from orbit_console.ledger.seed import seed_world
from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import unseal
from orbit_console.people.models import OrbitCredential
from tests.console.web import (
    Console,
    csrf_token_of,
    element,
    park_task,
    pre_text,
    review_through_console,
    section,
    signed_in,
    task_links,
    text_of,
)
from tests.support.orbit import bearer, get_task, post, retry, review_body
from tests.support.people import TestPerson, make_person, make_reader
from tests.support.servers import DaphneServer

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'
CHAIN = r'<nav class="callout info" aria-label="Retry chain">.*?</nav>'


@pytest.fixture
def operator(orbit_server: DaphneServer, people: dict[str, TestPerson]) -> Any:
    with signed_in(orbit_server.url, people["operator"]) as console:
        yield console


@pytest.fixture
def auditor(orbit_server: DaphneServer, people: dict[str, TestPerson]) -> Any:
    with signed_in(orbit_server.url, people["auditor"]) as console:
        yield console


def assert_strict_csp(response: httpx.Response) -> None:
    """A strict Content-Security-Policy, and nothing on the page that would need a weaker one."""
    policy = response.headers.get("content-security-policy", "")
    directives = {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}
    assert directives.get("default-src") == ["'none'"], policy
    assert directives.get("script-src") == ["'self'"], policy
    assert directives.get("style-src") == ["'self'"], policy
    assert directives.get("frame-ancestors") == ["'none'"], policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy, policy
    html = response.text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline script on the page"
    assert not re.search(r"<style\b", html), "inline style element on the page"
    assert not re.search(r"\sstyle=", html), "inline style attribute on the page"
    assert not re.search(r"\son[a-z]+=", html), "inline event handler on the page"


# --- Sign-in ------------------------------------------------------------------------------------


def test_every_console_page_requires_sign_in(
    orbit_server: DaphneServer, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    pages = [
        "/",
        "/?state=FAILED",
        f"/tasks/{task_id}",
        f"/tasks/{task_id}/review",
        f"/tasks/{task_id}/retry",
        f"/submissions/{new_id()}",
    ]
    with Console(orbit_server.url) as anonymous:
        for path in pages:
            response = anonymous.get(path)
            assert response.status_code == 302, path
            location = urlsplit(response.headers["location"])
            assert location.path == "/signin", path
            assert parse_qs(location.query)["next"] == [path], path
        # Writes too, even with a valid CSRF token: sign-in comes first.
        token = csrf_token_of(anonymous.get("/signin").text)
        for path in (f"/tasks/{task_id}/review", f"/submissions/{new_id()}/resend"):
            response = anonymous.post(path, [("csrfmiddlewaretoken", token)])
            assert response.status_code == 302, path
            assert urlsplit(response.headers["location"]).path == "/signin", path
    assert get_task_state(orbit_server, world, task_id) == ("NEEDS_REVIEW", "3")


def test_sign_in_with_a_wrong_password_is_refused(
    orbit_server: DaphneServer, people: dict[str, TestPerson]
) -> None:
    with Console(orbit_server.url) as console:
        page = console.get("/signin")
        token = csrf_token_of(page.text)
        answer = console.post(
            "/signin",
            [
                ("csrfmiddlewaretoken", token),
                ("username", people["operator"].username),
                ("password", "not-the-password"),
            ],
        )
        assert answer.status_code == 200
        assert 'role="alert"' in answer.text
        assert console.get("/").status_code == 302


def test_sign_in_leads_to_the_work_queue(
    orbit_server: DaphneServer, people: dict[str, TestPerson]
) -> None:
    with signed_in(orbit_server.url, people["operator"]) as console:
        page = console.get("/")
        assert page.status_code == 200
        assert people["operator"].username in text_of(page.text)
        assert "<h1>Work queue</h1>" in page.text


def get_task_state(server: DaphneServer, world: dict[str, Any], task_id: str) -> tuple[str, str]:
    with httpx.Client(base_url=server.url, timeout=30) as api:
        data = get_task(api, task_id, world["tokens"]["admin"]).json()["data"]
    return data["state"], data["revision"]


# --- Work queue ---------------------------------------------------------------------------------


def test_work_queue_lists_needs_review_first_then_failed_and_cancelled(
    operator: Console, world: dict[str, Any]
) -> None:
    tasks = world["tasks"]
    page = operator.get("/")
    assert page.status_code == 200
    review_section, terminal_section = section(page.text, "review"), section(page.text, "terminal")
    assert page.text.index(review_section) < page.text.index(terminal_section)
    assert set(task_links(review_section)) == {
        tasks["needs_review"],
        tasks["needs_review_2"],
        tasks["needs_review_leased"],
        tasks["needs_review_workflow"],
    }
    assert set(task_links(terminal_section)) == {
        tasks["failed"],
        tasks["failed_uncertain"],
        tasks["cancelled"],
        tasks["queue_full_failed"],
    }
    assert tasks["succeeded"] not in page.text
    assert "NEEDS_REVIEW" in text_of(review_section)
    assert "CANCELLED" in text_of(terminal_section)


def test_work_queue_filters_by_state_queue_handler_and_business_key(
    operator: Console, world: dict[str, Any]
) -> None:
    tasks = world["tasks"]
    invoice = park_task(world["queue_id"], handler="invoice.send", business_key="invoice:INV-7")

    failed = operator.get("/", params={"state": "FAILED"})
    assert failed.status_code == 200
    assert set(task_links(section(failed.text, "list"))) == {
        tasks["failed"],
        tasks["failed_uncertain"],
        tasks["queue_full_failed"],
    }
    assert 'id="section-review"' not in failed.text

    succeeded = operator.get("/", params={"state": "SUCCEEDED"})
    assert task_links(section(succeeded.text, "list")) == [tasks["succeeded"]]

    # The full queue "exports" holds queue_full_failed; world's queue holds the rest.
    in_queue = operator.get("/", params={"queue_id": world["queue_id"]})
    listed = set(task_links(element(in_queue.text, r'<div id="results">.*')))
    assert tasks["failed"] in listed and invoice in listed
    assert tasks["queue_full_failed"] not in listed

    by_handler = operator.get("/", params={"handler": "invoice.send"})
    assert task_links(element(by_handler.text, r'<div id="results">.*')) == [invoice]

    by_key = operator.get("/", params={"business_key": "object:failed"})
    assert task_links(element(by_key.text, r'<div id="results">.*')) == [tasks["failed"]]

    # The filters stay filled in with what was asked.
    assert 'value="object:failed"' in by_key.text


def test_work_queue_explains_an_invalid_queue_id_inline(
    operator: Console, world: dict[str, Any]
) -> None:
    page = operator.get("/", params={"queue_id": "not-a-queue"})
    assert page.status_code == 200
    field = element(page.text, r'<div class="field has-error">.*?</div>')
    assert 'name="queue_id"' in field
    assert 'value="not-a-queue"' in field
    assert "A queue id is 32 lowercase hexadecimal characters." in text_of(field)
    # The list is still there, unfiltered.
    assert world["tasks"]["needs_review"] in task_links(section(page.text, "review"))


def test_work_queue_pages_with_keyset_links(operator: Console, world: dict[str, Any]) -> None:
    created = {park_task(world["queue_id"], business_key=f"bulk:{n}") for n in range(30)}
    names = ("needs_review", "needs_review_2", "needs_review_leased", "needs_review_workflow")
    seeded = {world["tasks"][name] for name in names}

    first = operator.get("/")
    review_section = section(first.text, "review")
    first_ids = task_links(review_section)
    assert len(first_ids) == 25
    assert "First page" not in text_of(review_section)
    older = re.search(r'<a href="([^"]+)" rel="next">', review_section)
    assert older is not None and "Older" in text_of(review_section)
    terminal_first = task_links(section(first.text, "terminal"))

    second = operator.get(unescape(older.group(1)))
    assert second.status_code == 200
    review_second = section(second.text, "review")
    second_ids = task_links(review_second)
    assert len(second_ids) == 9
    assert not set(first_ids) & set(second_ids)
    assert set(first_ids) | set(second_ids) == created | seeded
    assert 'rel="next"' not in review_second
    back = re.search(r'<a href="([^"]+)">First page</a>', review_second)
    assert back is not None
    assert task_links(section(operator.get(unescape(back.group(1))).text, "review")) == first_ids
    # Paging one section leaves the other where it was.
    assert task_links(section(second.text, "terminal")) == terminal_first


def test_work_queue_paging_keeps_the_filters(operator: Console, world: dict[str, Any]) -> None:
    for n in range(27):
        park_task(world["queue_id"], handler="report.export", business_key=f"report:{n}")
    first = operator.get("/", params={"handler": "report.export", "state": "NEEDS_REVIEW"})
    listing = section(first.text, "list")
    older = re.search(r'<a href="([^"]+)" rel="next">', listing)
    assert older is not None
    query = parse_qs(urlsplit(unescape(older.group(1))).query)
    assert query["handler"] == ["report.export"] and query["state"] == ["NEEDS_REVIEW"]
    second = operator.get(unescape(older.group(1)))
    assert len(task_links(section(second.text, "list"))) == 2


def test_htmx_request_gets_only_the_results_fragment(
    operator: Console, world: dict[str, Any]
) -> None:
    fragment = operator.get("/", params={"state": "FAILED"}, headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    body = fragment.text.strip()
    assert body.startswith('<div id="results">')
    assert "<html" not in body and "<form" not in body and "<h1>" not in body
    assert world["tasks"]["failed"] in task_links(body)
    assert world["tasks"]["needs_review"] not in body


# --- Task page ----------------------------------------------------------------------------------


def test_task_page_shows_every_field_and_exact_pretty_json(
    operator: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    other = world["tasks"]["needs_review_2"]
    result = '{"confirmed":true,"sequence":9007199254740993,"ratio":0.10,"items":[1,2.50]}'
    fields = json.dumps({**review_body(outcome="SUCCEEDED"), "result": "RESULT"})
    body = fields.replace('"RESULT"', result)  # the result exactly as written, decimals included
    assert post(api, other, "review", world["tokens"]["admin"], body).status_code == 200

    page = operator.get(f"/tasks/{other}")
    assert page.status_code == 200
    facts = text_of(element(page.text, r'<section aria-labelledby="facts-title">.*?</section>'))
    detail = api.get(f"/v1/tasks/{other}", headers=bearer(world["tokens"]["admin"])).json()["data"]
    for label, value in [
        ("State", "SUCCEEDED"),
        ("Revision", "4"),
        # Its name first, then its id (issue 30: readable names).
        ("Namespace", f"test namespace {world['namespace_id']}"),
        ("Queue", world["queue_id"]),
        ("Handler", "object.prepare v1"),
        ("Payload version", "v1"),
        ("Business key", "object:needs-review-2"),
        ("Priority", "0"),
        ("Recovery safety", "RECONCILE_ONLY"),
        ("Attempts", "1 of at most 1"),
        ("Retry policy", "attempt timeout 10000 ms"),
    ]:
        assert f"{label} {value}" in facts, (label, facts)
    # The queue's id leads to the work queue filtered by it (the API filters by whole ids).
    link = re.search(r'<a href="([^"]+)" id="task-queue"', page.text)
    assert link is not None
    queue = operator.get(unescape(link[1]))
    assert queue.status_code == 200
    assert unescape(link[1]) == f"/?queue_id={world['queue_id']}&state=SUCCEEDED"
    assert f'id="row-live-{other}"' in queue.text
    execution = element(page.text, r'<section aria-labelledby="execution-title">.*?</section>')
    execution_text = text_of(execution)
    for label, value in [
        ("Effect uncertain", "no"),
        ("Owner", "none (standalone)"),
        ("Gate", "none"),
        ("Lease", "none"),
        ("Active attempt", "none"),
        ("Unreleased permit", "none"),
    ]:
        assert f"{label} {value}" in execution_text, (label, execution_text)
    for name in ("available_at", "deadline_at", "created_at", "updated_at", "completed_at"):
        assert f'datetime="{detail[name]}"' in execution, name

    payload = pre_text(page.text, r'<section aria-labelledby="payload-title">.*?</pre>')
    assert payload.endswith(
        '{\n  "object_ref": "objects/input",\n  "sequence": 9007199254740993\n}'
    )
    shown = pre_text(page.text, r'<section aria-labelledby="result-title">.*?</pre>')
    assert shown.endswith(
        "{\n"
        '  "confirmed": true,\n'
        '  "sequence": 9007199254740993,\n'
        '  "ratio": 0.10,\n'
        '  "items": [\n'
        "    1,\n"
        "    2.50\n"
        "  ]\n"
        "}"
    ), shown


def test_task_page_shows_attempts_with_late_reports(
    operator: Console, world: dict[str, Any]
) -> None:
    page = operator.get(f"/tasks/{world['tasks']['needs_review']}")
    history = element(page.text, r'<section aria-labelledby="attempts-title">.*?</section>')
    rows = text_of(history)
    assert "worker-1" in rows and "UNKNOWN" in rows and "connection reset" in rows
    late = element(history, r'<tr class="late">.*?</tr>')
    assert "Late report" in text_of(late)
    assert "FAILED" in text_of(late)
    assert "the object store answered 503 after the lease ended" in text_of(late)
    assert "No result yet." in text_of(page.text)


def test_task_page_links_the_retry_chain_both_ways(
    operator: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    source = world["tasks"]["failed"]
    answer = retry(api, world)
    assert answer.status_code == 201
    successor = answer.json()["data"]["task"]["id"]

    source_page = operator.get(f"/tasks/{source}")
    chain = element(source_page.text, CHAIN)
    assert "retried as" in text_of(chain)
    assert f'href="/tasks/{successor}"' in chain

    successor_page = operator.get(f"/tasks/{successor}")
    chain = element(successor_page.text, CHAIN)
    assert "manual retry of" in text_of(chain)
    assert f'href="/tasks/{source}"' in chain
    assert "WAITING" in text_of(successor_page.text)


def actions_of(html: str) -> str:
    return element(
        html, r'<section class="panel" aria-labelledby="actions-title"[^>]*>.*?</section>'
    )


def availability(html: str, action: str) -> str | None:
    """The reasons shown for an unavailable action, or ``None`` when its button is offered."""
    actions = actions_of(html)
    heading = "Review unavailable" if action == "review" else "Retry unavailable"
    match = re.search(rf"<h3>{heading}</h3>\s*<ul class=\"reasons\">(.*?)</ul>", actions, re.S)
    if match is None:
        assert re.search(rf'href="/tasks/[0-9a-f]{{32}}/{action}"', actions), actions
        return None
    assert not re.search(rf'href="/tasks/[0-9a-f]{{32}}/{action}"', actions)
    return text_of(match.group(1))


@pytest.mark.parametrize(
    ("task", "review_reason", "retry_reason"),
    [
        ("needs_review", None, "review it first"),
        ("needs_review_leased", "lease", "review it first"),
        ("needs_review_workflow", "workflow", "workflow"),
        ("failed", "this one is FAILED", None),
        ("failed_uncertain", "this one is FAILED", "uncertain"),
        ("cancelled", "this one is CANCELLED", None),
        ("succeeded", "this one is SUCCEEDED", "never"),
        ("queue_full_failed", "this one is FAILED", None),
    ],
)
def test_task_page_offers_each_action_or_says_why_not(
    unchanged_world: tuple[dict[str, Any], Console],
    task: str,
    review_reason: str | None,
    retry_reason: str | None,
) -> None:
    world, operator = unchanged_world
    page = operator.get(f"/tasks/{world['tasks'][task]}")
    assert page.status_code == 200
    for action, expected in (("review", review_reason), ("retry", retry_reason)):
        shown = availability(page.text, action)
        if expected is None:
            assert shown is None, (action, shown)
        else:
            assert shown is not None and expected in shown, (action, shown)


def test_task_page_says_a_retried_task_has_a_successor(
    operator: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    assert availability(operator.get(f"/tasks/{world['tasks']['cancelled']}").text, "retry") is None
    assert retry(api, world, task="cancelled", revision="2").status_code == 201
    shown = availability(operator.get(f"/tasks/{world['tasks']['cancelled']}").text, "retry")
    assert shown is not None and "successor" in shown


def test_task_page_says_when_the_credential_lacks_a_permission(
    orbit_server: DaphneServer, world: dict[str, Any]
) -> None:
    person = make_person(world, "operator")
    # The credential was issued without tasks:retry (an external Orbit may do that).
    OrbitCredential.objects.filter(user=person.user).update(permissions="tasks:read tasks:review")
    with signed_in(orbit_server.url, person) as console:
        shown = availability(console.get(f"/tasks/{world['tasks']['failed']}").text, "retry")
    assert shown is not None and "tasks:retry" in shown


def timeline_of(html: str) -> str:
    return element(html, r'<section aria-labelledby="timeline-title".*?</section>')


def test_every_role_sees_the_platform_audit_and_a_credential_without_it_is_told_why_not(
    orbit_server: DaphneServer,
    operator: Console,
    auditor: Console,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 15: operators and supervisors read the platform's audit too (their roles imply
    tasks:audit:read); a credential that does not hold it (a token issued elsewhere) gets the
    console's events and a word on why (AU1)."""
    task_id = world["tasks"]["needs_review"]
    with signed_in(orbit_server.url, people["supervisor"]) as supervisor:
        pages = {"auditor": auditor, "operator": operator, "supervisor": supervisor}
        for role, console in pages.items():
            audit = timeline_of(console.get(f"/tasks/{task_id}").text)
            platform = re.findall(r'<li id="entry-op-[^"]+" class="source-platform"', audit)
            assert len(platform) == 2, role
            actions = re.findall(r"&quot;action&quot;: &quot;([a-z_.]+)&quot;", audit)
            assert actions == ["task.execution_result", "task.accepted"], role
            assert "connection reset" in text_of(audit), role  # the execution result's reason
            assert "tasks:audit:read" not in text_of(audit), role

    with signed_in(orbit_server.url, make_reader(world, "operator")) as reader:
        hidden = timeline_of(reader.get(f"/tasks/{task_id}").text)
    assert "does not hold tasks:audit:read" in text_of(hidden)
    assert "source-platform" not in hidden
    assert "task.accepted" not in hidden and "connection reset" not in hidden


def test_auditor_is_never_offered_review_or_retry(auditor: Console, world: dict[str, Any]) -> None:
    for name, task_id in world["tasks"].items():
        page = auditor.get(f"/tasks/{task_id}")
        assert page.status_code == 200, name
        assert f"/tasks/{task_id}/review" not in page.text, name
        assert f"/tasks/{task_id}/retry" not in page.text, name
        assert "read-only access" in text_of(actions_of(page.text)), name


def test_malformed_task_id_is_404(operator: Console) -> None:
    for path in ("/tasks/not-an-id", "/tasks/" + "A" * 32, "/tasks/" + "a" * 31):
        response = operator.get(path)
        assert response.status_code == 404, path
        assert "Not found" in response.text


def test_task_of_another_namespace_looks_like_a_missing_one_C4(
    operator: Console, live_db: None
) -> None:
    elsewhere = seed_world(label="elsewhere")["tasks"]["needs_review"]
    foreign = operator.get(f"/tasks/{elsewhere}")
    missing = operator.get(f"/tasks/{new_id()}")
    assert foreign.status_code == missing.status_code == 404
    main = r"<main id=\"main\">.*</main>"
    assert text_of(element(foreign.text, main)) == text_of(element(missing.text, main))
    assert "Not found" in text_of(foreign.text)
    for path in (f"/tasks/{elsewhere}/review", f"/tasks/{elsewhere}/retry"):
        assert operator.get(path).status_code == 404, path


def test_a_bad_cursor_from_the_browser_is_its_own_mistake_not_a_server_error(
    auditor: Console, world: dict[str, Any]
) -> None:
    """Issue 14: the API's 400 for what the browser sent is a 400 here, explained."""
    task_id = world["tasks"]["needs_review"]
    for path in (
        f"/tasks/{task_id}/timeline/older?cursor=garbage",
        "/?cursor_review=garbage",
    ):
        response = auditor.get(path)
        assert response.status_code == 400, path
        assert "The recovery API refused the request" in text_of(response.text), path
        assert "INVALID_ARGUMENT" in response.text, path


# --- Safety -------------------------------------------------------------------------------------


def test_xss_in_payload_reason_evidence_and_result_renders_as_text(
    operator: Console, auditor: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    payload = json.dumps({"note": XSS_SCRIPT, "html": XSS_IMG})
    through_console = park_task(world["queue_id"], payload=payload, business_key=XSS_IMG)
    through_api = park_task(world["queue_id"], payload=payload, business_key=XSS_SCRIPT)
    reason = f"{XSS_SCRIPT} {XSS_IMG}"
    evidence = '"><img/src=x/onerror=alert(1)>' + XSS_SCRIPT
    result = json.dumps({"a": XSS_SCRIPT, "b": XSS_IMG})

    submission_id, submission_page = review_through_console(
        operator, through_console, reason=reason, evidence_ref=evidence, result=result
    )
    assert "Applied" in text_of(submission_page.text)
    answer = post(
        api,
        through_api,
        "review",
        world["tokens"]["admin"],
        review_body(reason=reason, evidence_ref=evidence, result={"a": XSS_SCRIPT, "b": XSS_IMG}),
    )
    assert answer.status_code == 200

    pages = {
        "submission": submission_page,
        "task (console review)": operator.get(f"/tasks/{through_console}"),
        "task (API review)": operator.get(f"/tasks/{through_api}"),
        "task (auditor)": auditor.get(f"/tasks/{through_api}"),
        "work queue": operator.get("/", params={"state": "FAILED"}),
        "work queue (key)": operator.get("/", params={"business_key": XSS_SCRIPT}),
    }
    for name, page in pages.items():
        assert page.status_code == 200, name
        html = page.text
        assert "<script>alert" not in html, name
        assert "<img" not in html, name
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, name
    # The escaped text is still all there, readable.
    assert reason in text_of(submission_page.text.replace("\\", ""))
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages["task (API review)"].text
    assert XSS_IMG in text_of(pages["task (console review)"].text).replace('\\"', '"')
    assert submission_id


def test_xss_typed_into_the_wizard_is_kept_escaped(
    operator: Console, world: dict[str, Any]
) -> None:
    from tests.console.web import REVIEW_CHECKS, form_with, review_values, wizard_post

    task_id = world["tasks"]["needs_review"]
    path = f"/tasks/{task_id}/review"
    page = wizard_post(operator, path, operator.get(path).text, REVIEW_CHECKS)
    typed = review_values(result=XSS_SCRIPT, reason=XSS_IMG, evidence_ref=XSS_SCRIPT)
    errors = wizard_post(operator, path, page.text, typed)
    assert errors.status_code == 400
    assert "<script>alert" not in errors.text and "<img src=x" not in errors.text
    form = form_with(errors.text, "pin")
    assert form.value("result") == XSS_SCRIPT
    assert form.value("reason") == XSS_IMG


def test_csrf_is_enforced_on_every_form(
    operator: Console, orbit_server: DaphneServer, world: dict[str, Any]
) -> None:
    from orbit_console.decisions.models import Submission

    task_id = world["tasks"]["needs_review"]
    for path in (
        f"/tasks/{task_id}/review",
        f"/tasks/{task_id}/retry",
        f"/submissions/{new_id()}/resend",
        "/i18n/setlang/",
        "/signout",
    ):
        refused = operator.post(path, [("language", "zh-hans"), ("step", "verify")])
        assert refused.status_code == 403, path
        wrong = operator.post(path, [("csrfmiddlewaretoken", "x" * 64), ("step", "verify")])
        assert wrong.status_code == 403, path
    with Console(orbit_server.url) as anonymous:
        assert anonymous.post("/signin", [("username", "x"), ("password", "y")]).status_code == 403
    assert not Submission.objects.filter(task_id=task_id).exists()
    assert operator.get("/").status_code == 200  # still signed in: sign-out was refused too


def test_every_html_page_carries_a_strict_csp(
    operator: Console,
    auditor: Console,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    task_id = world["tasks"]["needs_review"]
    other = world["tasks"]["needs_review_2"]
    submission_id, submission_page = review_through_console(operator, other)
    responses = {
        "sign-in": httpx.get(f"{orbit_server.url}/signin"),
        "work queue": operator.get("/"),
        "work queue fragment": operator.get("/", headers={"HX-Request": "true"}),
        "task": operator.get(f"/tasks/{task_id}"),
        "task (auditor)": auditor.get(f"/tasks/{task_id}"),
        "review wizard": operator.get(f"/tasks/{task_id}/review"),
        "retry wizard": operator.get(f"/tasks/{world['tasks']['failed']}/retry"),
        "wizard unavailable": operator.get(f"/tasks/{world['tasks']['succeeded']}/retry"),
        "submission": submission_page,
        "not found": operator.get("/tasks/nope"),
        "not found (API)": operator.get(f"/tasks/{new_id()}"),
        "forbidden": auditor.get(f"/tasks/{task_id}/review"),
        "csrf failure": operator.post(f"/tasks/{task_id}/review", []),
    }
    tokens = [
        unseal(credential.token_ciphertext)
        for credential in OrbitCredential.objects.filter(
            user__in=[people["operator"].user, people["auditor"].user]
        )
    ]
    assert len(tokens) == 2
    for name, response in responses.items():
        assert response.headers["content-type"].startswith("text/html"), name
        assert_strict_csp(response)
        for token in tokens:  # tokens are never rendered
            assert token not in response.text, name
            assert token not in str(response.headers), name
    assert responses["wizard unavailable"].status_code == 409
    assert submission_id


# --- Languages ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "headings"),
    [
        ("en", {403: "Not allowed", 404: "Not found", "csrf": "The form was not accepted"}),
        ("zh-Hans", {403: "不允许", 404: "未找到", "csrf": "表单未被接受"}),
    ],
)
def test_error_pages_are_pages_of_the_console_in_the_readers_language(
    orbit_server: DaphneServer,
    people: dict[str, TestPerson],
    language: str,
    headings: dict[Any, str],
) -> None:
    """Issue 15: 403 and some 404s were bare, unstyled English pages without the header or a
    way back. Each now has the console's header, its reason and a link back, in English or
    Chinese as the reader reads."""
    with Console(orbit_server.url, headers={"Accept-Language": language}) as reader:
        reader.sign_in(people["operator"])
        pages = {
            403: reader.get("/audit"),  # operators do not open the explorer
            404: reader.get("/nothing-is-here"),  # (a missing task has a page of its own)
            "csrf": reader.post("/signout", []),  # a form without its token
        }
        for kind, page in pages.items():
            assert page.status_code == (404 if kind == 404 else 403), kind
            assert '<header class="topbar">' in page.text, kind
            # The header knows the person, even on a page no console view served.
            role = "Operator" if language == "en" else "操作员"
            assert role in text_of(element(page.text, r'<span class="who">.*?</span>')), kind
            assert f'<html lang="{language.lower()}">' in page.text, kind
            body = element(page.text, r'<div class="panel error-page" id="error-page">.*?</div>')
            assert text_of(element(body, r"<h1>.*?</h1>")) == headings[kind], kind
            assert 'href="/"' in body, kind
            if language != "en":
                assert "Back to the work queue" not in body, kind


def test_language_follows_the_browser(
    orbit_server: DaphneServer, people: dict[str, TestPerson]
) -> None:
    with Console(orbit_server.url, headers={"Accept-Language": "zh-Hans"}) as chinese:
        assert '<html lang="zh-hans">' in chinese.get("/signin").text
        chinese.sign_in(people["operator"])
        page = chinese.get("/")
        assert '<html lang="zh-hans">' in page.text
        assert page.headers["content-language"] == "zh-hans"
    with Console(orbit_server.url, headers={"Accept-Language": "zh-CN,zh;q=0.9"}) as chinese:
        assert '<html lang="zh-hans">' in chinese.get("/signin").text
    with Console(orbit_server.url, headers={"Accept-Language": "en-GB,en;q=0.8"}) as english:
        assert '<html lang="en">' in english.get("/signin").text


def test_language_switch_on_every_page(
    orbit_server: DaphneServer, people: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    task_page = f"/tasks/{world['tasks']['needs_review']}"
    with signed_in(
        orbit_server.url, people["operator"], headers={"Accept-Language": "en"}
    ) as console:
        page = console.get(task_page)
        assert '<html lang="en">' in page.text
        switch = element(page.text, r'<form class="language".*?</form>')
        assert 'value="zh-hans"' in switch and f'value="{task_page}"' in switch
        token = csrf_token_of(switch)
        answer = console.post(
            "/i18n/setlang/",
            [("csrfmiddlewaretoken", token), ("language", "zh-hans"), ("next", task_page)],
        )
        assert answer.status_code == 302
        assert answer.headers["location"] == task_page
        switched = console.get(task_page)
        assert '<html lang="zh-hans">' in switched.text
        assert re.search(r'<option value="zh-hans" selected>', switched.text)
        assert '<html lang="zh-hans">' in console.get("/").text

        token = csrf_token_of(switched.text)
        console.post("/i18n/setlang/", [("csrfmiddlewaretoken", token), ("language", "en")])
        assert '<html lang="en">' in console.get(task_page).text
