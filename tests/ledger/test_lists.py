"""The read endpoints the seeds leave to us (docs/api.md): GET /v1/tasks, GET /v1/tasks/{id}
(O1) and GET /v1/tasks/{id}/attempts — scope, filters, keyset pages, RT9 and RV6."""

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from orbit_console.ledger.journal import write_audit
from orbit_console.ledger.lifecycle import (
    actor_id_for,
    attempt_report_late,
    credential_issue,
    task_accept,
    task_accept_for_plan,
)
from orbit_console.ledger.models import (
    Attempt,
    AttemptOutcome,
    Namespace,
    Permission,
    Queue,
    Task,
)
from orbit_console.ledger.seed import PAYLOAD, seed_world
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc
from tests.support.orbit import bearer, error_code, get_task, retry, review

SUMMARY_FIELDS = {
    "id",
    "namespace_id",
    "queue_id",
    "state",
    "revision",
    "handler",
    "handler_version",
    "attempt_count",
    "effect_uncertain",
    "created_at",
    "updated_at",
}
SUMMARY_OPTIONAL = {"business_key", "completed_at"}


# --- Helpers ----------------------------------------------------------------------------------


def tasks(api: httpx.Client, token: str, params: Any = None) -> httpx.Response:
    return api.get("/v1/tasks", params=params, headers=bearer(token))


def attempts(api: httpx.Client, task_id: str, token: str, params: Any = None) -> httpx.Response:
    return api.get(f"/v1/tasks/{task_id}/attempts", params=params, headers=bearer(token))


def walk(api: httpx.Client, path: str, token: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """All items of a list, following next_cursor; asserts every page but the last is full."""
    items: list[dict[str, Any]] = []
    query = dict(params)
    for _ in range(1000):
        response = api.get(path, params=query, headers=bearer(token))
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        items += data["items"]
        if "next_cursor" not in data:
            return items
        assert len(data["items"]) == int(params["limit"])
        query = {**params, "cursor": data["next_cursor"]}
    raise AssertionError("the pages never ended")


def ids_newest_first(**filters: Any) -> list[str]:
    rows = Task.objects.filter(**filters).values_list("created_at", "id")
    return [task_id for _, task_id in sorted(rows, reverse=True)]


def admin(world: dict[str, Any]) -> str:
    return world["tokens"]["admin"]


def queue_named(world: dict[str, Any], name: str) -> Queue:
    return Queue.objects.get(namespace_id=world["namespace_id"], name=name)


def accept(world: dict[str, Any], queue: str = "objects", **fields: Any) -> Task:
    return task_accept(
        queue=queue_named(world, queue),
        actor_id=actor_id_for(world["namespace_id"], "submitter"),
        handler=fields.pop("handler", "object.prepare"),
        payload=PAYLOAD,
        **fields,
    )


def issue(world: dict[str, Any], permissions: list[str]) -> str:
    _, token = credential_issue(
        namespace=Namespace.objects.get(id=world["namespace_id"]),
        actor_name=f"issued-{new_id()[:8]}",
        permissions=permissions,
        recovery_access=True,
    )
    return token


def add_attempts(task: Task, outcomes: list[str | None]) -> list[Attempt]:
    """Attempt rows numbered from 1, one per outcome (None: still running)."""
    start = timezone.now() - timedelta(hours=1)
    made = []
    for number, outcome in enumerate(outcomes, start=1):
        started = start + timedelta(minutes=number)
        made.append(
            Attempt.objects.create(
                task_id=task.id,
                number=number,
                worker_id=f"worker-{number}",
                started_at=started,
                ended_at=None if outcome is None else started + timedelta(seconds=5),
                outcome=outcome,
                error="" if outcome != AttemptOutcome.FAILED else f"failure {number}",
            )
        )
    return made


# --- GET /v1/tasks ----------------------------------------------------------------------------


def test_task_list_needs_tasks_read(api: httpx.Client, world: dict[str, Any]) -> None:
    audit_only = issue(world, [Permission.AUDIT_READ])
    assert tasks(api, world["tokens"]["reader"]).status_code == 200
    response = tasks(api, audit_only)
    assert response.status_code == 403
    assert error_code(response) == "PERMISSION_DENIED"
    assert tasks(api, "orb_not-a-token").status_code == 401


def test_task_list_shows_the_namespace_newest_first(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = tasks(api, admin(world), {"limit": 100})

    body = response.json()
    assert set(body) == {"request_id", "data"}
    assert set(body["data"]) == {"items"}
    items = body["data"]["items"]
    assert [item["id"] for item in items] == ids_newest_first(namespace_id=world["namespace_id"])
    assert len(items) == 11  # nine situations and two queue fillers
    for item in items:
        assert SUMMARY_FIELDS <= set(item) <= SUMMARY_FIELDS | SUMMARY_OPTIONAL
        assert item["namespace_id"] == world["namespace_id"]


def test_task_list_summary_agrees_with_the_detail_O1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    for item in tasks(api, token, {"limit": 100}).json()["data"]["items"]:
        detail = get_task(api, item["id"], token).json()["data"]
        assert {name: detail.get(name) for name in item} == item


@pytest.mark.parametrize(
    ("state", "names"),
    [
        ("FAILED", {"failed", "failed_uncertain", "queue_full_failed"}),
        ("CANCELLED", {"cancelled"}),
        ("SUCCEEDED", {"succeeded"}),
        (
            "NEEDS_REVIEW",
            {"needs_review", "needs_review_2", "needs_review_leased", "needs_review_workflow"},
        ),
        ("FAILED,CANCELLED", {"failed", "failed_uncertain", "queue_full_failed", "cancelled"}),
        ("CANCELLED,SUCCEEDED,CANCELLED", {"cancelled", "succeeded"}),
        ("RUNNING", set()),
    ],
)
def test_task_list_filters_by_states(
    api: httpx.Client, world: dict[str, Any], state: str, names: set[str]
) -> None:
    items = walk(api, "/v1/tasks", admin(world), {"state": state, "limit": 2})

    assert {item["id"] for item in items} == {world["tasks"][name] for name in names}
    assert {item["state"] for item in items} <= set(state.split(","))
    assert [item["id"] for item in items] == ids_newest_first(
        namespace_id=world["namespace_id"], state__in=state.split(",")
    )


def test_task_list_state_filter_covers_waiting_tasks(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    items = tasks(api, admin(world), {"state": "WAITING"}).json()["data"]["items"]
    assert len(items) == 2  # the queue fillers
    assert {item["state"] for item in items} == {"WAITING"}


@pytest.mark.parametrize(
    "state",
    ["failed", "FAILED,", ",FAILED", "", "FAILED,,CANCELLED", "DONE", "FAILED, CANCELLED", "*"],
)
def test_task_list_refuses_an_invalid_state(
    api: httpx.Client, untouched_world: dict[str, Any], state: str
) -> None:
    world = untouched_world
    response = tasks(api, admin(world), {"state": state})
    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"
    assert response.json()["error"]["field"] == "state"


def test_task_list_filters_by_queue_handler_and_business_key(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    other = accept(world, handler="report.build", business_key="report:1")
    ns = world["namespace_id"]

    by_queue = walk(api, "/v1/tasks", token, {"queue_id": world["queue_id"], "limit": 3})
    assert [i["id"] for i in by_queue] == ids_newest_first(
        namespace_id=ns, queue_id=world["queue_id"]
    )
    assert len(by_queue) == 9  # all but the full queue's three
    exports = queue_named(world, "exports").id
    assert {i["queue_id"] for i in tasks(api, token, {"queue_id": exports}).json()["data"]["items"]}
    assert len(tasks(api, token, {"queue_id": exports}).json()["data"]["items"]) == 3

    by_handler = tasks(api, token, {"handler": "report.build"}).json()["data"]["items"]
    assert [i["id"] for i in by_handler] == [other.id]
    by_key = tasks(api, token, {"business_key": "object:failed"}).json()["data"]["items"]
    assert [i["id"] for i in by_key] == [world["tasks"]["failed"]]
    combined = tasks(
        api, token, {"state": "FAILED", "handler": "object.prepare", "queue_id": exports}
    ).json()["data"]["items"]
    assert [i["id"] for i in combined] == [world["tasks"]["queue_full_failed"]]
    assert tasks(api, token, {"handler": "nobody"}).json()["data"] == {"items": []}


def test_task_list_queue_of_another_namespace_lists_nothing_C4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    foreign = seed_world(label="elsewhere")["queue_id"]
    response = tasks(api, admin(world), {"queue_id": foreign})
    assert response.status_code == 200
    assert response.json()["data"] == {"items": []}


@pytest.mark.parametrize(
    "query",
    [
        "queue_id=abc",
        "queue_id=" + "A" * 32,
        "handler=",
        "business_key=",
        "business_key=" + "k" * 513,
        "business_key_prefix=",
        "error=",
        "updated_after=2026-01-01",
        "updated_before=now",
        "state=FAILED&state=CANCELLED",
        "handler=a&handler=a",
        "limit=0",
        "limit=101",
        "cursor=",
        "namespace_id=x",
        "retry_of=x",
        "State=FAILED",
    ],
)
def test_task_list_query_is_strict(
    api: httpx.Client, untouched_world: dict[str, Any], query: str
) -> None:
    world = untouched_world
    response = api.get(f"/v1/tasks?{query}", headers=bearer(admin(world)))
    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"


@pytest.mark.parametrize("limit", [1, 2, 4, 100])
def test_task_list_pages_are_complete_ordered_and_disjoint(
    api: httpx.Client, world: dict[str, Any], limit: int
) -> None:
    items = walk(api, "/v1/tasks", admin(world), {"limit": limit})

    ids = [item["id"] for item in items]
    assert len(ids) == len(set(ids)) == 11
    assert ids == ids_newest_first(namespace_id=world["namespace_id"])


def test_task_list_pages_break_created_at_ties_by_id(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    made = [accept(world, handler="tie.handler") for _ in range(5)]
    tie = datetime(2020, 2, 2, 2, 2, 2, tzinfo=UTC)
    Task.objects.filter(id__in=[t.id for t in made]).update(created_at=tie)

    items = walk(api, "/v1/tasks", admin(world), {"handler": "tie.handler", "limit": 2})

    assert [item["id"] for item in items] == sorted((t.id for t in made), reverse=True)


def test_task_list_cursor_is_bound_to_the_filters_and_the_list(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    failed = tasks(api, token, {"state": "FAILED", "limit": 1}).json()["data"]["next_cursor"]
    operations = api.get(
        f"/v1/tasks/{world['tasks']['failed']}/operations",
        params={"limit": 1},
        headers=bearer(token),
    ).json()["data"]["next_cursor"]
    tampered = failed[:-3] + ("xyz" if not failed.endswith("xyz") else "abc")

    for params in (
        {"state": "CANCELLED", "cursor": failed},
        {"cursor": failed},
        {"state": "FAILED", "handler": "object.prepare", "cursor": failed},
        {"cursor": operations},
        {"state": "FAILED", "cursor": tampered},
    ):
        response = tasks(api, token, params)
        assert response.status_code == 400, params
        assert response.json()["error"]["field"] == "cursor"
    assert tasks(api, token, {"state": "FAILED", "cursor": failed}).status_code == 200


def test_task_list_cursor_of_another_namespace_is_refused(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    elsewhere = seed_world(label="elsewhere")
    cursor = tasks(api, elsewhere["tokens"]["admin"], {"limit": 1}).json()["data"]["next_cursor"]

    response = tasks(api, admin(world), {"limit": 1, "cursor": cursor})

    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"


def test_queue_scoped_credential_lists_only_its_queue_C4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    report = accept(world, queue="reports", handler="report.build")

    listed = walk(api, "/v1/tasks", world["tokens"]["other_queue"], {"limit": 1})
    assert [item["id"] for item in listed] == [report.id]
    filtered = tasks(api, world["tokens"]["other_queue"], {"queue_id": world["queue_id"]})
    assert filtered.status_code == 200
    assert filtered.json()["data"] == {"items": []}
    assert tasks(api, world["tokens"]["other_namespace"]).json()["data"] == {"items": []}


def test_task_list_never_shows_retry_of_RT9(api: httpx.Client, world: dict[str, Any]) -> None:
    receipt = retry(api, world).json()["data"]
    child_id = receipt["task"]["id"]
    assert receipt["task"]["retry_of"] == world["tasks"]["failed"]  # single receipts do

    response = tasks(api, admin(world), {"limit": 100})

    items = {item["id"]: item for item in response.json()["data"]["items"]}
    assert child_id in items
    assert items[child_id]["state"] == "WAITING"
    assert "retry_of" not in response.text
    assert "retry_successor_id" not in response.text
    assert "payload" not in response.text and "result" not in response.text


# --- GET /v1/tasks: the selection filters (bulk recovery) -------------------------------------


def ids_of(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["data"]["items"]]


def refused(response: httpx.Response, field: str) -> str:
    """The message of a 400 that names ``field``."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("INVALID_ARGUMENT", field), error
    assert error["message"].startswith(f"{field}: "), error
    message: str = error["message"]
    return message


def keyed(world: dict[str, Any], *keys: str, **fields: Any) -> dict[str, str]:
    """One task per business key (its own handler, so that the world's tasks stay out of the
    way): key -> task id."""
    return {key: accept(world, business_key=key, **fields).id for key in keys}


def with_errors(task: Task, *errors: str) -> Task:
    """Ended attempts numbered from 1, one per error text."""
    start = timezone.now() - timedelta(hours=1)
    for number, error in enumerate(errors, start=1):
        Attempt.objects.create(
            task_id=task.id,
            number=number,
            worker_id="worker-1",
            started_at=start,
            ended_at=start + timedelta(seconds=5),
            outcome=AttemptOutcome.FAILED,
            error=error,
        )
    return task


def updated(task: Task, at: datetime) -> Task:
    Task.objects.filter(id=task.id).update(updated_at=at)
    return task


def test_task_list_filters_by_business_key_prefix(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    names = world["tasks"]
    reviews = {"needs_review", "needs_review_2", "needs_review_leased", "needs_review_workflow"}
    rows = Task.objects.filter(namespace_id=world["namespace_id"]).values_list("business_key", "id")

    listed = walk(
        api, "/v1/tasks", token, {"business_key_prefix": "object:needs-review", "limit": 2}
    )

    assert {i["id"] for i in listed} == {names[name] for name in reviews}
    assert [i["id"] for i in listed] == ids_newest_first(id__in=[i["id"] for i in listed])
    everything = walk(api, "/v1/tasks", token, {"business_key_prefix": "object:", "limit": 3})
    assert {i["id"] for i in everything} == {task_id for key, task_id in rows if key}
    # A whole key is its own prefix; a longer text, a different case, a key's middle are not.
    assert ids_of(tasks(api, token, {"business_key_prefix": "object:failed"})) == ids_newest_first(
        id__in=[names["failed"], names["failed_uncertain"]]
    )
    for miss in ("object:failed-uncertain!", "OBJECT:", "Object:failed", "failed", "bject:"):
        assert ids_of(tasks(api, token, {"business_key_prefix": miss})) == [], miss


def test_task_list_business_key_prefix_combines_with_state_and_queue(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    names = world["tasks"]
    exports = queue_named(world, "exports").id

    failed = {"state": "FAILED", "business_key_prefix": "object:failed"}
    assert set(ids_of(tasks(api, token, failed))) == {names["failed"], names["failed_uncertain"]}
    assert ids_of(tasks(api, token, {**failed, "state": "CANCELLED"})) == []
    in_exports = ids_of(tasks(api, token, {"queue_id": exports, "business_key_prefix": "object:"}))
    assert len(in_exports) == 3  # the full queue's failed task and its two fillers
    filler = {"queue_id": exports, "business_key_prefix": "object:queue-filler", "state": "WAITING"}
    assert len(ids_of(tasks(api, token, filler))) == 2
    assert ids_of(tasks(api, token, {**filler, "queue_id": world["queue_id"]})) == []


def test_task_list_business_key_prefix_takes_wildcards_literally_and_case_exactly(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    """%, _ and the LIKE escape character are plain characters; case, accents and a trailing
    space count (on MariaDB a trailing space is what PAD SPACE comparisons would ignore)."""
    token = admin(world)
    made = keyed(
        world,
        "w:100%",
        "w:100%-more",
        "w:1000",
        "w:1_0",
        "w:1x0",
        "w:a\\b",
        "w:a\\\\b",
        "w:ab",
        "w:Case",
        "w:case",
        "w:é",
        "w:É",
        "w:pad",
        "w:pad ",
        handler="filters.prefix",
    )

    def matching(prefix: str) -> set[str]:
        found = ids_of(tasks(api, token, {"business_key_prefix": prefix, "limit": 100}))
        return {key for key, task_id in made.items() if task_id in found}

    assert matching("w:100%") == {"w:100%", "w:100%-more"}
    assert matching("w:1_") == {"w:1_0"}
    assert matching("w:1_0") == {"w:1_0"}
    assert matching("w:%") == set()
    assert matching("w:_") == set()
    assert matching("w:a\\") == {"w:a\\b", "w:a\\\\b"}
    assert matching("w:a\\b") == {"w:a\\b"}
    assert matching("w:a\\\\") == {"w:a\\\\b"}
    assert matching("w:C") == {"w:Case"}
    assert matching("w:c") == {"w:case"}
    assert matching("w:é") == {"w:é"}
    assert matching("w:pad ") == {"w:pad "}
    assert matching("w:pad") == {"w:pad", "w:pad "}
    assert matching("w:") == set(made)


def test_task_list_filters_by_updated_time(api: httpx.Client, world: dict[str, Any]) -> None:
    """updated_after is inclusive, updated_before exclusive, to the microsecond."""
    token = admin(world)
    base = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
    first, second, third = (
        updated(accept(world, handler="filters.updated"), base + timedelta(hours=hours))
        for hours in (0, 1, 2)
    )
    fraction = updated(
        accept(world, handler="filters.updated"), base + timedelta(hours=1, microseconds=500)
    )
    mine = {"handler": "filters.updated", "limit": 100}

    def listed(**bounds: datetime) -> set[str]:
        params = {**mine, **{name: format_utc(at) for name, at in bounds.items()}}
        return set(ids_of(tasks(api, token, params)))

    one = base + timedelta(hours=1)
    assert listed(updated_after=one) == {second.id, fraction.id, third.id}
    assert listed(updated_before=one) == {first.id}
    assert listed(updated_after=base, updated_before=one) == {first.id}
    assert listed(updated_after=one, updated_before=one + timedelta(microseconds=1)) == {second.id}
    assert listed(updated_after=one + timedelta(microseconds=500)) == {fraction.id, third.id}
    assert listed(updated_after=one + timedelta(microseconds=501)) == {third.id}
    assert listed(updated_before=base) == set()
    assert listed(updated_after=base + timedelta(hours=3)) == set()
    # The same instant however it is spelt: trailing fraction zeros change nothing.
    spelt = {**mine, "updated_after": "2025-03-01T13:00:00.000000Z"}
    assert set(ids_of(tasks(api, token, spelt))) == {second.id, fraction.id, third.id}


def test_task_list_updated_time_combines_with_state_and_queue(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    names = world["tasks"]
    old = datetime(2024, 6, 1, tzinfo=UTC)
    updated(Task.objects.get(id=names["failed"]), old)
    exports = queue_named(world, "exports").id
    before = {"updated_before": format_utc(old + timedelta(seconds=1))}

    assert ids_of(tasks(api, token, {**before, "state": "FAILED"})) == [names["failed"]]
    assert ids_of(tasks(api, token, {**before, "state": "CANCELLED"})) == []
    assert ids_of(tasks(api, token, {**before, "queue_id": exports})) == []
    recent = {"updated_after": format_utc(old + timedelta(seconds=1)), "state": "FAILED"}
    assert set(ids_of(tasks(api, token, recent))) == {
        names["failed_uncertain"],
        names["queue_full_failed"],
    }
    in_exports = {**recent, "queue_id": exports}
    assert ids_of(tasks(api, token, in_exports)) == [names["queue_full_failed"]]


def test_task_list_filters_by_attempt_error(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    names = world["tasks"]

    def listed(text: str, **more: str) -> set[str]:
        return set(ids_of(tasks(api, token, {"error": text, "limit": 100, **more})))

    # Seeded errors: "connection reset", "timeout" (twice), "object not found", "x", ...
    assert listed("timeout") == {names["needs_review_2"], names["needs_review_workflow"]}
    assert listed("not found") == {names["failed"]}
    assert listed("connection reset") == {names["needs_review"]}
    assert listed("time out") == set()
    # A late report's detail is not an attempt's error.
    assert listed("after the lease ended") == set()
    # Combined with state and queue.
    assert listed("timeout", state="NEEDS_REVIEW") == {
        names["needs_review_2"],
        names["needs_review_workflow"],
    }
    assert listed("timeout", state="FAILED") == set()
    exports = queue_named(world, "exports").id
    assert listed("x", queue_id=exports) == {names["queue_full_failed"]}
    assert listed("x", queue_id=exports, state="WAITING") == set()
    assert listed("timeout", queue_id=exports) == set()


def test_task_list_error_matches_any_attempt_once(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    twice = with_errors(accept(world, handler="filters.error"), "", "broker gone", "broker gone")
    first_only = with_errors(accept(world, handler="filters.error"), "broker gone", "")
    never = accept(world, handler="filters.error")  # no attempt at all
    mine = {"handler": "filters.error", "limit": 100}

    listed = ids_of(tasks(api, token, {**mine, "error": "broker gone"}))
    assert listed == ids_newest_first(id__in=[twice.id, first_only.id])
    assert len(listed) == 2  # one item per task, however many of its attempts match
    assert never.id not in ids_of(tasks(api, token, {**mine, "error": "b"}))
    assert ids_of(tasks(api, token, {**mine, "error": "broker gone!"})) == []


def test_task_list_error_ignores_ascii_case_and_takes_wildcards_literally(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    """A-Z match in either case, on SQLite and on MariaDB's utf8mb4_bin alike; every other
    character, accented letters included, matches exactly; %, _ and \\ are plain."""
    token = admin(world)
    errors = {
        "upper": "Connection REFUSED by Peer",
        "percent": "disk 100% full",
        "no_percent": "disk 1000 full",
        "underscore": "column a_b missing",
        "no_underscore": "column axb missing",
        "backslash": "cannot open C:\\Temp\\x",
        "umlaut_upper": "Übertragung fehlgeschlagen",
        "umlaut_lower": "übertragung fehlgeschlagen",
    }
    made = {
        name: with_errors(accept(world, handler="filters.error-text"), text).id
        for name, text in errors.items()
    }

    def matching(text: str) -> set[str]:
        params = {"handler": "filters.error-text", "error": text, "limit": 100}
        found = ids_of(tasks(api, token, params))
        return {name for name, task_id in made.items() if task_id in found}

    for spelling in ("connection refused", "CONNECTION REFUSED", "cOnNeCtIoN rEfUsEd BY PEER"):
        assert matching(spelling) == {"upper"}, spelling
    assert matching("100%") == {"percent"}
    assert matching("%") == {"percent"}
    assert matching("a_b") == {"underscore"}
    assert matching("_") == {"underscore"}
    assert matching("C:\\temp\\") == {"backslash"}
    assert matching("\\") == {"backslash"}
    assert matching("Ü") == {"umlaut_upper"}
    assert matching("ü") == {"umlaut_lower"}
    assert matching("ÜBERTRAGUNG") == {"umlaut_upper"}
    assert matching("übertragung FEHLGESCHLAGEN") == {"umlaut_lower"}
    assert matching("fehlgeschlagen") == {"umlaut_upper", "umlaut_lower"}


def test_task_list_combines_every_new_filter(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    at = datetime(2025, 5, 5, tzinfo=UTC)
    hit = updated(with_errors(accept(world, business_key="combo:1"), "Quota exceeded"), at)
    updated(with_errors(accept(world, business_key="combo:2"), "quota fine"), at)
    updated(with_errors(accept(world, business_key="combo:3"), "quota exceeded"), at)
    Task.objects.filter(id=hit.id).update(state="FAILED")
    params = {
        "business_key_prefix": "combo:",
        "error": "QUOTA EXCEEDED",
        "updated_after": format_utc(at),
        "updated_before": format_utc(at + timedelta(seconds=1)),
        "state": "FAILED",
        "queue_id": world["queue_id"],
    }

    assert ids_of(tasks(api, token, params)) == [hit.id]
    later = {**params, "updated_after": format_utc(at + timedelta(microseconds=1))}
    assert ids_of(tasks(api, token, later)) == []
    assert ids_of(tasks(api, token, {**params, "error": "quota fine"})) == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("business_key_prefix", "", "must be 1 to 255 characters"),
        ("business_key_prefix", "k" * 256, "must be 1 to 255 characters"),
        ("business_key_prefix", "a\x00b", "must not contain the NUL character"),
        ("error", "", "must be 1 to 200 characters"),
        ("error", "e" * 201, "must be 1 to 200 characters"),
        ("error", "\x00", "must not contain the NUL character"),
        ("updated_after", "2026-01-01", "must be an RFC 3339 time in UTC"),
        ("updated_after", "2026-01-01T00:00:00+00:00", "must be an RFC 3339 time in UTC"),
        ("updated_after", "2026-01-01T00:00:00.1234567Z", "must be an RFC 3339 time in UTC"),
        ("updated_after", "", "must be an RFC 3339 time in UTC"),
        ("updated_before", "2026-01-01 00:00:00Z", "must be an RFC 3339 time in UTC"),
        ("updated_before", "2026-02-30T00:00:00Z", "is not a valid date and time"),
        ("updated_before", "1999-12-31T23:59:59Z", "year must be between 2000 and 9998"),
    ],
)
def test_task_list_refuses_bad_new_filters_naming_the_field(
    api: httpx.Client, untouched_world: dict[str, Any], field: str, value: str, message: str
) -> None:
    world = untouched_world
    response = tasks(api, admin(world), {field: value})
    assert message in refused(response, field)


def test_task_list_new_filters_at_their_limits_are_accepted(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    for params in (
        {"business_key_prefix": "k" * 255},
        {"business_key_prefix": "k"},
        {"error": "e" * 200},
        {"error": "e"},
        {"updated_after": "2000-01-01T00:00:00Z", "updated_before": "9998-12-31T23:59:59.999999Z"},
    ):
        assert tasks(api, token, params).status_code == 200, params


def test_task_list_business_key_and_its_prefix_exclude_each_other(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    both = {"business_key": "object:failed", "business_key_prefix": "object:"}
    message = refused(tasks(api, admin(world), both), "business_key_prefix")
    assert message == "business_key_prefix: cannot be combined with business_key"


@pytest.mark.parametrize("gap", [timedelta(0), timedelta(microseconds=-1), timedelta(days=-1)])
def test_task_list_updated_after_must_be_earlier_than_updated_before(
    api: httpx.Client, world: dict[str, Any], gap: timedelta
) -> None:
    before = datetime(2026, 1, 1, tzinfo=UTC)
    params = {"updated_after": format_utc(before), "updated_before": format_utc(before + gap)}
    message = refused(tasks(api, admin(world), params), "updated_after")
    assert message == "updated_after: must be earlier than updated_before"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("business_key_prefix", "object:"),
        ("updated_after", "2026-01-01T00:00:00Z"),
        ("updated_before", "2026-01-01T00:00:00Z"),
        ("error", "timeout"),
    ],
)
def test_task_list_new_filters_appear_at_most_once(
    api: httpx.Client, world: dict[str, Any], field: str, value: str
) -> None:
    response = tasks(api, admin(world), [(field, value), (field, value)])
    assert refused(response, field) == f"{field}: may appear at most once"


def test_task_list_cursor_is_bound_to_the_new_filters(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    at = "2020-01-01T00:00:00Z"

    def cursor(params: dict[str, str]) -> str:
        data = tasks(api, token, {**params, "limit": 1}).json()["data"]
        next_cursor: str = data["next_cursor"]
        return next_cursor

    for params, others in (
        (
            {"business_key_prefix": "object:"},
            [
                {},
                {"business_key_prefix": "object:n"},
                {"business_key_prefix": "OBJECT:"},
                {"business_key": "object:"},
                {"business_key_prefix": "object:", "state": "FAILED"},
            ],
        ),
        (
            {"updated_after": at},
            [
                {},
                {"updated_after": "2020-01-01T00:00:00.000001Z"},
                {"updated_before": "9000-01-01T00:00:00Z"},
                {"updated_after": at, "updated_before": "9000-01-01T00:00:00Z"},
            ],
        ),
        ({"updated_before": "9000-01-01T00:00:00Z"}, [{}, {"updated_after": at}]),
        (
            {"error": "timeout"},
            [{}, {"error": "TIMEOUT"}, {"error": "timeou"}, {"error": "timeout", "limit": "2"}],
        ),
    ):
        bound = cursor(params)
        assert tasks(api, token, {**params, "limit": 1, "cursor": bound}).status_code == 200
        for other in others:
            response = tasks(api, token, {"limit": 1, **other, "cursor": bound})
            if other.get("limit"):  # the page size is not part of the query
                assert response.status_code == 200
                continue
            assert refused(response, "cursor") == "cursor: belongs to another query", other
    # The same instant spelt otherwise is the same query.
    bound = cursor({"updated_after": at})
    same = {"updated_after": "2020-01-01T00:00:00.000Z", "limit": 1, "cursor": bound}
    assert tasks(api, token, same).status_code == 200


def test_task_list_cursor_binding_is_unambiguous(api: httpx.Client, world: dict[str, Any]) -> None:
    """Filters are bound as a whole, not joined by a separator that a text may contain."""
    token = admin(world)
    for _ in range(2):
        accept(world, handler="h|k")
    bound = tasks(api, token, {"handler": "h|k", "limit": 1}).json()["data"]["next_cursor"]

    response = tasks(api, token, {"handler": "h", "business_key": "k|", "cursor": bound})

    assert refused(response, "cursor") == "cursor: belongs to another query"


def test_task_list_new_filters_page_through_every_match(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    at = datetime(2025, 7, 1, tzinfo=UTC)
    made = [
        updated(with_errors(accept(world, business_key=f"page:{n}"), "Page Fault"), at)
        for n in range(7)
    ]
    with_errors(accept(world, business_key="page:other"), "no fault")
    params = {
        "business_key_prefix": "page:",
        "error": "page fault",
        "updated_after": format_utc(at),
        "limit": 2,
    }

    items = walk(api, "/v1/tasks", admin(world), params)

    assert [item["id"] for item in items] == ids_newest_first(id__in=[t.id for t in made])


# --- GET /v1/tasks/{id} (O1) ------------------------------------------------------------------


def test_get_task_answers_the_detail_of_a_parked_task_O1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    response = get_task(api, task_id, world["tokens"]["reader"])

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"request_id", "data"}
    task = body["data"]
    stored = Task.objects.get(id=task_id)
    assert task["id"] == task_id
    assert task["namespace_id"] == world["namespace_id"]
    assert task["queue_id"] == world["queue_id"]
    assert task["state"] == "NEEDS_REVIEW"
    assert task["revision"] == "3"
    assert task["attempt_count"] == 1
    assert task["business_key"] == "object:needs-review"
    assert task["effect_uncertain"] is True
    assert task["owner"] == {"kind": "NONE"}
    assert (task["gated"], task["leased"], task["active_attempt"]) == (False, False, False)
    assert task["unreleased_permit"] is False
    assert task["retry"] == {
        "max_attempts": 1,
        "initial_delay_ms": 0,
        "max_delay_ms": 0,
        "attempt_timeout_ms": 10000,
    }
    assert task["created_at"] == format_utc(stored.created_at)
    assert task["deadline_at"] == format_utc(stored.deadline_at)
    for absent in ("result", "completed_at", "retry_of", "retry_successor_id", "lease_expires_at"):
        assert absent not in task
    assert f'"payload":{PAYLOAD}' in response.text  # exact text, big integer intact


def test_get_task_flags_a_leased_running_attempt_O1_RV1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review_leased"]
    stored = Task.objects.get(id=task_id)
    task = get_task(api, task_id, admin(world)).json()["data"]

    assert task["leased"] is True
    assert task["lease_expires_at"] == format_utc(stored.lease_expires_at)  # type: ignore[arg-type]
    assert task["active_attempt"] is True
    assert task["unreleased_permit"] is True
    assert task["effect_uncertain"] is True
    assert stored.lease_id not in str(task) and stored.permit_id not in str(task)


def test_get_task_shows_owner_gate_and_uncertainty_O1_RV2(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = admin(world)
    workflow = Task.objects.get(id=world["tasks"]["needs_review_workflow"])
    assert get_task(api, workflow.id, token).json()["data"]["owner"] == {
        "kind": "WORKFLOW",
        "workflow_id": workflow.owner_id,
    }
    planned = task_accept_for_plan(
        queue=queue_named(world, "objects"),
        actor_id=actor_id_for(world["namespace_id"], "scheduler"),
        plan_name="nightly",
        handler="object.prepare",
        payload=PAYLOAD,
    )
    assert get_task(api, planned.id, token).json()["data"]["owner"] == {
        "kind": "PLAN",
        "plan_id": planned.owner_id,
        "trigger_id": planned.trigger_id,
    }
    gated = accept(world, gate_id=new_id())
    assert get_task(api, gated.id, token).json()["data"]["gated"] is True

    uncertain = get_task(api, world["tasks"]["failed_uncertain"], token).json()["data"]
    assert (uncertain["state"], uncertain["effect_uncertain"]) == ("FAILED", True)
    failed = get_task(api, world["tasks"]["failed"], token).json()["data"]
    assert (failed["state"], failed["effect_uncertain"]) == ("FAILED", False)
    assert "completed_at" in failed


def test_get_task_returns_the_exact_result_O1_I8(api: httpx.Client, world: dict[str, Any]) -> None:
    response = get_task(api, world["tasks"]["succeeded"], admin(world))
    assert response.json()["data"]["state"] == "SUCCEEDED"
    assert '"result":{"object_ref":"objects/output"}' in response.text


def test_get_task_links_source_and_successor_O1_RT9(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    source_id = world["tasks"]["failed"]
    child_id = retry(api, world).json()["data"]["task"]["id"]
    token = world["tokens"]["reader"]

    child = get_task(api, child_id, token).json()["data"]
    source = get_task(api, source_id, token).json()["data"]

    assert child["retry_of"] == source_id
    assert "retry_successor_id" not in child
    assert (child["state"], child["revision"], child["attempt_count"]) == ("WAITING", "1", 0)
    assert source["retry_successor_id"] == child_id
    assert "retry_of" not in source
    assert (source["state"], source["revision"]) == ("FAILED", "3")


def test_get_task_reflects_a_review_O1_RV5(api: httpx.Client, world: dict[str, Any]) -> None:
    review(api, world, outcome="SUCCEEDED")
    task = get_task(api, world["tasks"]["needs_review"], admin(world)).json()["data"]
    assert (task["state"], task["revision"], task["effect_uncertain"]) == ("SUCCEEDED", "4", False)
    assert task["result"] == {"confirmed": True, "sequence": 9007199254740993}
    assert "completed_at" in task


def test_get_task_scope_and_shape_errors_C4_C5(api: httpx.Client, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["failed"]
    for outsider in ("other_queue", "other_namespace"):
        response = get_task(api, task_id, world["tokens"][outsider])
        assert response.status_code == 404
        assert (
            response.json()["error"]
            == get_task(api, new_id(), world["tokens"][outsider]).json()["error"]
        )
    assert get_task(api, task_id.upper(), admin(world)).status_code == 400
    assert get_task(api, task_id[:-1], admin(world)).status_code == 400
    with_query = api.get(f"/v1/tasks/{task_id}?verbose=1", headers=bearer(admin(world)))
    assert with_query.status_code == 400
    assert api.get(f"/v1/tasks/{task_id}").status_code == 401


# --- GET /v1/tasks/{id}/attempts --------------------------------------------------------------


def test_attempts_are_newest_first_across_pages(api: httpx.Client, world: dict[str, Any]) -> None:
    task = accept(world)
    made = add_attempts(task, ["FAILED", "FAILED", "UNKNOWN", "FAILED", "SUCCEEDED", None])

    for limit in (1, 2, 4, 100):
        items = walk(api, f"/v1/tasks/{task.id}/attempts", admin(world), {"limit": limit})
        assert [item["number"] for item in items] == [6, 5, 4, 3, 2, 1]
        assert [item["id"] for item in items] == [a.id for a in reversed(made)]
    items = attempts(api, task.id, admin(world)).json()["data"]["items"]
    assert items[0]["outcome"] is None and "ended_at" not in items[0]
    assert items[-1]["error"] == "failure 1"
    assert {item["task_id"] for item in items} == {task.id}


def test_attempts_cursor_is_bound_to_the_task(api: httpx.Client, world: dict[str, Any]) -> None:
    first, second = accept(world), accept(world)
    add_attempts(first, ["FAILED", "FAILED"])
    add_attempts(second, ["FAILED", "FAILED"])
    write_audit(
        task=first,
        operation_id=new_id(),
        actor_id=new_id(),
        action="test.note",
        reason="a second record, so that the operations list has a next page",
        evidence_ref=None,
        before={"state": "WAITING", "revision": "1"},
        after={"state": "WAITING", "revision": "1"},
        now=timezone.now(),
    )
    token = admin(world)
    cursor = attempts(api, first.id, token, {"limit": 1}).json()["data"]["next_cursor"]
    operations = api.get(
        f"/v1/tasks/{first.id}/operations", params={"limit": 1}, headers=bearer(token)
    ).json()["data"]["next_cursor"]

    for task_id, bad in ((second.id, cursor), (first.id, operations), (first.id, cursor[1:])):
        response = attempts(api, task_id, token, {"limit": 1, "cursor": bad})
        assert response.status_code == 400
        assert error_code(response) == "INVALID_ARGUMENT"


def test_parked_tasks_show_an_unknown_outcome_and_late_reports_RV6(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = world["tokens"]["reader"]
    for name in ("needs_review", "needs_review_2", "needs_review_workflow"):
        (item,) = attempts(api, world["tasks"][name], token).json()["data"]["items"]
        assert item["outcome"] == "UNKNOWN"
        assert "ended_at" in item
        assert item["number"] == 1
    # The silent run was parked without ending its attempt: it has no outcome yet.
    (silent,) = attempts(api, world["tasks"]["needs_review_leased"], token).json()["data"]["items"]
    assert silent["outcome"] is None
    assert "ended_at" not in silent
    (failed,) = attempts(api, world["tasks"]["failed"], token).json()["data"]["items"]
    assert (failed["outcome"], failed["error"]) == ("FAILED", "object not found")
    assert attempts(api, world["tasks"]["cancelled"], token).json()["data"] == {"items": []}


def test_late_reports_are_appended_and_the_attempt_is_never_rewritten_RV6(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["reader"]
    (before,) = attempts(api, task_id, token).json()["data"]["items"]
    assert [r["outcome"] for r in before["late_reports"]] == ["FAILED"]

    attempt = Attempt.objects.get(task_id=task_id)
    attempt_report_late(attempt=attempt, outcome=AttemptOutcome.SUCCEEDED, detail="second look")
    review(api, world, outcome="SUCCEEDED")

    (after,) = attempts(api, task_id, token).json()["data"]["items"]
    assert [r["outcome"] for r in after["late_reports"]] == ["FAILED", "SUCCEEDED"]
    assert after["late_reports"][0] == before["late_reports"][0]
    assert after["late_reports"][1]["detail"] == "second look"
    assert {k: v for k, v in after.items() if k != "late_reports"} == {
        k: v for k, v in before.items() if k != "late_reports"
    }
    assert after["outcome"] == "UNKNOWN"  # the review did not rewrite the attempt


def test_attempts_need_tasks_read_and_scope_C3_C4(api: httpx.Client, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["failed"]
    assert attempts(api, task_id, issue(world, [Permission.AUDIT_READ])).status_code == 403
    for outsider in ("other_queue", "other_namespace"):
        response = attempts(api, task_id, world["tokens"][outsider])
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"
    assert attempts(api, "nope", admin(world)).status_code == 400
    assert attempts(api, task_id, admin(world), {"limit": 0}).status_code == 400
    assert attempts(api, task_id, admin(world), {"state": "FAILED"}).status_code == 400


def test_retry_successor_starts_without_attempts_RT5(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    child_id = retry(api, world).json()["data"]["task"]["id"]
    assert attempts(api, child_id, admin(world)).json()["data"] == {"items": []}


# --- Orders, pages back and the total (issue 30) ----------------------------------------------


@pytest.mark.parametrize("order", ["created_desc", "created_asc", "updated_desc", "updated_asc"])
def test_task_list_orders_by_creation_or_update_either_way(
    api: httpx.Client, world: dict[str, Any], order: str
) -> None:
    # Updated in another order than created: the two orders must differ.
    rows = list(Task.objects.filter(namespace_id=world["namespace_id"]).order_by("created_at"))
    base = datetime(2021, 1, 1, tzinfo=UTC)
    for index, task in enumerate(rows):
        Task.objects.filter(id=task.id).update(updated_at=base + timedelta(minutes=-index))
    field, way = order.split("_")
    rows = Task.objects.filter(namespace_id=world["namespace_id"]).values_list(f"{field}_at", "id")
    expected = [task_id for _, task_id in sorted(rows, reverse=way == "desc")]

    items = walk(api, "/v1/tasks", admin(world), {"limit": 3, "order": order})

    assert [item["id"] for item in items] == expected


def test_task_list_reads_back_with_prev_cursor(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    first = tasks(api, token, {"limit": 3}).json()["data"]
    assert "prev_cursor" not in first
    second = tasks(api, token, {"limit": 3, "cursor": first["next_cursor"]}).json()["data"]
    third = tasks(api, token, {"limit": 3, "cursor": second["next_cursor"]}).json()["data"]

    back = tasks(api, token, {"limit": 3, "cursor": third["prev_cursor"]}).json()["data"]
    assert back["items"] == second["items"]
    again = tasks(api, token, {"limit": 3, "cursor": back["prev_cursor"]}).json()["data"]
    assert again["items"] == first["items"]
    assert "prev_cursor" not in again
    # Its next page is the second again (the cursor's text may differ: it is the position).
    onward = tasks(api, token, {"limit": 3, "cursor": again["next_cursor"]}).json()["data"]
    assert onward["items"] == second["items"]


def test_task_list_cursor_belongs_to_its_order(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    cursor = tasks(api, token, {"limit": 1, "order": "updated_asc"}).json()["data"]["next_cursor"]
    response = tasks(api, token, {"limit": 1, "cursor": cursor})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "cursor"
    assert (
        tasks(api, token, {"limit": 1, "order": "updated_asc", "cursor": cursor}).status_code == 200
    )


def test_task_list_counts_its_matches_when_asked(api: httpx.Client, world: dict[str, Any]) -> None:
    token = admin(world)
    data = tasks(api, token, {"limit": 1, "state": "FAILED", "count": "true"}).json()["data"]
    failed = Task.objects.filter(namespace_id=world["namespace_id"], state="FAILED").count()
    assert (data["total"], data["total_exact"]) == (failed, True)
    assert "total" not in tasks(api, token, {"limit": 1}).json()["data"]


@pytest.mark.parametrize(
    ("name", "value"), [("order", "newest"), ("order", "CREATED_DESC"), ("count", "yes")]
)
def test_task_list_refuses_an_unknown_order_or_count(
    api: httpx.Client, world: dict[str, Any], name: str, value: str
) -> None:
    response = tasks(api, admin(world), {name: value})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == name
