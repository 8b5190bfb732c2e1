"""A new decision started from one that was set aside (``?from=``, views/wizards._kept_fields):
its fields as the person typed them, a retry's budget in the largest unit that holds it whole."""

import asyncio
import json

import pytest
from django.contrib.sessions.backends.cache import SessionStore
from django.test import RequestFactory

from orbit_console.console.views.common import set_aside
from orbit_console.console.views.wizards import _kept_fields

STANDING = "f" * 32


def kept(body: dict[str, object], *, standing: str = STANDING) -> dict[str, str]:
    request = RequestFactory().get("/tasks/x/retry", {"from": standing})
    request.session = SessionStore()

    async def scenario() -> dict[str, str]:
        await set_aside(request, STANDING, json.dumps(body))
        return dict((await _kept_fields(request)).items())

    return asyncio.run(scenario())


@pytest.mark.parametrize(
    ("timeout_ms", "budget"),
    [
        (60_000, ("1", "min")),
        (90_000, ("90", "s")),
        (7_200_000, ("2", "h")),
        (86_400_000, ("1", "d")),
    ],
)
def test_a_retrys_budget_comes_back_in_the_largest_whole_unit(
    timeout_ms: int, budget: tuple[str, str]
) -> None:
    fields = kept(
        {"reason": "Safe to run again", "evidence_ref": "ev:1", "task_timeout_ms": timeout_ms}
    )
    assert (fields["budget_value"], fields["budget_unit"]) == budget
    assert (fields["reason"], fields["evidence_ref"]) == ("Safe to run again", "ev:1")


def test_a_budget_no_unit_holds_whole_is_typed_again() -> None:
    assert "budget_value" not in kept(
        {"reason": "r", "evidence_ref": "e", "task_timeout_ms": 1_500}
    )


def test_nothing_is_kept_for_a_decision_the_session_does_not_hold() -> None:
    assert kept({"reason": "r", "evidence_ref": "e"}, standing="0" * 32) == {}
