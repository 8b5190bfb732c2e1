"""Schema-driven fuzzing of the recovery API in the suite (issue 13), at a small fixed budget:
schemathesis generates requests valid by /v1/openapi.json for every operation (half of them
about real tasks of a seeded world) and sends them over real HTTP. None may fail the server
(5xx), and none may be refused as malformed for a reason the document does not state: a 400 is
allowed only on the fields whose validity depends on more than the request. bench/fuzz_api.py
runs the same driver with ten thousand requests (docs/reliability.md).

A rule between two query parameters (``business_key`` with ``business_key_prefix``, the order
of ``updated_after`` and ``updated_before``) is beyond what a parameter's schema can say: the
document states such rules in its operations' ``x-constraints``, and a refusal that names the
field of a rule the request breaks is stated too.

Hostile input (issue 29): huge exponents, huge digit strings and deep nesting in every part of
every operation and of every frame a client sends on the event stream (``fuzz_hostile``): each
answered well within the client's timeout, in the API's envelope, and refused wherever a static
rule applies."""

from typing import Any

from bench.fuzz_api import DYNAMIC_FIELDS, HOSTILE_TIMEOUT_SECONDS, Target, fuzz, fuzz_hostile
from orbit_console.ledger.api.openapi import document
from orbit_console.ledger.models import OperationAudit
from orbit_console.lib.rfc3339 import parse_utc
from tests.support.servers import DaphneServer

REQUESTS = 400  # about 30 per operation: seconds, not minutes


def test_requests_valid_by_the_document_never_fail_and_are_refused_only_for_dynamic_reasons(
    orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    audits: dict[str, list[str]] = {task_id: [] for task_id in world["tasks"].values()}
    for task_id, audit_id in OperationAudit.objects.filter(task_id__in=audits).values_list(
        "task_id", "id"
    ):
        audits[task_id].append(audit_id)
    target = Target(orbit_server.url, world["tokens"]["admin"], audits)

    findings = fuzz(target, requests_wanted=REQUESTS, seed=13)

    assert findings.sent >= REQUESTS
    assert findings.server_errors == []
    unstated = [example for example in findings.refused if not breaks_a_stated_rule(example)]
    assert unstated == [], f"refused outside {sorted(DYNAMIC_FIELDS)} and x-constraints"
    # The budget reached past the front door: real tasks were read and decided on.
    statuses = {key.rsplit(" ", 1)[1] for key in findings.statuses}
    assert {"200", "404", "409"} <= statuses


def test_hostile_numbers_and_nesting_are_refused_quickly_everywhere(
    orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """Every operation's path and query parameters and body members, the body itself, the
    stream's handshake query and every client frame's members: each with a huge exponent, a
    huge integer, a huge fraction and nesting past the parser's limit. Today's answer to each
    is a 400 (or an error frame and close 4400) within milliseconds; a worker converting
    1E+123456789 to an integer answered after minutes, and a deeply nested frame broke its
    stream without a word (HOSTILE_TIMEOUT_SECONDS guards "quickly", generously)."""
    audits: dict[str, list[str]] = {task_id: [] for task_id in world["tasks"].values()}
    for task_id, audit_id in OperationAudit.objects.filter(task_id__in=audits).values_list(
        "task_id", "id"
    ):
        audits[task_id].append(audit_id)
    target = Target(orbit_server.url, world["tokens"]["admin"], audits)

    findings = fuzz_hostile(target, rounds=1, seed=29)

    bad = "\n".join(f"{f['where']} ({f['value']}): {f['why']}" for f in findings.failures)
    assert not bad, f"answered badly or not within {HOSTILE_TIMEOUT_SECONDS} s:\n{bad}"
    places = {key.rsplit(" ", 1)[0] for key in findings.statuses}
    assert {
        "POST /v1/subscriptions lease_ms",
        "POST /v1/tasks/{task_id}:retry task_timeout_ms",
    } <= places
    assert {"frame ping", "frame ack.proof", "frame resume.proofs", "stream ?capacity"} <= places
    assert findings.sent >= 300


def breaks_a_stated_rule(example: dict[str, Any]) -> bool:
    """The refused request breaks a rule of its operation's ``x-constraints``, and the
    refusal names that rule's field."""
    operation = document()["paths"].get(example["path"], {}).get(example["method"].lower(), {})
    query = example["query"] or {}
    field = example["error"].get("field")
    for rule in operation.get("x-constraints", []):
        names = rule["parameters"]
        if rule["field"] != field or not all(name in query for name in names):
            continue
        if rule["rule"] == "not_together":
            return True
        if rule["rule"] == "earlier":
            first, second = (parse_utc(str(query[name])) for name in names)
            if first >= second:
                return True
    return False
