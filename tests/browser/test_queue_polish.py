"""What people used to Temporal UI, Sidekiq Web and Oban Web expect of a work queue (issue 30):
find a task by id, sort, a total count, "Newer" beside "Older", relative times with the exact
time on hover, copy buttons on ids, readable names, a dark theme, and field errors a screen
reader is told about."""

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from orbit_console.lib.ids import new_id
from tests.browser.conftest import sign_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser


def test_a_field_in_error_is_described_by_its_error(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The field's aria-describedby names id_<field>_error: that element must exist and hold
    the error, or a screen reader announces nothing."""
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/?business_key=a&business_key_prefix=b")
    field = page.locator("#id_business_key_prefix")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_attribute("aria-describedby", "id_business_key_prefix_error")
    expect(page.locator("#id_business_key_prefix_error")).to_contain_text(
        "Give a business key or its start, not both."
    )
    expect(field).to_have_accessible_description("Give a business key or its start, not both.")


def test_queue_times_are_relative_with_the_exact_time_on_hover_and_stay_current(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    page.clock.install()
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/")
    row = page.locator("tr", has=page.locator(f"a[href='/tasks/{world['tasks']['failed']}']"))
    updated = row.locator("time[data-relative]")
    expect(updated).to_have_text("now")
    assert (updated.get_attribute("datetime") or "").endswith("Z")
    assert "UTC" in (updated.get_attribute("title") or "")
    # No reload: the page's own clock moves on and the text follows within 30 s.
    page.clock.fast_forward("07:00")
    expect(updated).to_have_text("7 minutes ago")


def test_relative_times_speak_the_pages_language(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    page.context.set_extra_http_headers({"Accept-Language": "zh-Hans"})
    page.clock.install()
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/")
    page.clock.fast_forward("03:00:00")
    expect(page.locator("time[data-relative]").first).to_have_text("3小时前")


def test_ids_have_a_copy_button_that_says_copied(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    task_id = world["tasks"]["failed"]
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/")
    button = page.get_by_role("button", name=f"Copy task id {task_id}")
    expect(button).to_have_text("Copy")
    button.click()
    expect(button).to_have_text("Copied")
    expect(page.get_by_role("status")).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == task_id
    # The task page offers the same for its id.
    page.goto(f"{orbit_server.url}/tasks/{task_id}")
    page.get_by_role("button", name=f"Copy task id {task_id}").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == task_id


def test_a_browser_that_prefers_dark_gets_the_dark_theme(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/")
    light = page.evaluate("() => getComputedStyle(document.documentElement).backgroundColor")
    assert light == "rgb(255, 255, 255)"
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate("() => getComputedStyle(document.documentElement).backgroundColor")
    assert dark == "rgb(13, 17, 23)"
    ink = page.evaluate("() => getComputedStyle(document.body).color")
    assert ink == "rgb(230, 237, 243)"


def test_find_a_task_by_id_from_the_queue(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    task_id = world["tasks"]["needs_review_2"]
    sign_in(page, orbit_server, people["auditor"])
    page.goto(f"{orbit_server.url}/")
    box = page.get_by_role("textbox", name="Find a task by id")
    # Pasted as people paste: capitals and spaces around it.
    box.fill(f"  {task_id.upper()} ")
    page.get_by_role("button", name="Open task").click()
    expect(page).to_have_url(f"{orbit_server.url}/tasks/{task_id}")

    page.goto(f"{orbit_server.url}/")
    box.fill("not-an-id")
    page.get_by_role("button", name="Open task").click()
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_find_error")).to_contain_text("is not one")

    # Another namespace's task reads as absent: the same words as for no task at all.
    from orbit_console.ledger.seed import seed_world

    elsewhere = seed_world(label="elsewhere")["tasks"]["needs_review"]
    for missing in (new_id(), elsewhere):
        page.goto(f"{orbit_server.url}/")
        box.fill(missing)
        page.get_by_role("button", name="Open task").click()
        expect(page.locator("#id_find_error")).to_contain_text(
            f"No task {missing} that you may read"
        )
        expect(box).to_have_value(missing)
        expect(page.locator("h1")).to_have_text("Work queue")


def test_namespaces_and_platform_actors_go_by_readable_names(
    page: Page, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """CONSOLE_NAMESPACE_NAMES and CONSOLE_ACTOR_NAMES name what the platform knows by id: the
    task page shows the names, the ids beside them; the queue's namespace choice too."""
    from orbit_console.ledger.lifecycle import actor_id_for

    namespace_id = world["namespace_id"]
    worker = actor_id_for(namespace_id, "worker-1")
    named = DaphneServer(
        "orbit-named",
        env={
            "CONSOLE_NAMESPACE_NAMES": json.dumps({namespace_id: "Payments (EU)"}),
            "CONSOLE_ACTOR_NAMES": json.dumps({worker: "Nightly worker"}),
        },
    ).start()
    try:
        sign_in(page, named, people["operator"])
        page.goto(f"{named.url}/tasks/{world['tasks']['failed']}")
        expect(page.locator("dd", has_text=namespace_id)).to_contain_text("Payments (EU)")
        expect(page.locator("#timeline-entries")).to_contain_text("Nightly worker")
    finally:
        named.stop()


def test_a_namespace_shows_the_name_the_api_gives_it(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    from orbit_console.ledger.models import Namespace

    name = Namespace.objects.get(id=world["namespace_id"]).name
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/tasks/{world['tasks']['failed']}")
    expect(page.locator("dd", has_text=world["namespace_id"])).to_contain_text(name)


def test_the_queue_counts_sorts_and_pages_both_ways(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    from orbit_console.ledger.models import Task
    from orbit_console.ledger.seed import seed_incident

    seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=30, label="sort"
    )
    parked = Task.objects.filter(namespace_id=world["namespace_id"], state="NEEDS_REVIEW")
    newest_first = [t.id for t in parked.order_by("-created_at", "-id")]
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/")
    review = page.locator("section[aria-labelledby=section-review]")
    expect(review.locator("h2")).to_contain_text(f"{len(newest_first)} tasks")

    def shown() -> list[str]:
        return [
            (link.get_attribute("href") or "").rsplit("/", 1)[-1]
            for link in review.locator("tbody tr td.id-cell a").all()
        ]

    expect(review.locator("tbody tr")).to_have_count(25)
    assert shown() == newest_first[:25]
    expect(review.get_by_role("link", name="Newer")).to_have_count(0)
    review.get_by_role("link", name="Older").click()
    expect(review.locator("tbody tr")).to_have_count(len(newest_first) - 25)
    assert shown() == newest_first[25:]
    # "Newer" beside "Older": back to the page before, by its own cursor.
    review.get_by_role("link", name="Newer").click()
    expect(review.locator("tbody tr")).to_have_count(25)
    assert shown() == newest_first[:25]

    # Oldest first: the list turns round, and its next page holds newer tasks.
    page.get_by_label("Sort").select_option(label="Oldest first")
    expect(page).to_have_url(re.compile(r"order=created_asc"))
    expect(review.locator("tbody tr").first).to_contain_text(newest_first[-1][:8])
    assert shown() == newest_first[::-1][:25]
    expect(review.get_by_role("link", name="Newer")).to_be_visible()
    expect(review.get_by_role("link", name="Older")).to_have_count(0)


def test_past_the_cap_the_queue_says_more_than(
    page: Page, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    from orbit_console.ledger.models import Task

    assert Task.objects.filter(namespace_id=world["namespace_id"], state="CANCELLED").count() == 1
    capped = DaphneServer("orbit-capped", env={"ORBIT_TASK_COUNT_CAP": "1"}).start()
    try:
        sign_in(page, capped, people["operator"])
        page.goto(f"{capped.url}/")
        heading = page.locator("#section-review")
        expect(heading).to_contain_text("more than 1 tasks")
        page.goto(f"{capped.url}/?state=CANCELLED")  # one cancelled task: exactly the cap
        expect(page.locator("#section-list")).to_contain_text("CANCELLED · 1 task")
        expect(page.locator("#section-list")).not_to_contain_text("more than")
    finally:
        capped.stop()
