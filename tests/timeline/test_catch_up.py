"""Catching up after a reconnect (issue 4): the page asks for what came after its newest
platform entry and gets all of it, however many pages that spans, so the timeline converges to
the API's truth; when it missed more than a catch-up fetches, it is told to start over from the
newest page instead of keeping a gap."""

import re
from typing import Any
from urllib.parse import quote

import pytest

from orbit_console.ledger.models import OperationAudit
from orbit_console.timeline.builder import CATCH_UP_PAGES, PAGE_SIZE
from orbit_console.timeline.entries import Entry
from tests.console.web import Console, signed_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer
from tests.timeline.helpers import add_operations


@pytest.fixture
def auditor(orbit_server: DaphneServer, people: dict[str, TestPerson]) -> Any:
    with signed_in(orbit_server.url, people["auditor"]) as console:
        yield console


def newest_platform_time(task_id: str) -> str:
    """The ``since`` the page's script sends: the time part of its newest entry's sort key."""
    newest = OperationAudit.objects.filter(task_id=task_id).order_by("-created_at").first()
    assert newest is not None
    entry = Entry(key="", source="platform", kind="", created_at=newest.created_at, actor="")
    return entry.sort_key.split("|")[0]


def catch_up(auditor: Console, task_id: str, since: str | None) -> Any:
    query = f"?since={quote(since)}" if since is not None else ""
    response = auditor.get(f"/tasks/{task_id}/timeline/latest{query}")
    assert response.status_code == 200, response.text
    return response


def shown_operations(html: str) -> list[str]:
    return re.findall(r'id="entry-op-([0-9a-f]{32})"', html)


def test_a_page_that_missed_several_pages_gets_all_of_them(
    auditor: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    since = newest_platform_time(task_id)
    missed = add_operations(task_id, PAGE_SIZE * 2 + 5)

    response = catch_up(auditor, task_id, since)

    assert "orbit-timeline" not in response.headers
    shown = shown_operations(response.text)
    assert set(missed) <= set(shown)
    assert len(shown) == len(set(shown))
    # Newest first, as the page keeps them.
    assert [op for op in shown if op in missed] == list(reversed(missed))
    assert 'id="timeline-older"' not in response.text  # the page keeps its own "Older"


def test_a_page_that_missed_nothing_gets_only_the_newest_page(
    auditor: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    add_operations(task_id, PAGE_SIZE * 3)
    since = newest_platform_time(task_id)

    response = catch_up(auditor, task_id, since)

    assert "orbit-timeline" not in response.headers
    assert len(shown_operations(response.text)) == PAGE_SIZE


def test_a_page_that_missed_more_than_a_catch_up_fetches_starts_over(
    auditor: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    since = newest_platform_time(task_id)
    missed = add_operations(task_id, PAGE_SIZE * CATCH_UP_PAGES + 1)

    response = catch_up(auditor, task_id, since)

    assert response.headers["orbit-timeline"] == "reset"
    assert shown_operations(response.text) == list(reversed(missed))[:PAGE_SIZE]
    assert 'id="timeline-older"' in response.text  # from which the rest can be paged


@pytest.mark.parametrize("since", [None, "", "yesterday", "2026-11-30T08:00:00"])
def test_without_a_usable_since_a_long_timeline_starts_over(
    auditor: Console, world: dict[str, Any], since: str | None
) -> None:
    """No platform entry on the page (or a time without its offset): nothing tells how far
    back the page is, so a timeline longer than a catch-up starts over."""
    task_id = world["tasks"]["needs_review"]
    add_operations(task_id, PAGE_SIZE * CATCH_UP_PAGES + 1)

    response = catch_up(auditor, task_id, since)

    assert response.headers["orbit-timeline"] == "reset"
    assert len(shown_operations(response.text)) == PAGE_SIZE


def test_without_a_since_a_short_timeline_is_sent_whole(
    auditor: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    known = list(OperationAudit.objects.filter(task_id=task_id).values_list("id", flat=True))
    assert known

    response = catch_up(auditor, task_id, None)

    assert "orbit-timeline" not in response.headers
    assert sorted(shown_operations(response.text)) == sorted(known)
