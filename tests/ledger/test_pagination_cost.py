"""Keyset pages cost the same at any depth (AU3; hard-parts "Keyset pagination on MariaDB").

Not a timing test: on MariaDB it counts the rows the storage engine reads for a page
(``Handler_read%`` after ``FLUSH STATUS``); on SQLite it reads the query plan. The pages are
the selectors' own queries, over thousands of rows of one task or namespace among others.
"""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from orbit_console.ledger import chain, selectors
from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.models import (
    Attempt,
    AttemptOutcome,
    Credential,
    OperationAudit,
    Task,
    TaskState,
)
from orbit_console.ledger.seed import seed_world
from orbit_console.lib import auditkeys
from orbit_console.lib.ids import new_id

ROWS = 5000
OTHER_ROWS = 1500
LIMIT = 20
BASE = datetime(2024, 1, 1, tzinfo=UTC)


# --- Data -------------------------------------------------------------------------------------


def insert_audits(task: Task, count: int) -> list[OperationAudit]:
    """``count`` records appended to the task's chain, one second apart with some ties."""
    last = OperationAudit.objects.filter(task_id=task.id).order_by("-seq").first()
    seq, prev_hash = (last.seq, last.entry_hash) if last else (0, "")
    records = []
    for index in range(count):
        seq += 1
        record = OperationAudit(
            id=new_id(),
            namespace_id=task.namespace_id,
            task_id=task.id,
            seq=seq,
            operation_id=new_id(),
            actor_id=new_id(),
            action="test.bulk",
            reason="bulk history",
            evidence_ref=None,
            before='{"state":"FAILED","revision":"3"}',
            after='{"state":"FAILED","revision":"3"}',
            created_at=BASE + timedelta(seconds=index // 3),  # three records per instant
            prev_hash=prev_hash,
            key_id=auditkeys.current_key_id(),
        )
        record.entry_hash = chain.entry_hash(record)
        prev_hash = record.entry_hash
        records.append(record)
    OperationAudit.objects.bulk_create(records, batch_size=500)
    return records


def insert_tasks(template: Task, namespace_id: str, count: int) -> None:
    """``count`` copies of a task in a namespace, in a mix of states, one second apart."""
    states = [TaskState.FAILED, TaskState.SUCCEEDED, TaskState.CANCELLED, TaskState.WAITING]
    rows = []
    for index in range(count):
        created = BASE + timedelta(seconds=index // 2)
        fields = {f.attname: getattr(template, f.attname) for f in Task._meta.concrete_fields}
        fields.update(
            id=new_id(),
            namespace_id=namespace_id,
            state=states[index % len(states)],
            business_key=f"bulk:{index}",
            created_at=created,
            updated_at=created,
            retry_of=None,
        )
        rows.append(Task(**fields))
    Task.objects.bulk_create(rows, batch_size=500)


@pytest.fixture(scope="module")
def deep_world(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A seeded world whose failed task has ROWS audit records and whose namespace has ROWS
    more tasks, among other tasks and namespaces with rows of their own. The tests only read
    it, so the module builds it once."""
    with django_db_blocker.unblock():
        world = seed_world(label="deep")
        task = Task.objects.get(id=world["tasks"]["failed"])
        insert_audits(task, ROWS)
        for name in ("cancelled", "succeeded"):
            insert_audits(Task.objects.get(id=world["tasks"][name]), OTHER_ROWS)
        insert_tasks(task, world["namespace_id"], ROWS)
        elsewhere = seed_world(label="elsewhere")
        insert_tasks(task, elsewhere["namespace_id"], OTHER_ROWS)
        if connection.vendor == "mysql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE TABLE ledger_operationaudit, ledger_task")
                cursor.fetchall()
        yield world


def admin_credential(world: dict[str, Any]) -> Credential:
    token = world["tokens"]["admin"]
    return Credential.objects.prefetch_related("queues").get(token_hash=hash_token(token))


def operations_cursor_at(task: Task, depth: int) -> str:
    """The cursor a client holds after reading ``depth`` records of the task's audit."""
    rows = OperationAudit.objects.filter(task_id=task.id).order_by("-created_at", "-id")
    last = rows[depth - 1]
    binding = selectors.CursorBinding("operations", task.namespace_id, task.id)
    return selectors.encode_cursor(binding, [last.created_at.isoformat(), last.id])


def tasks_cursor_at(credential: Credential, filters: selectors.TaskFilters, depth: int) -> str:
    tasks = Task.objects.filter(namespace_id=credential.namespace_id)
    if filters.states:
        tasks = tasks.filter(state__in=filters.states)
    last = tasks.order_by("-created_at", "-id")[depth - 1]
    binding = selectors.CursorBinding("tasks", credential.namespace_id, filters.binding_subject())
    return selectors.encode_cursor(binding, [last.created_at.isoformat(), last.id])


# --- Measures ---------------------------------------------------------------------------------


def rows_read(page: Callable[[], Any]) -> int:
    """MariaDB/MySQL: the rows the storage engine read to answer ``page``."""
    with connection.cursor() as cursor:
        cursor.execute("FLUSH STATUS")
    page()
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        return sum(int(value) for _, value in cursor.fetchall())


def query_plans(page: Callable[[], Any]) -> list[list[str]]:
    """SQLite: the plan of each query ``page`` runs (its keys, then its rows by key)."""
    with CaptureQueriesContext(connection) as captured:
        page()
    selects = [
        q["sql"]
        for q in captured.captured_queries
        # The credential's queue scope is read on every call (C3): one lookup by its key, the
        # same at any depth, and not the page's cost.
        if q["sql"].startswith("SELECT") and "ledger_credential_queues" not in q["sql"]
    ]
    assert 1 <= len(selects) <= 2, selects
    plans = []
    with connection.cursor() as cursor:
        for sql in selects:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plans.append([row[-1] for row in cursor.fetchall()])
    return plans


def assert_plan_uses(plans: list[list[str]], index: str) -> None:
    keys, *rows = plans
    # The keys come from the index alone: SEARCH ... USING COVERING INDEX <index> (...).
    assert any(
        step.startswith("SEARCH") and f"USING COVERING INDEX {index} (" in step for step in keys
    ), keys
    for plan in plans:
        assert not any(step.startswith("SCAN") for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan  # no sort of the rest
    for plan in rows:  # the rows of the page, by primary key
        assert all(step.startswith("SEARCH") for step in plan), plan


def assert_same_cost(first: Callable[[], Any], deep: list[Callable[[], Any]], index: str) -> None:
    if connection.vendor == "sqlite":
        assert_plan_uses(query_plans(first), index)
        for page in deep:
            assert_plan_uses(query_plans(page), index)
        return
    first_cost = rows_read(first)
    assert first_cost <= 4 * LIMIT, first_cost  # the page's keys, then its rows
    for page in deep:
        cost = rows_read(page)
        assert cost <= 2 * first_cost + 10, (cost, first_cost)


# --- Tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [LIMIT, ROWS // 2, ROWS - 3 * LIMIT])
def test_deep_operations_page_costs_what_the_first_costs_AU3(
    deep_world: dict[str, Any], live_db: None, depth: int
) -> None:
    task = Task.objects.get(id=deep_world["tasks"]["failed"])
    cursor = operations_cursor_at(task, depth)

    def first() -> Any:
        return selectors.operations_page(task, limit=LIMIT, cursor=None)

    def deep() -> Any:
        return selectors.operations_page(task, limit=LIMIT, cursor=cursor)

    records, _ = deep()
    assert len(records) == LIMIT
    expected = OperationAudit.objects.filter(task_id=task.id).order_by("-created_at", "-id")
    assert [r.id for r in records] == [r.id for r in expected[depth : depth + LIMIT]]
    assert_same_cost(first, [deep], "audit_task_created")


@pytest.mark.parametrize("depth", [LIMIT, ROWS // 2, ROWS - 3 * LIMIT])
def test_deep_task_list_page_costs_what_the_first_costs(
    deep_world: dict[str, Any], live_db: None, depth: int
) -> None:
    credential = admin_credential(deep_world)
    everything = selectors.TaskFilters()
    cursor = tasks_cursor_at(credential, everything, depth)

    def first() -> Any:
        return selectors.tasks_page(credential, everything, limit=LIMIT, cursor=None)

    def deep() -> Any:
        return selectors.tasks_page(credential, everything, limit=LIMIT, cursor=cursor)

    tasks = deep().tasks
    expected = Task.objects.filter(namespace_id=credential.namespace_id).order_by(
        "-created_at", "-id"
    )
    assert [t.id for t in tasks] == [t.id for t in expected[depth : depth + LIMIT]]
    assert_same_cost(first, [deep], "task_ns_created")


@pytest.mark.parametrize("depth", [LIMIT, ROWS // 8])
def test_deep_task_list_page_of_one_state_costs_what_the_first_costs(
    deep_world: dict[str, Any], live_db: None, depth: int
) -> None:
    credential = admin_credential(deep_world)
    failed = selectors.TaskFilters(states=(TaskState.FAILED,))
    cursor = tasks_cursor_at(credential, failed, depth)

    def first() -> Any:
        return selectors.tasks_page(credential, failed, limit=LIMIT, cursor=None)

    def deep() -> Any:
        return selectors.tasks_page(credential, failed, limit=LIMIT, cursor=cursor)

    tasks = deep().tasks
    assert len(tasks) == LIMIT
    assert {t.state for t in tasks} == {TaskState.FAILED}
    assert_same_cost(first, [deep], "task_ns_state_created")


@pytest.fixture(scope="module")
def deep_world_with_attempts(deep_world: dict[str, Any], django_db_blocker: Any) -> dict[str, Any]:
    """``deep_world`` with an attempt on every bulk task, in its namespace and the others: far
    more attempts than a page has tasks."""
    with django_db_blocker.unblock():
        started = BASE - timedelta(days=1)
        Attempt.objects.bulk_create(
            [
                Attempt(
                    id=new_id(),
                    task_id=task_id,
                    number=1,
                    worker_id="worker-1",
                    started_at=started,
                    ended_at=started,
                    outcome=AttemptOutcome.FAILED,
                    error="Broker connection lost",
                )
                # Other tests' "bulk:" tasks may have run already: those keep their attempts.
                for task_id in Task.objects.filter(business_key__startswith="bulk:")
                .exclude(id__in=Attempt.objects.values("task_id"))
                .values_list("id", flat=True)
            ],
            batch_size=500,
        )
        if connection.vendor == "mysql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE TABLE ledger_attempt")
                cursor.fetchall()
    return deep_world


@pytest.mark.parametrize("depth", [LIMIT, ROWS // 2])
def test_deep_task_list_page_of_an_attempt_error_costs_what_the_first_costs(
    deep_world_with_attempts: dict[str, Any], live_db: None, depth: int
) -> None:
    """The error filter asks each candidate task's attempts by the (task_id, number) index; it
    never reads the attempts table whole (MariaDB's semi-join of an EXISTS would, per page)."""
    credential = admin_credential(deep_world_with_attempts)
    broker = selectors.TaskFilters(error="BROKER connection")
    cursor = tasks_cursor_at(credential, broker, depth)

    def first() -> Any:
        return selectors.tasks_page(credential, broker, limit=LIMIT, cursor=None)

    def deep() -> Any:
        return selectors.tasks_page(credential, broker, limit=LIMIT, cursor=cursor)

    tasks = deep().tasks
    assert len(tasks) == LIMIT
    if connection.vendor == "sqlite":
        for page in (first, deep):
            keys, *rows = query_plans(page)
            assert any("USING COVERING INDEX task_ns_created (" in step for step in keys), keys
            assert any("USING INDEX sqlite_autoindex_ledger_attempt" in s for s in keys), keys
            for plan in (keys, *rows):
                assert not any(step.startswith("SCAN") for step in plan), plan
                assert not any("TEMP B-TREE" in step for step in plan), plan
        return
    attempts = Attempt.objects.count()
    first_cost = rows_read(first)
    assert first_cost <= 8 * LIMIT, (first_cost, attempts)
    assert rows_read(deep) <= 2 * first_cost + 10


@pytest.mark.parametrize(
    ("order", "index"),
    [("updated_desc", "task_ns_updated"), ("updated_asc", "task_ns_updated")],
)
@pytest.mark.parametrize("depth", [LIMIT, ROWS // 2])
def test_deep_task_list_page_by_last_update_costs_what_the_first_costs(
    deep_world: dict[str, Any], live_db: None, depth: int, order: str, index: str
) -> None:
    """Issue 30: the work queue sorts by last update, newest or oldest first; keyset still."""
    credential = admin_credential(deep_world)
    filters = selectors.TaskFilters(order=order)
    descending = order.endswith("_desc")
    expected = Task.objects.filter(namespace_id=credential.namespace_id).order_by(
        *(("-updated_at", "-id") if descending else ("updated_at", "id"))
    )
    last = expected[depth - 1]
    binding = selectors.CursorBinding("tasks", credential.namespace_id, filters.binding_subject())
    cursor = selectors.encode_cursor(binding, ["next", last.updated_at.isoformat(), last.id])

    def first() -> Any:
        return selectors.tasks_page(credential, filters, limit=LIMIT, cursor=None)

    def deep() -> Any:
        return selectors.tasks_page(credential, filters, limit=LIMIT, cursor=cursor)

    tasks = deep().tasks
    assert [t.id for t in tasks] == [t.id for t in expected[depth : depth + LIMIT]]
    assert_same_cost(first, [deep], index)


@pytest.mark.parametrize("depth", [3 * LIMIT, ROWS // 2])
def test_a_page_back_is_the_page_before_and_costs_what_the_first_costs(
    deep_world: dict[str, Any], live_db: None, depth: int
) -> None:
    """Issue 30: "Newer" beside "Older": prev_cursor reads back, keyset, to the page before."""
    credential = admin_credential(deep_world)
    everything = selectors.TaskFilters()
    expected = Task.objects.filter(namespace_id=credential.namespace_id).order_by(
        "-created_at", "-id"
    )
    page = selectors.tasks_page(
        credential, everything, limit=LIMIT, cursor=tasks_cursor_at(credential, everything, depth)
    )
    assert [t.id for t in page.tasks] == [t.id for t in expected[depth : depth + LIMIT]]
    assert page.prev_cursor is not None
    back = page.prev_cursor

    def first() -> Any:
        return selectors.tasks_page(credential, everything, limit=LIMIT, cursor=None)

    def before() -> Any:
        return selectors.tasks_page(credential, everything, limit=LIMIT, cursor=back)

    previous = before()
    assert [t.id for t in previous.tasks] == [t.id for t in expected[depth - LIMIT : depth]]
    assert previous.prev_cursor is not None and previous.next_cursor is not None
    again = selectors.tasks_page(credential, everything, limit=LIMIT, cursor=previous.next_cursor)
    assert [t.id for t in again.tasks] == [t.id for t in page.tasks]
    assert_same_cost(first, [before], "task_ns_created")


def test_reading_back_to_the_start_gives_the_whole_first_page(
    deep_world: dict[str, Any], live_db: None
) -> None:
    credential = admin_credential(deep_world)
    everything = selectors.TaskFilters()
    first = selectors.tasks_page(credential, everything, limit=LIMIT, cursor=None)
    assert first.prev_cursor is None
    # Five tasks in: the page before holds only five; the list gives its whole first page.
    page = selectors.tasks_page(
        credential, everything, limit=LIMIT, cursor=tasks_cursor_at(credential, everything, 5)
    )
    assert page.prev_cursor is not None
    back = selectors.tasks_page(credential, everything, limit=LIMIT, cursor=page.prev_cursor)
    assert [t.id for t in back.tasks] == [t.id for t in first.tasks]
    assert back.prev_cursor is None
    assert back.next_cursor == first.next_cursor


def test_the_total_is_counted_to_a_cap(
    deep_world: dict[str, Any], live_db: None, settings: Any
) -> None:
    """Issue 30: a total count of bounded cost: past the cap it is "at least"."""
    credential = admin_credential(deep_world)
    failed = selectors.TaskFilters(states=(TaskState.FAILED,))
    exact = Task.objects.filter(namespace_id=credential.namespace_id, state=TaskState.FAILED)
    page = selectors.tasks_page(credential, failed, limit=LIMIT, cursor=None, count=True)
    assert (page.total, page.total_exact) == (exact.count(), True)
    settings.ORBIT_TASK_COUNT_CAP = 100
    with CaptureQueriesContext(connection) as captured:
        page = selectors.tasks_page(credential, failed, limit=LIMIT, cursor=None, count=True)
    assert (page.total, page.total_exact) == (100, False)
    counts = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"]]
    assert len(counts) == 1 and "LIMIT 101" in counts[0], counts
