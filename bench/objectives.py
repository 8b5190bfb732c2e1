"""What waiting-time objectives, the stall alarm and their series cost (issue 43, items 2 and 5),
in CPU of the process that pays it.

    uv run python bench/objectives.py [--waiting 10000] [--database-url URL] [--label NAME]

What it does, in this process on a fresh database (SQLite under ``var/bench/``, or the
MySQL/MariaDB database ``--database-url`` names, whose name must contain "bench"), migrated:

1. Parking: ``--waiting`` tasks of one namespace start waiting (``waiting.wait_open``, as the
   feed opens them), half with no deadline rule registered (as before objectives) and half
   after the namespace and one handler have an objective: the CPU a period's opening pays for
   its deadline (one read of the objectives).
2. Changing the objective over every task waiting (``objective_set``): seconds, once.
3. The notifier's scans (``scans.objective_breaches`` and ``stalled_decisions``) with four
   namespaces' stall alarms: the CPU per breach told (the tasks past a 20 h objective ten hours
   and 40 minutes on, at most 500 in the pass, to two supervisors without an e-mail address),
   then a pass with nothing to tell.
4. The work queue's marks of a page of 25 tasks (``objectives.queue_marks``), and a scrape of
   insight's gauges (``gauges.InsightCollector``) with every task waiting.

CPU is ``time.process_time`` of this process (on MariaDB the server's own is not counted).
Results on stdout and in ``var/bench/objectives[-<label>].json``; written up in
docs/performance.md ("Objectives"). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta
from typing import Any

from support import BENCH_DIR, fresh_database, loadavg, machine, manage, setup_django


def cpu_ms(action: Any, repeat: int = 1) -> float:
    """The CPU milliseconds one call of ``action`` takes, averaged over ``repeat`` calls."""
    started = time.process_time()
    for _ in range(repeat):
        action()
    return (time.process_time() - started) * 1000 / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--label", default="")
    options = parser.parse_args()

    database_url = fresh_database(options.database_url, "objectives.sqlite3")
    manage(database_url, "migrate", "--noinput")
    setup_django(database_url)

    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from orbit_console.insight import waiting
    from orbit_console.insight.gauges import InsightCollector
    from orbit_console.insight.models import Wait, WaitKind, WaitOrigin
    from orbit_console.insight.objectives import objective_set, queue_marks, stall_alarm_set
    from orbit_console.insight.waiting import Waiting, wait_open
    from orbit_console.lib.ids import new_id
    from orbit_console.lib.secretbox import seal
    from orbit_console.notifications import scans
    from orbit_console.people.models import OrbitCredential

    load_before = loadavg()
    namespace = new_id()
    now = timezone.now()
    for name in ("supervisor-a", "supervisor-b"):
        user = User.objects.create_user(username=name)
        user.groups.add(Group.objects.get_or_create(name="supervisor")[0])
        OrbitCredential.objects.create(
            user=user, token_ciphertext=seal("-"), namespace_id=namespace
        )

    def park(index: int) -> None:
        wait_open(
            Waiting(
                namespace_id=namespace,
                task_id=new_id(),
                revision=3,
                kind=WaitKind.REVIEW,
                entered_at=now - timedelta(minutes=index % 600),
                origin=WaitOrigin.STREAM,
                queue_id="q1",
                handler=f"handler.{index % 7}",
            )
        )

    half = options.waiting // 2
    counter = iter(range(options.waiting))
    rules = list(waiting._deadline_rules)
    waiting._deadline_rules.clear()  # as before objectives: no deadline rule
    without = cpu_ms(lambda: park(next(counter)), half)
    waiting._deadline_rules.extend(rules)
    objective_set(namespace_id=namespace, decide_within=timedelta(days=30))
    objective_set(namespace_id=namespace, handler="handler.3", decide_within=timedelta(days=30))
    with_objectives = cpu_ms(lambda: park(next(counter)), options.waiting - half)

    started = time.perf_counter()
    change_cpu = cpu_ms(
        lambda: objective_set(namespace_id=namespace, decide_within=timedelta(hours=20))
    )
    change_wall = time.perf_counter() - started
    for _ in range(3):
        stall_alarm_set(namespace_id=new_id(), after=timedelta(hours=2))
    stall_alarm_set(namespace_id=namespace, after=timedelta(hours=2))

    # Ten hours and 40 minutes on, those that entered over 9 h 20 min before are past 20 h.
    later = now + timedelta(hours=10, minutes=40)
    past = Wait.objects.filter(
        namespace_id=namespace, deadline__lte=later, breached_at__isnull=True
    ).count()
    told = 0

    def tell() -> None:
        nonlocal told
        told += scans.objective_breaches(later)

    tell_cpu = cpu_ms(tell)
    passes = 1
    while scans.objective_breaches(later):  # the rest, before a pass with nothing to tell
        passes += 1
    idle = cpu_ms(lambda: (scans.objective_breaches(later), scans.stalled_decisions(later)), 50)
    page = list(Wait.objects.filter(namespace_id=namespace).values_list("task_id", flat=True)[:25])
    marks = cpu_ms(lambda: queue_marks(page, now=later), 50)
    collector = InsightCollector()
    scrape = cpu_ms(lambda: list(collector.collect()), 20)

    results = {
        "machine": machine(),
        "database": "sqlite" if database_url.startswith("sqlite") else "mysql",
        "waiting": options.waiting,
        "park_cpu_ms": {"no_rule": round(without, 3), "objectives": round(with_objectives, 3)},
        "objective_change": {"cpu_s": round(change_cpu / 1000, 2), "wall_s": round(change_wall, 2)},
        "scan_telling": {
            "told": told,
            "past": past,
            "cpu_ms_each": round(tell_cpu / max(told, 1), 2),
            "passes": passes,
        },
        "scan_idle_cpu_ms": round(idle, 2),
        "queue_marks_cpu_ms_a_page": round(marks, 2),
        "gauges_scrape_cpu_ms": round(scrape, 2),
        "load_before": load_before,
        "load_after": loadavg(),
    }
    print(json.dumps(results, indent=2))
    name = f"objectives-{options.label}.json" if options.label else "objectives.json"
    (BENCH_DIR / name).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
