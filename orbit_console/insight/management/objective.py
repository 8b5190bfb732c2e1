"""``manage.py console objective``: waiting-time objectives and the stall alarm (issue 43,
docs/insight.md "Objectives"), offered under the console's command by insight.

console objective                                   every namespace's objectives and alarms
console objective NAMESPACE                         the namespace's
console objective NAMESPACE --decide-within 4h      tasks parked in NEEDS_REVIEW get a decision
                        [--handler HANDLER]         started within 4h (of HANDLER's tasks only)
console objective NAMESPACE --clear [--handler H]   remove the objective
console objective NAMESPACE --stall-after 2h        the stall alarm: tasks wait in review and no
                                                    decision has been made for 2h
console objective NAMESPACE --no-stall-alarm        remove it

NAMESPACE is an id or an exact name (``lib/namespaces.py``); durations are whole minutes, hours
or days (``30m``, ``4h``, ``2d``, ``1h30m``; ``lib/durations.py``). Everything typed is checked
before anything changes: an unknown namespace, a duration that is none, zero, or past a year,
or options that contradict each other stop the command (exit status 1) and change nothing.
Setting or removing an objective gives the tasks waiting now the deadline it makes, and says
how many, and how many of those are past it already (the notifier tells them).
"""

from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from orbit_console.console.management.subcommands import Subcommand
from orbit_console.insight.models import HANDLER_CHARS
from orbit_console.insight.objectives import (
    ObjectiveRefused,
    Rescheduled,
    objective_clear,
    objective_set,
    objectives,
    stall_alarm_clear,
    stall_alarm_set,
    stall_alarms,
)
from orbit_console.lib.durations import DurationError, format_duration, parse_duration
from orbit_console.lib.namespaces import Namespaces
from orbit_console.people.namespaces import known_namespaces


def add_arguments(parser: ArgumentParser) -> None:
    parser.add_argument("namespace", nargs="?", help="an id or an exact name")
    parser.add_argument("--decide-within", metavar="DURATION", help="e.g. 30m, 4h, 2d, 1h30m")
    parser.add_argument("--handler", default=None, help="the objective of this handler's tasks")
    parser.add_argument("--clear", action="store_true", help="remove the objective")
    parser.add_argument("--stall-after", metavar="DURATION", help="set the stall alarm")
    parser.add_argument("--no-stall-alarm", action="store_true", help="remove the stall alarm")


def _duration(text: str | None, option: str) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as error:
        raise CommandError(f"{option}: {error}") from None


def handle(command: BaseCommand, options: dict[str, Any]) -> None:
    within = _duration(options["decide_within"], "--decide-within")
    stall = _duration(options["stall_after"], "--stall-after")
    handler: str | None = options["handler"]
    clear, no_alarm = options["clear"], options["no_stall_alarm"]
    if within is not None and clear:
        raise CommandError("--decide-within sets an objective and --clear removes it: pass one")
    if stall is not None and no_alarm:
        raise CommandError("--stall-after sets the stall alarm and --no-stall-alarm removes it")
    if handler is not None and within is None and not clear:
        raise CommandError("--handler names whose objective --decide-within or --clear is")
    if handler is not None and not handler.strip():
        raise CommandError("--handler is empty: leave it out for the namespace's objective")
    if handler is not None and len(handler) > HANDLER_CHARS:
        raise CommandError(f"--handler is {len(handler)} characters long: at most {HANDLER_CHARS}")
    known = known_namespaces()
    typed = options["namespace"]
    changes = within is not None or clear or stall is not None or no_alarm
    if typed is None:
        if changes:
            raise CommandError("name the namespace (an id or a name) whose objective to change")
        _show(command, known, None)
        return
    namespace_id = known.id_of(typed)  # an unknown or ambiguous one: exit status 1
    said = []
    try:
        with transaction.atomic():
            if within is not None:
                _, moved = objective_set(
                    namespace_id=namespace_id, handler=handler or "", decide_within=within
                )
                said.append(_rescheduled(moved))
            elif clear:
                cleared = objective_clear(namespace_id=namespace_id, handler=handler or "")
                if cleared is None:
                    whose = f"handler {handler!r}" if handler else "the namespace"
                    raise CommandError(f"{known.described(namespace_id)}: {whose} has no objective")
                said.append(_rescheduled(cleared))
            if stall is not None:
                stall_alarm_set(namespace_id=namespace_id, after=stall)
            elif no_alarm and not stall_alarm_clear(namespace_id=namespace_id):
                raise CommandError(f"{known.described(namespace_id)} has no stall alarm")
    except ObjectiveRefused as refused:
        raise CommandError(str(refused)) from None
    _show(command, known, namespace_id)
    for line in said:
        command.stdout.write(line)


def _rescheduled(moved: Rescheduled) -> str:
    past = f"; {moved.past} of them past it already (the notifier tells them)" if moved.past else ""
    return f"{moved.waiting} task(s) waiting in NEEDS_REVIEW now have the deadline it makes{past}"


def _show(command: BaseCommand, known: Namespaces, namespace_id: str | None) -> None:
    wanted = None if namespace_id is None else [namespace_id]
    alarms = {alarm.namespace_id: alarm for alarm in stall_alarms(wanted)}
    lines: dict[str, list[str]] = {}
    for objective in objectives(wanted):
        whose = f"handler {objective.handler!r}" if objective.handler else "every handler"
        lines.setdefault(objective.namespace_id, []).append(
            f"  {whose}: decide within {format_duration(objective.decide_within)}"
        )
    for alarm in alarms.values():
        lines.setdefault(alarm.namespace_id, []).append(
            f"  stall alarm: no decision for {format_duration(alarm.after)} while tasks wait"
        )
    if namespace_id is not None and not lines:
        command.stdout.write(f"{known.described(namespace_id)}: no objective, no stall alarm")
        return
    if not lines:
        command.stdout.write("no objective and no stall alarm is set")
    for each in sorted(lines):
        command.stdout.write(f"{known.described(each)}:")
        for line in lines[each]:
            command.stdout.write(line)


OBJECTIVE = Subcommand(
    name="objective",
    help="waiting-time objectives and the stall alarm of a namespace",
    add_arguments=add_arguments,
    handle=handle,
)
