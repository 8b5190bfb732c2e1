"""A fast subset of the fault suite (issue 14), on the rig of ``bench/faults.py``: the API, the
console and the reconciler as their own processes, behind proxies that lose, hang and cut. One
trial per scenario (reviews and retries alternate); each decision must be applied exactly once,
without anyone restarting anything but what the fault killed (as a supervisor does), and the
operator's page must end showing the receipt. The database scenarios need MySQL/MariaDB (a TCP
proxy in front of the server) and run in the MariaDB pass; Redis's, with Redis. The whole suite
(260 trials) and its tallies: docs/reliability.md."""

import os
import random
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from bench.faults import (
    SCENARIOS,
    Rig,
    Scenario,
    create_rig_user,
    drop_rig_user,
    make_operator,
    run_trial,
    signed_in_people,
)
from orbit_console.ledger.seed import seed_world
from tests.support import servers

MYSQL = connection.vendor == "mysql"
REDIS = bool(os.environ.get("REDIS_URL"))
# Each kind of fault once: a process killed at each end of the write, a lost answer healed by
# the reconciler, the reconciler itself killed, two people at once; the database's grants taken
# away and the database cut under a decision the API applied; Redis hung.
SUBSET = [
    "api_killed_after_commit",
    "console_killed_mid_send",
    "reconciler_killed",
    "double_submit",
    *(["db_grants_revoked", "db_cut_after_api_applied"] if MYSQL else []),
    *(["redis_hung"] if REDIS else []),
]


@pytest.fixture(scope="module")
def rig(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        world = seed_world(label="faults")
        people = [
            make_operator(world["namespace_id"], f"fault-{secrets.token_hex(3)}-{n}") for n in "ab"
        ]
        password = secrets.token_urlsafe(16)
        if MYSQL:
            create_rig_user(password)
        parts = Rig(
            database_url=servers.test_database_url(),
            redis_url=os.environ.get("REDIS_URL"),
            env=servers.child_env(),
            logs=servers.LOG_DIR,
            rig_password=password,
        )
        try:
            parts.start()
            with signed_in_people(parts, people) as consoles:
                yield {"rig": parts, "consoles": consoles, "queue_id": world["queue_id"]}
        finally:
            parts.stop()
            if MYSQL:
                drop_rig_user()


@pytest.mark.parametrize("name", SUBSET)
def test_a_decision_outlives_the_fault_applied_once_and_told_C9_I1_I6(
    name: str, rig: dict[str, Any], live_db: None
) -> None:
    scenario: Scenario = SCENARIOS[name]
    consoles = rig["consoles"] if scenario.two_people else rig["consoles"][:1]
    index = SUBSET.index(name)  # reviews and retries alternate over the subset

    trial = run_trial(rig["rig"], scenario, index, consoles, rig["queue_id"], random.Random(index))

    assert trial.verdict == "applied once", vars(trial)
    assert trial.successors == (1 if trial.action == "retry" else 0)
    assert trial.told, f"the operator's page does not show the receipt: {vars(trial)}"
    assert trial.recovery_s is not None
