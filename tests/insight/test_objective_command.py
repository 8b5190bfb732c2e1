"""``manage.py console objective`` (issue 43, item 2): a namespace's waiting-time objectives and
its stall alarm, set, shown and removed by an administrator; the namespace named by id or exact
name (tests/test_namespace_arguments.py holds the unknown and ambiguous ones), durations read
strictly; anything wrong stops the command (exit status 1) and changes nothing."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from orbit_console.insight.models import Objective, StallAlarm, Wait, WaitKind, WaitOrigin
from orbit_console.insight.waiting import Waiting, wait_open
from orbit_console.ledger.lifecycle import namespace_create
from orbit_console.ledger.models import Namespace
from orbit_console.lib.ids import new_id


@pytest.fixture
def team(live_db: None) -> Namespace:
    return namespace_create(name=f"Team {new_id()}")[0]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("console", "objective", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def stored(team: Namespace) -> tuple[list[tuple[str, timedelta]], list[timedelta]]:
    objectives = list(
        Objective.objects.filter(namespace_id=team.id)
        .order_by("handler")
        .values_list("handler", "decide_within")
    )
    alarms = list(StallAlarm.objects.filter(namespace_id=team.id).values_list("after", flat=True))
    return objectives, alarms


def test_an_administrator_sets_shows_and_removes_objectives_and_the_stall_alarm(
    team: Namespace,
) -> None:
    waiting = wait_open(
        Waiting(
            namespace_id=team.id,
            task_id=new_id(),
            revision=1,
            kind=WaitKind.REVIEW,
            entered_at=timezone.now() - timedelta(hours=5),
            origin=WaitOrigin.STREAM,
            handler="payment.capture",
        )
    )

    said = run(team.name, "--decide-within", "4h", "--stall-after", "2h")
    assert said.splitlines() == [
        f"'{team.name}' ({team.id}):",
        "  every handler: decide within 4h",
        "  stall alarm: no decision for 2h while tasks wait",
        "1 task(s) waiting in NEEDS_REVIEW now have the deadline it makes; 1 of them past it"
        " already (the notifier tells them)",
    ]
    assert Wait.objects.get(id=waiting.id).deadline == waiting.entered_at + timedelta(hours=4)

    run(team.id, "--decide-within", "1h30m", "--handler", "mail.send")
    assert stored(team) == (
        [("", timedelta(hours=4)), ("mail.send", timedelta(minutes=90))],
        [timedelta(hours=2)],
    )
    assert "  handler 'mail.send': decide within 1h30m" in run(team.name).splitlines()
    assert f"'{team.name}' ({team.id}):" in run()  # every namespace's

    run(team.name, "--clear", "--handler", "mail.send")
    run(team.name, "--clear", "--no-stall-alarm")
    assert stored(team) == ([], [])
    assert Wait.objects.get(id=waiting.id).deadline is None
    assert run(team.name) == f"'{team.name}' ({team.id}): no objective, no stall alarm\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--decide-within", "4"], "--decide-within: '4' is not a duration"),
        (["--decide-within", "0m"], "shorter than a minute"),
        (["--decide-within=-4h"], "'-4h' is not a duration"),
        (["--decide-within", "-4h"], "expected one argument"),  # argparse's own words
        (["--decide-within", "400d"], "longer than a year"),
        (["--decide-within", "4h", "--stall-after", "soon"], "--stall-after: 'soon'"),
        (["--decide-within", "4h", "--clear"], "pass one"),
        (["--stall-after", "2h", "--no-stall-alarm"], "--no-stall-alarm removes it"),
        (["--handler", "mail.send"], "--handler names whose objective"),
        (["--decide-within", "4h", "--handler", " "], "--handler is empty"),
        (["--decide-within", "4h", "--handler", "h" * 201], "at most 200"),
        (["--clear"], "the namespace has no objective"),
        (["--clear", "--handler", "nobody"], "handler 'nobody' has no objective"),
        (["--decide-within", "4h", "--no-stall-alarm"], "has no stall alarm"),
    ],
)
def test_what_the_command_cannot_take_stops_it_and_changes_nothing(
    team: Namespace, args: list[str], said: str
) -> None:
    run(team.id, "--decide-within", "2d", "--handler", "kept")
    before = stored(team)
    with pytest.raises(CommandError, match=said) as refused:
        run(team.id, *args)
    assert refused.value.returncode == 1
    assert stored(team) == before


def test_changing_an_objective_needs_a_namespace(team: Namespace) -> None:
    with pytest.raises(CommandError, match="name the namespace"):
        run("--decide-within", "4h")
