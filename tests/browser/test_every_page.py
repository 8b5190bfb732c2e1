"""Every page, for every role, in both languages, on a phone (issue 15): no page scrolls sideways
at 390 px, axe-core (the accessibility engine of Deque, run in the page) finds no serious or
critical violation, and no page in 简体中文 shows an English sentence of the console's catalogue
(one that reached the page without being translated). Each role sees the pages it works with,
filled with a seeded world's history: an applied review (its timeline carries sha256 links), an
open submission, a pending proposal (and its task's banner), a task retried until its new task
ended (the queue's mark), a finished batch, the platform's operation detail, the approvals queue
and the explorer, a wizard's steps, a page whose session has expired and the error pages."""

import gettext
import json
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.conf import settings
from django.contrib.sessions.models import Session
from playwright.sync_api import Page, expect

from orbit_console.lib.ids import new_id
from tests.browser.conftest import next_step, retried_until_it_ended, sign_in, tick_all_checks
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def english_sentences() -> frozenset[str]:
    """The console's own English sentences that have a translation (from the compiled
    catalogue): any of them on a zh-Hans page was shown untranslated. Sentences with
    placeholders are left out (their English text never appears whole)."""
    compiled = Path(settings.BASE_DIR) / "orbit_console/locale/zh_Hans/LC_MESSAGES/django.mo"
    with compiled.open("rb") as file:
        catalog: dict[Any, str] = gettext.GNUTranslations(file)._catalog  # type: ignore[attr-defined]
    return frozenset(
        msgid
        for msgid, msgstr in catalog.items()
        if isinstance(msgid, str)
        and msgstr != msgid
        and " " in msgid
        and len(msgid) >= 12
        and not any(mark in msgid for mark in ("%(", "{", "<"))
    )


ENGLISH = english_sentences()
SERIOUS = ("serious", "critical")
AXE = Axe()
# What a theme can break: the contrast of text, and of links with the text around them.
COLOUR_RULES = {
    "resultTypes": ["violations"],
    "runOnly": {"type": "rule", "values": ["color-contrast", "link-in-text-block"]},
}


@pytest.fixture
def batch_pages(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> list[str]:
    """The operator's batches, made through the console: one finished (its progress and
    outcomes; sent by ``manage.py reconcile --once``), one selected and not yet decided (the
    verify and decide steps), and the list of batches."""
    from orbit_console.ledger.seed import seed_incident
    from tests.console.test_batch_pages import REVIEW, new_batch, send
    from tests.console.web import signed_in
    from tests.support.servers import run_manage

    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="pages"
    )
    with signed_in(orbit_server.url, people["operator"]) as console:
        _, finished = new_batch(
            console, action="review", task=[*incident[:2], world["tasks"]["failed"]]
        )
        _, draft = new_batch(console, action="review", task=incident[2:])
        assert finished is not None and draft is not None
        send(console, f"/batches/{finished.id}/decide", REVIEW)
        send(console, f"/batches/{finished.id}/confirm", {"count": "2", "confirm": "on"})
    assert run_manage("reconcile", "--once").returncode == 0
    return ["/batches", f"/batches/{finished.id}", f"/batches/{draft.id}"]


def pages_of(role: str, world: dict[str, Any], history: dict[str, Any]) -> list[str]:
    applied = history["applied"]
    common = [
        *history.get("batch_pages", []),
        "/",
        f"/tasks/{world['tasks']['needs_review_2']}",
        f"/tasks/{applied.task_id}",
        f"/tasks/{applied.task_id}/operations/{applied.audit_id}",
        f"/submissions/{applied.id}",
        f"/submissions/{history['pending'].id}",
        f"/proposals/{history['proposal'].id}",
        # Issue 30's states: a task with a proposal pending (its banner), a task retried until
        # its new task ended (the queue's mark "retried → SUCCEEDED" is on "/").
        f"/tasks/{world['tasks']['failed']}",
        f"/tasks/{world['tasks']['cancelled']}",
        "/decisions",
        "/notifications",
        f"/tasks/{new_id()}",  # not found
    ]
    by_role = {
        "operator": [
            f"/tasks/{world['tasks']['needs_review_2']}/review",
            f"/tasks/{world['tasks']['failed']}/retry",
            f"/tasks/{applied.task_id}/review",  # 409: the task is no longer NEEDS_REVIEW
            "/audit",  # not allowed
        ],
        "supervisor": [
            "/approvals",
            "/audit",
            f"/tasks/{world['tasks']['failed']}/retry",
            f"/tasks/{applied.task_id}/review",
        ],
        "auditor": ["/audit", "/approvals"],  # the second: not allowed
    }
    return common + by_role[role]


def problems_along_the_wizard(page: Page, url: str, language: str) -> dict[str, list[str]]:
    """The review wizard's later steps as a person walks them (nothing is sent): Decide with
    the mistakes of an empty form, Decide filled in, Confirm."""
    found = {}
    page.goto(url)
    tick_all_checks(page)
    next_step(page)
    expect(page.locator("#id_reason")).to_be_visible()
    next_step(page)  # nothing typed
    expect(page.locator("#id_reason[aria-invalid=true], .has-error").first).to_be_visible()
    found["decide, with mistakes"] = problems_of(page, language)
    page.locator("input[name=outcome][value=FAILED]").check()
    page.fill("#id_result", '{"confirmed": true}')
    page.fill("#id_reason", "Checked the object store: the write never happened")
    page.fill("#id_evidence_ref", "evidence:every-page-001")
    next_step(page)
    expect(page.locator("input[name=execution_settled]")).to_be_visible()
    found["confirm"] = problems_of(page, language)
    return {f"{language} {url} {step}": problems for step, problems in found.items() if problems}


def problems_of(page: Page, language: str = "en") -> list[str]:
    """What is wrong with the page as it stands: sideways scrolling, axe's serious or critical
    violations (rule, impact, the first offending element), and in zh-Hans English sentences.
    The page is looked at in the light theme, then in the dark one a browser that prefers it
    gets (issue 30): only colours change there, so only axe's colour rules run again."""
    found = []
    if language != "en":
        text = page.inner_text("body")
        found += [f"English left: {sentence!r}" for sentence in sorted(ENGLISH) if sentence in text]
    overflow = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    if overflow[0] > overflow[1]:
        wide = page.evaluate(
            """() => {
                const width = document.documentElement.clientWidth + 1;
                const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
                const contained = e => {
                    for (let up = e.parentElement; up; up = up.parentElement) {
                        if (scrolls(up)) { return true; }
                    }
                    return false;
                };
                return [...document.querySelectorAll('body *')]
                    .filter(e => e.getBoundingClientRect().right > width && !contained(e))
                    .slice(-3).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className);
            }"""
        )
        found.append(f"scrolls sideways: {overflow[0]} px in {overflow[1]} ({wide})")
    found += serious_violations(page, "light")
    page.emulate_media(color_scheme="dark")
    try:
        found += serious_violations(page, "dark", options=COLOUR_RULES)
    finally:
        page.emulate_media(color_scheme="light")
    return found


def serious_violations(page: Page, scheme: str, **options: Any) -> list[str]:
    results = AXE.run(page, **options)
    return [
        f"axe ({scheme}) {violation['impact']} {violation['id']}: "
        f"{violation['nodes'][0]['target'] if violation['nodes'] else '?'}"
        for violation in results.response["violations"]
        if violation["impact"] in SERIOUS
    ]


def problems_once_signed_out(
    page: Page, server: DaphneServer, world: dict[str, Any], language: str
) -> dict[str, list[str]]:
    """An expired session's page (issue 30): a task page whose session has ended on the server
    says so when the tab comes back into view (it asks ``/session``), its badges "signed out"."""
    page.goto(f"{server.url}/tasks/{world['tasks']['failed']}")
    expect(page.locator("header.topbar")).to_be_visible()
    [key] = [c["value"] for c in page.context.cookies() if c["name"] == "sessionid"]
    Session.objects.filter(session_key=key).delete()
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(page.locator("#session-sign-in")).to_be_visible()
    found = problems_of(page, language)
    return {f"{language} expired session": found} if found else {}


@pytest.mark.parametrize("role", ["operator", "supervisor", "auditor"])
def test_every_page_fits_a_phone_and_has_no_serious_accessibility_violation(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    history: dict[str, Any],
    batch_pages: list[str],
    role: str,
) -> None:
    """In the light theme and in the dark one a browser that prefers it gets (issue 30): axe
    checks the colours' contrast in both (problems_of)."""
    history = {**history, "batch_pages": batch_pages}
    retried_until_it_ended(world, people["operator"], "SUCCEEDED")
    page.set_viewport_size(PHONE)
    page.emulate_media(color_scheme="light")
    problems: dict[str, list[str]] = {}
    for language in ("en", "zh-Hans"):
        page.context.set_extra_http_headers({"Accept-Language": language})
        page.context.clear_cookies()
        page.goto(f"{orbit_server.url}/signin")
        expect(page.locator("html")).to_have_attribute("lang", language.lower())
        if found := problems_of(page, language):
            problems[f"{language} /signin"] = found
        sign_in(page, orbit_server, people[role])
        for path in pages_of(role, world, history):
            page.goto(f"{orbit_server.url}{path}")
            expect(page.locator("header.topbar")).to_be_visible()
            if found := problems_of(page, language):
                problems[f"{language} {path}"] = found
        if role != "auditor":
            wizard = f"{orbit_server.url}/tasks/{world['tasks']['needs_review_2']}/review"
            problems.update(problems_along_the_wizard(page, wizard, language))
        problems.update(problems_once_signed_out(page, orbit_server, world, language))
    assert problems == {}, json.dumps(problems, indent=1, ensure_ascii=False)


def test_on_a_phone_the_work_queue_shows_its_rows_early_as_one_column_of_cards(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 15: at 390 px the work queue's first row started ~768 px down. Issue 30: the top
    bar took 165 px (a supervisor's, 187) and only the rows' first two columns were on the
    screen, the rest off to the side. The top bar is now at most 90 px with every link in
    reach, and each task a card with all its facts, named, in one column; the first cards are
    on the first screen."""
    page.set_viewport_size(PHONE)
    sign_in(page, orbit_server, people["supervisor"])
    header = page.locator("header.topbar").bounding_box()
    assert header is not None and header["height"] <= 90, header
    for name in ("Work queue", "My decisions", "Batches", "Approvals", "Audit"):
        link = page.locator("header nav").get_by_role("link", name=name)
        link.scroll_into_view_if_needed()
        expect(link).to_be_in_viewport()
    rows = page.locator("section[aria-labelledby=section-review] tbody tr")
    expect(rows.first).to_be_visible()
    first = rows.first.bounding_box()
    assert first is not None
    assert first["y"] + first["height"] < PHONE["height"], first  # on the first screen
    boxes = [box for row in rows.all() if (box := row.bounding_box())]
    assert {box["x"] for box in boxes} == {first["x"]}, boxes  # one column
    assert all(box["x"] + box["width"] <= PHONE["width"] for box in boxes), boxes
    assert max(box["height"] for box in boxes) < 140, boxes
    card = rows.first
    for label in ("Handler", "Business key", "Attempts", "Revision", "Updated"):
        cell = card.locator(f'td[data-label="{label}"]')
        expect(cell).to_be_in_viewport()
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"], (label, box)
    wrap = page.locator("section[aria-labelledby=section-review] .table-wrap")
    assert wrap.evaluate("e => e.scrollWidth <= e.clientWidth"), "the cards scroll sideways"
