"""The order of timeline entries: newest first by time, then by key, the same in Python
(``merged``) as in the page's script, which sorts the entries' ``data-sort`` keys as text."""

from datetime import UTC, datetime, timedelta, timezone

from orbit_console.timeline.entries import Entry, merged


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
