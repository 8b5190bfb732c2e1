"""The rollups, kept as the facts move (docs/insight.md).

Every rollup row is a sum over the facts: ``of_decision``, ``of_wait`` and ``of_batch`` say what
one fact, as it stands, adds to which rows. When a fact moves, the rows change by what it adds
now minus what it added before (``moved``), in the transaction that moves it — so a rollback
takes both back, and a move that changes nothing (an event delivered again, a second answer to
a decision) changes no row. ``recompute`` sums every fact afresh: the rollups must equal it
(``manage.py insight check``; tests/insight/test_tallies.py).

Rows are written in one order (their table, then their key), a statement per table that adds
to each row or inserts it (``_upsert``). Two transactions thus never wait for each other's rows
in opposite orders within the rollups, and no count is lost to a race of two inserts.

What a fact adds also names each clock it ended, exactly (``ENDED``: no rollup row): a move that
ends a clock observes it in Prometheus' histogram once committed (``metrics.py``), so the
histogram and the rollups count the same clocks, each once.
"""

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import cache, partial
from typing import Any

from django.db import models, transaction

from orbit_console.insight import metrics, sketch
from orbit_console.insight.models import (
    APPLIED,
    DAY,
    HOUR,
    SETTLED,
    BatchApproval,
    BatchFact,
    ClockTally,
    DecisionFact,
    DecisionTally,
    Outcome,
    PrecedentTally,
    Wait,
    WaitTally,
)

# What a fact adds to one row: (table, the row's key in the table's key order) → count.
Key = tuple[str, tuple[Any, ...]]
Tallies = Counter[Key]


def _keyed(model: type[models.Model]) -> tuple[type[models.Model], tuple[str, ...]]:
    """A rollup model and its key: the fields of its one unique constraint, in order."""
    (unique,) = model._meta.constraints
    assert isinstance(unique, models.UniqueConstraint)  # noqa: S101 -- the rollups' one shape
    return model, tuple(unique.fields)


TABLES: dict[str, tuple[type[models.Model], tuple[str, ...]]] = {
    "clock": _keyed(ClockTally),
    "decision": _keyed(DecisionTally),
    "precedent": _keyed(PrecedentTally),
    "wait": _keyed(WaitTally),
}

# Not a table: a clock that ended, keyed (namespace, clock, start, end), for the histogram.
ENDED = "ended"

# The clocks (docs/insight.md): waiting (entered review → first decision started), deciding
# (started → confirmed), approving (proposed → approved or rejected), and a batch's sending
# (started → finished).
WAITING = "waiting"
DECIDING = "deciding"
APPROVING = "approving"
BATCH = "batch"
CLOCKS = (WAITING, DECIDING, APPROVING, BATCH)


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def day_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _grains(moment: datetime) -> tuple[tuple[str, datetime], ...]:
    return ((HOUR, hour_of(moment)), (DAY, day_of(moment)))


def _ms(start: datetime, end: datetime) -> float:
    return (end - start) / timedelta(milliseconds=1)


class _Adder:
    """Collects what one fact adds."""

    def __init__(self, namespace_id: str, queue_id: str) -> None:
        self.namespace_id = namespace_id
        self.queue_id = queue_id
        self.found: Tallies = Counter()

    def count(self, moment: datetime, action: str, outcome: str) -> None:
        for grain, start in _grains(moment):
            key = (self.namespace_id, grain, start, self.queue_id, action, outcome)
            self.found["decision", key] += 1

    def clock(self, end: datetime, clock: str, start: datetime) -> None:
        bucket = sketch.bucket_of(_ms(start, end))
        for grain, period in _grains(end):
            key = (self.namespace_id, grain, period, clock, self.queue_id, bucket)
            self.found["clock", key] += 1
        self.found[ENDED, (self.namespace_id, clock, start, end)] += 1


def of_decision(fact: DecisionFact | None) -> Tallies:
    """What one decision adds: its steps and outcome counted when they happened (UTC hour and
    day), its precedent by handler and error code, its deciding and approving clocks (a
    batch's task's are the batch's: ``of_batch``), and a retry's new task's end."""
    if fact is None:
        return Counter()
    add = _Adder(fact.namespace_id, fact.queue_id)

    def precedent(moment: datetime, outcome: str) -> None:
        key = (
            fact.namespace_id,
            fact.handler,
            fact.error_code,
            day_of(moment),
            fact.queue_id,
            fact.action,
            outcome,
        )
        add.found["precedent", key] += 1

    if fact.proposed_at is not None:
        add.count(fact.proposed_at, fact.action, "proposed")
    if fact.approved_at is not None:
        add.count(fact.approved_at, fact.action, "approved")
    if fact.settled_at is not None and fact.outcome in SETTLED:
        add.count(fact.settled_at, fact.action, fact.outcome)
        precedent(fact.settled_at, fact.outcome)
        if fact.batch_id and fact.outcome in APPLIED:
            add.count(fact.settled_at, "batch", "task_recovered")
    if fact.successor_ended_at is not None and fact.successor_state:
        outcome = f"retry_{fact.successor_state.lower()}"
        add.count(fact.successor_ended_at, fact.action, outcome)
        precedent(fact.successor_ended_at, outcome)
    if not fact.batch_id:
        confirmed = fact.confirmed_at
        if fact.started_at is not None and confirmed is not None:
            add.clock(confirmed, DECIDING, fact.started_at)
        approving_end = fact.approved_at or (
            fact.settled_at if fact.outcome == Outcome.REJECTED else None
        )
        if fact.proposed_at is not None and approving_end is not None:
            add.clock(approving_end, APPROVING, fact.proposed_at)
    return add.found


def of_wait(wait: Wait | None) -> Tallies:
    """What one waiting period adds: entered (by handler, queue, error code), its first
    decision and the waiting clock, how it ended, and whether it was decided before its
    deadline."""
    if wait is None:
        return Counter()
    add = _Adder(wait.namespace_id, wait.queue_id)

    def event(moment: datetime, name: str) -> None:
        for grain, start in _grains(moment):
            key = (
                wait.namespace_id,
                grain,
                start,
                wait.handler,
                wait.queue_id,
                wait.error_code,
                wait.kind,
                name,
            )
            add.found["wait", key] += 1

    event(wait.entered_at, "entered")
    if wait.first_started_at is not None:
        event(wait.first_started_at, "decided")
        add.clock(wait.first_started_at, WAITING, wait.entered_at)
        if wait.deadline is not None:
            in_time = wait.first_started_at <= wait.deadline
            event(wait.first_started_at, "decided_in_time" if in_time else "decided_late")
    if wait.ended_at is not None and wait.end:
        event(wait.ended_at, f"ended_{wait.end}")
    return add.found


def of_batch(batch: BatchFact | None) -> Tallies:
    """What one batch adds, under the action ``batch``: selected, proposed, its approval,
    finished or cancelled; its deciding and approving clocks (a batch is one decision there)
    and how long it took to send (started → finished). Its tasks recovered are counted by
    their own decisions (``task_recovered``)."""
    if batch is None:
        return Counter()
    add = _Adder(batch.namespace_id, "")
    add.count(batch.selected_at, "batch", "selected")
    if batch.proposed_at is not None:
        add.count(batch.proposed_at, "batch", "proposed")
    if batch.decided_at is not None and batch.approval:
        add.count(batch.decided_at, "batch", batch.approval)
        if batch.proposed_at is not None and batch.approval in (
            BatchApproval.APPROVED,
            BatchApproval.REJECTED,
        ):
            add.clock(batch.decided_at, APPROVING, batch.proposed_at)
    if batch.confirmed_at is not None:
        add.clock(batch.confirmed_at, DECIDING, batch.selected_at)
    if batch.finished_at is not None and batch.end:
        add.count(batch.finished_at, "batch", batch.end)
        if batch.started_at is not None:
            add.clock(batch.finished_at, BATCH, batch.started_at)
    return add.found


def moved(before: Tallies, after: Tallies) -> None:
    """Apply what a fact's move changes (``after`` minus ``before``) to the rollups, in the
    caller's transaction."""
    change = Counter(after)
    change.subtract(before)
    apply(change)


def apply(change: Tallies) -> None:
    """Add ``change`` to the rollup rows: one statement per table, its rows in key order; and
    observe the clocks it ends once committed."""
    _observe_on_commit(change)
    per_table: dict[str, list[tuple[tuple[Any, ...], int]]] = {}
    placed = ((place, delta) for place, delta in change.items() if place[0] in TABLES)
    for (table, key), delta in sorted(placed, key=lambda item: (item[0][0], item[0][1])):
        if delta:
            per_table.setdefault(table, []).append((key, delta))
    connection = transaction.get_connection()
    for table, rows in per_table.items():
        model, names = TABLES[table]
        fields = [model._meta.get_field(name) for name in names]
        values: list[Any] = []
        for key, delta in rows:
            values += [
                field.get_db_prep_save(value, connection)  # type: ignore[union-attr]
                for field, value in zip(fields, key, strict=True)
            ]
            values.append(delta)
        with connection.cursor() as cursor:
            cursor.execute(_upsert(model, names, connection.vendor, len(rows)), values)


def _observe_on_commit(change: Tallies) -> None:
    """The clocks a move ends, for the histogram: a clock the move only shifts (a decision
    learnt later to have started earlier) was observed when it first ended, and is not again
    (a histogram cannot take an observation back)."""
    ended = [(key, delta) for (table, key), delta in change.items() if table == ENDED and delta]
    shifted = {(key[0], key[1]) for key, delta in ended if delta < 0}
    observed = [
        (namespace_id, clock, (end - start).total_seconds())
        for (namespace_id, clock, start, end), delta in ended
        if delta > 0 and (namespace_id, clock) not in shifted
    ]
    if observed:
        transaction.on_commit(partial(_observe, observed))


def _observe(observed: list[tuple[str, str, float]]) -> None:
    for namespace_id, clock, seconds in observed:
        metrics.clock_ended(namespace_id, clock, seconds)


@cache
def _upsert(model: type[models.Model], names: tuple[str, ...], vendor: str, rows: int) -> str:
    """One statement that adds to ``rows`` rows or inserts them: on MySQL/MariaDB an ``INSERT
    ... ON DUPLICATE KEY UPDATE``, which takes each duplicate row's exclusive lock at once (a
    plain INSERT that finds a duplicate takes a shared one first, and two transactions that
    both wait for a third's new row then deadlock upgrading theirs); on SQLite, ``ON
    CONFLICT``."""
    quote = transaction.get_connection().ops.quote_name
    columns = [quote(model._meta.get_field(name).column) for name in names]  # type: ignore[union-attr]
    table, n = quote(model._meta.db_table), quote("n")
    row = f"({', '.join(['%s'] * (len(columns) + 1))})"
    head = (
        f"INSERT INTO {table} ({', '.join(columns)}, {n}) "  # noqa: S608 -- a model's own names
        f"VALUES {', '.join([row] * rows)}"
    )
    if vendor == "mysql":
        return f"{head} ON DUPLICATE KEY UPDATE {n} = {n} + VALUES({n})"
    return f"{head} ON CONFLICT ({', '.join(columns)}) DO UPDATE SET {n} = {n} + excluded.{n}"


def recompute(namespace_ids: Iterable[str] | None = None) -> Tallies:
    """Every rollup row as the facts make it now (of the namespaces given, else of all)."""
    total: Tallies = Counter()
    scope = {} if namespace_ids is None else {"namespace_id__in": list(namespace_ids)}
    for fact in DecisionFact.objects.filter(**scope).iterator(chunk_size=2000):
        total.update(of_decision(fact))
    for wait in Wait.objects.filter(**scope).iterator(chunk_size=2000):
        total.update(of_wait(wait))
    for batch in BatchFact.objects.filter(**scope).iterator(chunk_size=2000):
        total.update(of_batch(batch))
    return Counter({place: n for place, n in total.items() if n > 0 and place[0] in TABLES})


def stored(namespace_ids: Iterable[str] | None = None) -> Tallies:
    """The rollup rows as they are stored (rows that count nothing left out)."""
    total: Tallies = Counter()
    scope = {} if namespace_ids is None else {"namespace_id__in": list(namespace_ids)}
    for table, (model, names) in TABLES.items():
        for row in model._default_manager.filter(**scope).exclude(n=0).values_list(*names, "n"):
            total[table, tuple(row[:-1])] += row[-1]
    return total


def rebuild(namespace_ids: Iterable[str] | None = None) -> int:
    """Write the rollups afresh from the facts (``manage.py insight rebuild``): the rows of the
    namespaces given (else all) are replaced, in one transaction. The rows written."""
    scope_ids = None if namespace_ids is None else list(namespace_ids)
    scope = {} if scope_ids is None else {"namespace_id__in": scope_ids}
    with transaction.atomic():
        for model, _ in TABLES.values():
            model._default_manager.filter(**scope).delete()
        fresh = recompute(scope_ids)
        for table, (model, names) in TABLES.items():
            model._default_manager.bulk_create(
                [
                    model(**dict(zip(names, key, strict=True)), n=n)
                    for (name, key), n in fresh.items()
                    if name == table
                ],
                batch_size=1000,
            )
    return len(fresh)
