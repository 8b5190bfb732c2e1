from django.apps import AppConfig


class InsightConfig(AppConfig):
    name = "orbit_console.insight"
    label = "insight"
    verbose_name = "Orbit Console: insight (what waits for people, how they decide)"

    def ready(self) -> None:
        from orbit_console.console.management.subcommands import add_subcommand
        from orbit_console.console.waiting import mark_rows_with
        from orbit_console.decisions.submissions import listen_to_records
        from orbit_console.feed.consumer import EventListener, listen_to_events
        from orbit_console.insight.gauges import InsightCollector, Instruments
        from orbit_console.insight.management.objective import OBJECTIVE
        from orbit_console.insight.objectives import deadline_for, queue_marks
        from orbit_console.insight.recording import on_record
        from orbit_console.insight.waiting import (
            backfill,
            decide_deadlines_with,
            on_event,
            stream_reads,
        )
        from orbit_console.lib.scrape import register_once

        # Told of every entry of the console's record inside the writing transaction, and of
        # every event of Orbit's stream inside the feed's: facts and rollups move with what
        # they count (docs/insight.md).
        listen_to_records(on_record)
        listen_to_events(EventListener(reads=stream_reads, apply=on_event, connected=backfill))
        # Waiting-time objectives: a period's deadline when it opens, the work queue's marks,
        # and `manage.py console objective`.
        decide_deadlines_with(deadline_for)
        mark_rows_with(queue_marks)
        add_subcommand(OBJECTIVE)
        # The gauges read at scrape time first: they export the instruments' series of every
        # namespace known (at zero) before the instruments are collected.
        register_once(InsightCollector())
        register_once(Instruments())
