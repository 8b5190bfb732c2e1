"""Keyset batches (``lib.keyset.ascending``): every row once, in key order, across batch
boundaries that fall inside runs of equal leading key values.

The tests read only the people they make (their names' prefix): people committed by the
suite's other tests are in the same database."""

import pytest
from django.contrib.auth.models import User

from orbit_console.lib.keyset import ascending


@pytest.mark.django_db
@pytest.mark.parametrize("batch", [1, 2, 3, 7, 100])
def test_ascending_reads_every_row_once_in_key_order(batch: int) -> None:
    for number in range(7):
        User.objects.create(username=f"keyset-{number}", is_staff=number % 3 == 0)
    key = ("is_staff", "username")
    mine = User.objects.filter(username__startswith="keyset-")

    rows = list(ascending(mine, key, batch=batch))

    expected = list(mine.order_by(*key).values_list(*key))
    assert [(row.is_staff, row.username) for row in rows] == expected
    assert len(expected) == 7


@pytest.mark.django_db
def test_ascending_keeps_the_querysets_filter() -> None:
    for number in range(5):
        User.objects.create(username=f"keyset-{number}", is_active=number != 2)

    mine = User.objects.filter(username__startswith="keyset-", is_active=True)
    rows = ascending(mine, ("username",), batch=2)

    assert [row.username for row in rows] == ["keyset-0", "keyset-1", "keyset-3", "keyset-4"]
