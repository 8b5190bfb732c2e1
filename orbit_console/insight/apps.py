from django.apps import AppConfig


class InsightConfig(AppConfig):
    name = "orbit_console.insight"
    label = "insight"
    verbose_name = "Orbit Console: insight (what waits for people, how they decide)"

    def ready(self) -> None:
        from orbit_console.decisions.submissions import listen_to_records
        from orbit_console.feed.consumer import EventListener, listen_to_events
        from orbit_console.insight.recording import on_record
        from orbit_console.insight.waiting import backfill, on_event, stream_reads

        # Told of every entry of the console's record inside the writing transaction, and of
        # every event of Orbit's stream inside the feed's: facts and rollups move with what
        # they count (docs/insight.md).
        listen_to_records(on_record)
        listen_to_events(EventListener(reads=stream_reads, apply=on_event, connected=backfill))
