"""The order of timeline entries: newest first by time, then by key, the same in Python
(``merged``) as in the page's script, which sorts the entries' ``data-sort`` keys as text."""

from datetime import UTC, datetime, timedelta, timezone

from orbit_console.timeline.entries import Entry, from_operation, merged


def entry(key: str, created_at: datetime) -> Entry:
    return Entry(key=key, source="platform", kind="task.review", created_at=created_at, actor="")


SECOND = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)


def test_entries_within_one_second_are_ordered_by_their_fractions() -> None:
    """Times are printed without trailing zeros (RFC3339Nano), so as text "00.5Z" would sort
    before "00Z" and "00.55Z" before "00.5Z"; the sort key must not."""
    whole = entry("op-a", SECOND)
    half = entry("op-b", SECOND + timedelta(microseconds=500_000))
    later = entry("op-c", SECOND + timedelta(microseconds=550_000))
    next_second = entry("op-d", SECOND + timedelta(seconds=1))

    ordered = merged([half, next_second, whole, later])

    assert [item.key for item in ordered] == ["op-d", "op-c", "op-b", "op-a"]
    # The page's script sorts these texts: as text, they must be in the same order.
    keys = [item.sort_key for item in (whole, half, later, next_second)]
    assert keys == sorted(keys)
    assert keys[:3] == [
        "2026-11-30T08:00:00.000000Z|op-a",
        "2026-11-30T08:00:00.500000Z|op-b",
        "2026-11-30T08:00:00.550000Z|op-c",
    ]


def test_sort_key_is_in_utc_whatever_the_time_zone_of_the_time() -> None:
    tokyo = timezone(timedelta(hours=9))
    assert entry("ev-x", SECOND.astimezone(tokyo)).sort_key == entry("ev-x", SECOND).sort_key
    assert entry("ev-x", SECOND).sort_key == "2026-11-30T08:00:00.000000Z|ev-x"


def test_same_time_is_ordered_by_key_and_duplicates_are_dropped() -> None:
    ordered = merged([entry("op-a", SECOND), entry("op-b", SECOND), entry("op-a", SECOND)])
    assert [item.key for item in ordered] == ["op-b", "op-a"]


def test_a_retried_entry_shows_no_state_change_the_operation_did_not_record() -> None:
    """Issue 30: a retry records the source's state before and nothing of it after; the
    source's entry read "state FAILED → —"."""
    retried = from_operation(
        {
            "id": "a" * 32,
            "task_id": "b" * 32,
            "operation_id": "c" * 32,
            "actor_id": "d" * 32,
            "action": "task.retry",
            "created_at": "2026-11-30T08:00:00Z",
            "reason": "safe to run again",
            "evidence_ref": "ev:1",
            "before": {"state": "FAILED", "revision": "3"},
            "after": {"source_task_id": "b" * 32, "retry_task_id": "e" * 32, "safe_to_retry": True},
        },
        {},
    )
    assert [what for what, _, _ in retried.changes] == ["safe_to_retry"]
    assert retried.new_task_id == "e" * 32
    reviewed = from_operation(
        {
            "id": "f" * 32,
            "task_id": "b" * 32,
            "operation_id": "0" * 32,
            "actor_id": "d" * 32,
            "action": "task.review",
            "created_at": "2026-11-30T08:00:00Z",
            "before": {"state": "NEEDS_REVIEW", "revision": "3"},
            "after": {"state": "FAILED", "revision": "4"},
        },
        {},
    )
    assert reviewed.changes[:2] == [("state", "NEEDS_REVIEW", "FAILED"), ("revision", "3", "4")]
