"""Metrics read from the console's database at scrape time (``lib/scrape.py``): submissions by
state and how long the oldest open one of each state has been open, the reconciler's backlog
(submissions due for a resend) and lag (how long the oldest has waited), approvals waiting and
their age, and batches: by state, their items in flight, whether the worker keeps up with them
and whether each makes progress.

Every query is an aggregate over an indexed column, or over the few open rows an index finds:
one scrape costs a handful of index reads whatever the number of settled submissions."""

from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count, Max, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from orbit_console.decisions.models import (
    OPEN_STATES,
    Batch,
    BatchItem,
    BatchState,
    Proposal,
    ProposalState,
    Submission,
    SubmissionState,
)
from orbit_console.lib.scrape import ScrapeCollector

# The batches whose items the worker sends (decisions/batchworker.py): running ones, and
# cancelled ones only to follow what was sent already to its answer.
SENDING = (BatchState.RUNNING, BatchState.CANCELLED)


def _age(now: datetime, since: datetime | None) -> float:
    return (now - since).total_seconds() if since else 0.0


class SubmissionCollector(ScrapeCollector):
    def read(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        yield from self._submissions(now)
        yield from self._approvals(now)
        yield from self._batches(now)

    def _submissions(self, now: datetime) -> Iterator[GaugeMetricFamily]:
        by_state = GaugeMetricFamily(
            "orbit_submissions", "Console submissions by state", labels=["state"]
        )
        counts = dict(Submission.objects.values_list("state").annotate(n=Count("id")))
        for state in SubmissionState.values:
            by_state.add_metric([state], counts.get(state, 0))
        yield by_state

        oldest_open = GaugeMetricFamily(
            "orbit_submissions_oldest_open_seconds",
            "How long the oldest submission in each open state has existed (0: none is)",
            labels=["state"],
        )
        oldest = dict(
            Submission.objects.filter(state__in=OPEN_STATES)
            .values_list("state")
            .annotate(oldest=Min("created_at"))
        )
        for state in OPEN_STATES:
            oldest_open.add_metric([state], _age(now, oldest.get(state)))
        yield oldest_open

        due = Submission.objects.filter(state__in=OPEN_STATES, next_attempt_at__lte=now)
        summary = due.aggregate(n=Count("id"), oldest=Min("next_attempt_at"))
        yield GaugeMetricFamily(
            "orbit_reconciler_backlog",
            "Open submissions whose resend is due",
            value=summary["n"],
        )
        yield GaugeMetricFamily(
            "orbit_reconciler_lag_seconds",
            "How long the oldest due submission has waited for its resend",
            value=_age(now, summary["oldest"]),
        )

    def _approvals(self, now: datetime) -> Iterator[GaugeMetricFamily]:
        waiting = GaugeMetricFamily(
            "orbit_approvals_waiting",
            "Decisions and batches waiting for a supervisor's approval",
            labels=["kind"],
        )
        oldest = GaugeMetricFamily(
            "orbit_approvals_oldest_waiting_seconds",
            "How long the oldest decision or batch waiting for approval has waited (0: none)",
            labels=["kind"],
        )
        proposals = Proposal.objects.filter(
            state=ProposalState.PENDING, expires_at__gt=now
        ).aggregate(n=Count("id"), oldest=Min("created_at"))
        batches = Batch.objects.filter(state=BatchState.PROPOSED).aggregate(
            n=Count("id"), oldest=Min("created_at")
        )
        for kind, found in (("decision", proposals), ("batch", batches)):
            waiting.add_metric([kind], found["n"])
            oldest.add_metric([kind], _age(now, found["oldest"]))
        yield waiting
        yield oldest

    def _batches(self, now: datetime) -> Iterator[GaugeMetricFamily]:
        by_state = GaugeMetricFamily("orbit_batches", "Batches by state", labels=["state"])
        counts = dict(Batch.objects.values_list("state").annotate(n=Count("id")))
        for state in BatchState.values:
            by_state.add_metric([state], counts.get(state, 0))
        yield by_state

        in_flight = BatchItem.objects.filter(
            outcome="",
            ineligible="",
            batch__state__in=(*SENDING, BatchState.PAUSED),
            batch__finished_at__isnull=True,
        ).count()
        yield GaugeMetricFamily(
            "orbit_batch_items_unsettled",
            "Items of started, unfinished batches that have no outcome yet",
            value=in_flight,
        )

        # What the worker should be sending now: due items of sending batches not held back
        # after a 429. Waiting long means no worker sends them.
        held = Q(batch_item__batch__hold_until__gt=now)
        due = (
            Submission.objects.filter(
                state__in=OPEN_STATES,
                next_attempt_at__lte=now,
                reconcile_deadline__gt=now,
                batch_item__batch__state__in=SENDING,
                batch_item__batch__finished_at__isnull=True,
            )
            .exclude(held)
            .exclude(batch_item__batch__state=BatchState.CANCELLED, send_count=0)
            .aggregate(oldest=Min("next_attempt_at"))
        )
        yield GaugeMetricFamily(
            "orbit_batches_oldest_due_seconds",
            "How long the oldest due item of a sending batch has waited to be sent (0: none)",
            value=_age(now, due["oldest"]),
        )

        # A running batch with items left that settled none for a long time is stalled,
        # whether its worker is away, its sends keep failing, or the API holds it back.
        running = (
            Batch.objects.filter(state=BatchState.RUNNING, finished_at__isnull=True)
            .annotate(
                last=Max("items__settled_at"),
                left=Count("items", filter=Q(items__outcome="", items__ineligible="")),
            )
            .filter(left__gt=0)
            .values_list("started_at", "last")
        )
        since = [
            _age(now, max(moment for moment in (started, last) if moment is not None))
            for started, last in running
            if started is not None or last is not None
        ]
        yield GaugeMetricFamily(
            "orbit_batches_since_progress_seconds",
            "The longest a running batch with items left has gone without settling one (0: none)",
            value=max(since, default=0.0),
        )
