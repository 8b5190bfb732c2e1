"""The Grafana dashboard (issue 33): valid JSON of Grafana's dashboard model, every panel on
the Prometheus data source the dashboard asks for, every query accepted by promtool, and the
questions an operator asks each answered by a panel. That every metric it reads is exported is
tested with the alert rules' (tests/ops/test_alerts.py)."""

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from tests.ops.test_alerts import metric_names
from tests.support.tools import tool

DASHBOARD = Path(settings.BASE_DIR) / "deploy" / "grafana" / "orbit-console.json"
GRID_COLUMNS = 24


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def query_panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def test_the_dashboard_is_a_grafana_dashboard_on_a_chosen_prometheus() -> None:
    board = dashboard()
    assert board["uid"] == "orbit-console" and board["title"]
    assert isinstance(board["schemaVersion"], int)
    [variable] = board["templating"]["list"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in query_panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": f"${{{variable['name']}}}"}
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_panels_fit_the_grid_without_overlapping() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= GRID_COLUMNS, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


@pytest.mark.system_extra
def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    """Each query becomes a recording rule, which ``promtool check rules`` parses."""
    rules = [
        {"record": f"dashboard:panel_{panel['id']}_{target['refId']}", "expr": target["expr"]}
        for panel in query_panels()
        for target in panel["targets"]
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [tool("promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout


def test_the_dashboard_answers_what_an_operator_asks() -> None:
    """Decisions by state, approvals waiting and their age, batches in flight, page and API
    latency, live sockets and push latency, the loops' heartbeats, the checkpoint's age."""
    read = {
        name: panel["title"]
        for panel in query_panels()
        for target in panel["targets"]
        for name in metric_names(target["expr"])
    }
    for metric in (
        "orbit_submissions",
        "orbit_approvals_waiting",
        "orbit_approvals_oldest_waiting_seconds",
        "orbit_batches",
        "orbit_batch_items_unsettled",
        "orbit_http_request_duration_seconds_bucket",
        "orbit_websockets_open",
        "orbit_live_publish_duration_seconds_bucket",
        "orbit_loop_last_success_timestamp_seconds",
        "orbit_feed_lease_expires_timestamp_seconds",
        "orbit_audit_checkpoint_last_timestamp_seconds",
    ):
        assert metric in read, metric
    latency = [
        target["expr"]
        for panel in query_panels()
        for target in panel["targets"]
        if "histogram_quantile(0.95" in target["expr"]
    ]
    assert any(re.search(r'view=~"console:', expr) for expr in latency)  # pages
    assert any(re.search(r'view=~"api:', expr) for expr in latency)  # the API


def test_the_dashboard_shows_the_tasks_waiting_for_people() -> None:
    """Issue 43: what waits by namespace and past its objective, the three clocks, breaches and
    stalls — a row of their own."""
    rows = [panel["title"] for panel in dashboard()["panels"] if panel["type"] == "row"]
    assert "Waiting for people" in rows
    exprs = [target["expr"] for panel in query_panels() for target in panel["targets"]]
    read = {name for expr in exprs for name in metric_names(expr)}
    assert {
        "orbit_tasks_waiting_for_a_person",
        "orbit_tasks_waiting_past_objective",
        "orbit_decision_clock_seconds_bucket",
        "orbit_objective_breaches_total",
        "orbit_decisions_stalled_seconds",
    } <= read
    assert any("by (le, clock)" in expr and "histogram_quantile(0.95" in expr for expr in exprs)
