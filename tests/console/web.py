"""A person using the console over real HTTP, the way a browser without JavaScript would: sign in
through the sign-in form, keep the cookies, read forms out of the HTML and post them back with
their CSRF token."""

import re
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser
from typing import Any

import httpx

from tests.support.people import TestPerson

FormData = list[tuple[str, str]]


@dataclass
class Form:
    """One ``<form>`` of a page: its attributes and the values a browser would send as they
    stand (hidden and text inputs, checked boxes and radios, textareas, selected options)."""

    attrs: dict[str, str]
    fields: FormData = field(default_factory=list)
    hidden: FormData = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        return self.attrs.get("action", "")

    def value(self, name: str) -> str | None:
        return next((value for key, value in self.fields if key == name), None)


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._form: Form | None = None
        self._textarea: tuple[str, list[str]] | None = None
        self._select: str | None = None
        self._option: tuple[str, bool] | None = None
        self._select_values: list[str] = []
        self._select_first: str | None = None

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {name: value or "" for name, value in attrs_list}
        if tag == "form":
            self._form = Form(attrs=attrs)
            self.forms.append(self._form)
            return
        form = self._form
        if form is None:
            return
        name = attrs.get("name")
        if tag == "input" and name:
            form.names.append(name)
            kind = attrs.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    form.fields.append((name, attrs.get("value", "on")))
            elif kind not in ("submit", "button", "image", "file", "reset"):
                form.fields.append((name, attrs.get("value", "")))
                if kind == "hidden":
                    form.hidden.append((name, attrs.get("value", "")))
        elif tag == "textarea" and name:
            form.names.append(name)
            self._textarea = (name, [])
        elif tag == "select" and name:
            form.names.append(name)
            self._select, self._select_values, self._select_first = name, [], None
        elif tag == "option" and self._select is not None:
            self._option = (attrs.get("value", ""), "selected" in attrs)
            if self._select_first is None:
                self._select_first = attrs.get("value", "")
            if "selected" in attrs:
                self._select_values.append(attrs.get("value", ""))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "textarea" and self._textarea is not None and self._form is not None:
            name, parts = self._textarea
            text = "".join(parts)
            # Browsers drop the one newline that follows <textarea>; Django writes it.
            self._form.fields.append((name, text[1:] if text.startswith("\n") else text))
            self._textarea = None
        elif tag == "select" and self._select is not None and self._form is not None:
            values = self._select_values or (
                [self._select_first] if self._select_first is not None else []
            )
            self._form.fields.extend((self._select, value) for value in values)
            self._select = None


def forms_of(html: str) -> list[Form]:
    parser = _FormParser()
    parser.feed(html)
    parser.close()
    return parser.forms


def form_with(html: str, field_name: str) -> Form:
    """The form of the page that holds a field called ``field_name``."""
    for form in forms_of(html):
        if field_name in form.names:
            return form
    raise AssertionError(f"no form with a field {field_name!r} on the page")


def csrf_token_of(html: str) -> str:
    token = form_with(html, "csrfmiddlewaretoken").value("csrfmiddlewaretoken")
    assert token, "the page's form carries no CSRF token"
    return token


class Console:
    """One browser session of one person on a console server."""

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None) -> None:
        self.http = httpx.Client(
            base_url=base_url, timeout=60, follow_redirects=False, headers=headers or {}
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Console":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sign_in(self, person: TestPerson) -> "Console":
        page = self.http.get("/signin")
        assert page.status_code == 200, page.text
        token = csrf_token_of(page.text)
        form = form_with(page.text, "username")
        data = [(name, value) for name, value in form.hidden if name != "csrfmiddlewaretoken"]
        data += [
            ("csrfmiddlewaretoken", token),
            ("username", person.username),
            ("password", person.password),
        ]
        answer = self.http.post("/signin", data=_pairs(data))
        assert answer.status_code == 302, f"sign-in failed: {answer.status_code} {answer.text}"
        return self

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.get(path, **kwargs)

    def post(self, path: str, data: FormData, **kwargs: Any) -> httpx.Response:
        return self.http.post(path, data=_pairs(data), **kwargs)

    def csrf_token(self) -> str:
        """A fresh CSRF token from a page of this session (the work queue's language form)."""
        page = self.http.get("/signin" if "sessionid" not in self.http.cookies else "/")
        return csrf_token_of(page.text)


def _pairs(data: FormData) -> dict[str, list[str]]:
    """httpx takes repeated fields as lists."""
    out: dict[str, list[str]] = {}
    for name, value in data:
        out.setdefault(name, []).append(value)
    return out


def signed_in(base_url: str, person: TestPerson, **kwargs: Any) -> Console:
    return Console(base_url, **kwargs).sign_in(person)


def text_of(html: str) -> str:
    """The page's visible text, tags dropped, entities decoded, whitespace collapsed."""
    without_tags = re.sub(r"<[^>]+>", " ", html)
    return re.sub(r"\s+", " ", unescape(without_tags)).strip()


def element(html: str, pattern: str) -> str:
    """The raw HTML of the first match of ``pattern`` (a regex, DOTALL)."""
    match = re.search(pattern, html, re.DOTALL)
    assert match is not None, f"nothing on the page matches {pattern!r}"
    return match.group(0)


def section(html: str, key: str) -> str:
    """One section of the work queue (``review``, ``terminal`` or ``list``)."""
    return element(html, rf'<section aria-labelledby="section-{key}">.*?</section>')


def task_links(html: str) -> list[str]:
    """Ids of the tasks linked from ``html``, in order."""
    return re.findall(r'href="/tasks/([0-9a-f]{32})"', html)


def pre_text(html: str, pattern: str) -> str:
    """The decoded text of a ``<pre>`` block found by ``pattern``."""
    block = element(html, pattern)
    inner = re.sub(r"^<pre[^>]*>|</pre>$", "", block)
    return unescape(inner)


def park_task(
    queue_id: str,
    *,
    handler: str = "object.prepare",
    payload: str = '{"object_ref":"objects/input"}',
    business_key: str = "",
) -> str:
    """Accept a task into the queue and let its one attempt end UNKNOWN: it is parked in
    NEEDS_REVIEW at revision 3, as a worker that lost its connection leaves it."""
    from orbit_console.ledger import lifecycle
    from orbit_console.ledger.models import AttemptOutcome, Queue

    queue = Queue.objects.get(id=queue_id)
    submitter = lifecycle.actor_id_for(queue.namespace_id, "submitter")
    worker = lifecycle.actor_id_for(queue.namespace_id, "worker-1")
    task = lifecycle.task_accept(
        queue=queue,
        actor_id=submitter,
        handler=handler,
        payload=payload,
        business_key=business_key,
        retry=lifecycle.RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
    )
    lifecycle.attempt_start(task=task, worker_id="worker-1")
    lifecycle.attempt_finish(
        task=task, worker_actor_id=worker, outcome=AttemptOutcome.UNKNOWN, error="timeout"
    )
    return task.id


# --- The wizards --------------------------------------------------------------------------------

REVIEW_CHECKS: FormData = [
    ("checked_history", "on"),
    ("checked_late_evidence", "on"),
    ("checked_external", "on"),
    ("checked_lease", "on"),
]
RETRY_CHECKS: FormData = [
    ("checked_history", "on"),
    ("checked_external", "on"),
    ("checked_business_key", "on"),
]
REASON = "Checked the object store: the write never happened"
EVIDENCE = "evidence:reconciliation-001"


def step_of(html: str) -> str:
    value = form_with(html, "pin").value("step")
    assert value is not None
    return value


def wizard_post(
    console: Console, path: str, page_html: str, values: FormData, *, nav: str = "next"
) -> httpx.Response:
    """Send the wizard's form as a browser would: its hidden fields (CSRF token, pin, step and
    what earlier steps carried) plus what the person typed on this step."""
    form = form_with(page_html, "pin")
    return console.post(path, [*form.hidden, *values, ("nav", nav)])


def review_values(
    *,
    outcome: str = "FAILED",
    result: str = '{"confirmed": true, "sequence": 9007199254740993}',
    reason: str = REASON,
    evidence_ref: str = EVIDENCE,
) -> FormData:
    return [
        ("outcome", outcome),
        ("result", result),
        ("reason", reason),
        ("evidence_ref", evidence_ref),
    ]


def retry_values(
    *,
    budget_value: str = "10",
    budget_unit: str = "min",
    available_at: str = "",
    start_deadline_at: str = "",
    reason: str = "The earlier execution has ended; running it again is safe",
    evidence_ref: str = "evidence:safe-retry-001",
) -> FormData:
    return [
        ("reason", reason),
        ("evidence_ref", evidence_ref),
        ("budget_value", budget_value),
        ("budget_unit", budget_unit),
        ("available_at", available_at),
        ("start_deadline_at", start_deadline_at),
    ]


def wizard_to_confirm(
    console: Console, task_id: str, action: str, decide: FormData
) -> httpx.Response:
    """Walk the review or retry wizard up to its confirm step."""
    path = f"/tasks/{task_id}/{action}"
    page = console.get(path)
    assert page.status_code == 200, page.text
    checks = REVIEW_CHECKS if action == "review" else RETRY_CHECKS
    page = wizard_post(console, path, page.text, checks)
    assert page.status_code == 200, page.text
    assert step_of(page.text) == "decide"
    page = wizard_post(console, path, page.text, decide)
    assert page.status_code == 200, text_of(page.text)
    assert step_of(page.text) == "confirm"
    return page


def wizard_submit(console: Console, task_id: str, action: str, confirm_html: str) -> httpx.Response:
    """Tick the confirmation of the confirm step and submit."""
    confirmation = "execution_settled" if action == "review" else "safe_to_retry"
    path = f"/tasks/{task_id}/{action}"
    return wizard_post(console, path, confirm_html, [(confirmation, "on")], nav="submit")


def submission_id_of(response: httpx.Response) -> str:
    assert response.status_code == 303, f"{response.status_code}: {text_of(response.text)}"
    match = re.fullmatch(r"/submissions/([0-9a-f]{32})", response.headers["location"])
    assert match is not None, response.headers["location"]
    return match.group(1)


def review_through_console(
    console: Console, task_id: str, **decide: str
) -> tuple[str, httpx.Response]:
    """A whole review through the wizard; the submission's id and its page."""
    confirm = wizard_to_confirm(console, task_id, "review", review_values(**decide))
    submission_id = submission_id_of(wizard_submit(console, task_id, "review", confirm.text))
    return submission_id, console.get(f"/submissions/{submission_id}")
