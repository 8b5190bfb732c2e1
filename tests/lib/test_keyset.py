"""Keyset batches (``lib.keyset.ascending``): every row once, in key order, across batch
boundaries that fall inside runs of equal leading key values."""

import pytest
from django.contrib.auth.models import User

from orbit_console.lib.keyset import ascending


@pytest.mark.django_db
@pytest.mark.parametrize("batch", [1, 2, 3, 7, 100])
def test_ascending_reads_every_row_once_in_key_order(batch: int) -> None:
    for number in range(7):
        User.objects.create(username=f"person-{number}", is_staff=number % 3 == 0)
    key = ("is_staff", "username")

    rows = list(ascending(User.objects.all(), key, batch=batch))

    expected = list(User.objects.order_by(*key).values_list(*key))
    assert [(row.is_staff, row.username) for row in rows] == expected
    assert len(expected) == 7


@pytest.mark.django_db
def test_ascending_keeps_the_querysets_filter() -> None:
    for number in range(5):
        User.objects.create(username=f"person-{number}", is_active=number != 2)

    rows = ascending(User.objects.filter(is_active=True), ("username",), batch=2)

    assert [row.username for row in rows] == ["person-0", "person-1", "person-3", "person-4"]
