"""The alert rules (issue 33): ``promtool check rules`` accepts them, ``promtool test rules``
shows each alert firing on the series that should fire it and quiet otherwise, each has a
severity, a summary and a runbook section, and every metric the rules and the dashboard read
is exported by a real console and reconciler: a renamed metric cannot silently blind an alert
or a panel."""

import json
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from django.conf import settings

from orbit_console.insight.objectives import stall_alarm_set
from tests.console.web import signed_in
from tests.ops.helpers import scrape
from tests.support import servers
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer
from tests.support.tools import tool

BASE = Path(settings.BASE_DIR)
PROMETHEUS = BASE / "deploy" / "prometheus"
RULES = PROMETHEUS / "alerts.yml"
RULE_TESTS = PROMETHEUS / "alerts.test.yml"
DASHBOARD = BASE / "deploy" / "grafana" / "orbit-console.json"
RUNBOOKS = BASE / "docs" / "runbooks.md"
METRICS_TOKEN = secrets.token_urlsafe(24)
# Series the rules read that the console does not export, each with who does: the checkpointer
# is reached by nothing, so its readiness comes from kube-state-metrics; ``up`` is Prometheus'.
EXTERNAL_METRICS = {
    "kube_pod_container_status_ready": "kube-state-metrics",
    "up": "Prometheus, for every target",
}
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
ORBIT_NAME = re.compile(r"\borbit_[a-zA-Z0-9_]+")


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


# Label names, not series: a grouping's or a matching's list, and what a selector's braces hold
# (insight's series carry the label ``orbit_namespace``).
LABEL_LISTS = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\{[^}]*\}"
)


def metric_names(expr: str) -> set[str]:
    """The series an expression reads: every name before a selector's braces, and every
    ``orbit_`` name (selected without braces) that is no label."""
    return set(SELECTOR.findall(expr)) | set(ORBIT_NAME.findall(LABEL_LISTS.sub(" ", expr)))


def dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """The alerts' sections: those before the procedures (``# Procedures…``, issue 34)."""
    text = RUNBOOKS.read_text().split("\n# Procedures", 1)[0]
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {
        github_anchor(title): body for title, body in zip(parts[1::2], parts[2::2], strict=True)
    }


@pytest.mark.system_extra
def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(
        [tool("promtool"), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in done.stdout


@pytest.mark.system_extra
def test_every_alert_fires_on_its_series_and_stays_quiet_otherwise() -> None:
    """``promtool test rules`` runs alerts.test.yml; this also checks that the file tests every
    alert both ways (an alert tested only firing could fire always)."""
    done = subprocess.run(
        [tool("promtool"), "test", "rules", str(RULE_TESTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]
    names = {rule["alert"] for rule in alert_rules()}
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert names - fired == set(), "never shown firing"
    assert names - quiet == set(), "never shown quiet"


def runbook_base() -> str:
    """Where the rules' runbook links start: the base's RUNBOOK_URL setting (deploy/kubernetes),
    which an installation sets to where its copy of docs/runbooks.md is served."""
    base = yaml.safe_load(
        (BASE / "deploy" / "kubernetes" / "base" / "kustomization.yaml").read_text()
    )
    [monitoring] = [g for g in base["configMapGenerator"] if g["name"] == "orbit-monitoring"]
    return dict(literal.split("=", 1) for literal in monitoring["literals"])["RUNBOOK_URL"]


def test_every_alert_has_a_severity_a_summary_and_a_runbook_section() -> None:
    """Each runbook link is a full URL (a relative one opens nowhere from an alert's
    notification, issue 41): the configurable base, then the section of docs/runbooks.md."""
    sections = runbook_sections()
    base = urlsplit(runbook_base())
    assert base.scheme == "https" and base.netloc and base.path.endswith("/runbooks.md")
    for rule in alert_rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"].strip(), name
        link, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert link == runbook_base(), name
        assert anchor == github_anchor(name), name
        section = sections[anchor]
        for part in ("**What it means.**", "**What to look at.**", "**What to do.**"):
            assert part in section, f"{name}: {part}"
    assert set(sections) == {github_anchor(rule["alert"]) for rule in alert_rules()}


def test_no_runbook_tells_anyone_to_edit_the_database() -> None:
    """The handbook's rule: alerts never rewrite business state, and the runbooks never send
    an operator to change rows by hand."""
    statements = re.compile(
        r"\bupdate\s+\S+\s+set\b|\bdelete\s+from\b|\binsert\s+into\b|\btruncate\b"
        r"|\bdbshell\b|\bmysql\s+-u|\balter\s+table\b",
        re.IGNORECASE,
    )
    for anchor, section in runbook_sections().items():
        assert not statements.search(section), f"{anchor}: {statements.search(section)}"


# --- Every metric read is exported ---------------------------------------------------------------


@pytest.fixture(scope="module")
def metered_console(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    with django_db_blocker.unblock():
        server = DaphneServer("ops-alerts", env={"METRICS_TOKEN": METRICS_TOKEN}).start()
    yield server
    server.stop()


def reconciler_metrics(orbit_url: str) -> set[str]:
    """The series a real ``manage.py reconcile`` serves on its own port once it beat."""
    port = servers.free_port()
    health = f"http://127.0.0.1:{port}"
    reconciler = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", "--interval", "0.2", "--health-port", str(port)],
        cwd=settings.BASE_DIR,
        env=servers.child_env(ORBIT_EMBEDDED_API_URL=orbit_url, METRICS_TOKEN=METRICS_TOKEN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert reconciler.poll() is None, "the reconciler exited"
            assert time.monotonic() < deadline, "the reconciler never beat"
            try:
                ready = httpx.get(f"{health}/health/ready", timeout=5).json()
            except httpx.TransportError:
                ready = {}
            if ready.get("last_success"):
                break
            time.sleep(0.2)
        answer = httpx.get(
            f"{health}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return {
            line.split("{")[0].split(" ")[0]
            for line in answer.text.splitlines()
            if line[:1] not in ("#", "")
        }
    finally:
        reconciler.send_signal(signal.SIGTERM)
        reconciler.wait(timeout=30)


def test_every_metric_the_rules_and_the_dashboard_read_is_exported(
    metered_console: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Scrapes a real console after a signed-in person's pages (which call the API) and an API
    request of its own, and a real reconciler after its first pass: the names read by every
    alert and every panel must be among the samples they serve."""
    # An administrator set the namespace's stall alarm: its threshold is a series of its own.
    stall_alarm_set(namespace_id=world["namespace_id"], after=timedelta(hours=2))
    with signed_in(metered_console.url, people["operator"]) as operator:
        assert operator.get("/").status_code == 200
        assert operator.get(f"/tasks/{world['tasks']['needs_review']}").status_code == 200
    token = world["tokens"]["reader"]
    answer = httpx.get(
        f"{metered_console.url}/v1/tasks/{world['tasks']['needs_review']}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    exported = {sample.name for sample in scrape(metered_console, METRICS_TOKEN)}
    exported |= reconciler_metrics(metered_console.url)

    read = {
        **{
            name: f"alert {rule['alert']}"
            for rule in alert_rules()
            for name in metric_names(rule["expr"])
        },
        **{name: "the dashboard" for expr in dashboard_exprs() for name in metric_names(expr)},
    }
    assert len(read) > 20
    missing = {
        name: where
        for name, where in read.items()
        if name not in exported and name not in EXTERNAL_METRICS
    }
    assert not missing, f"read but not exported: {missing}"
    assert not {name for name in read if name in EXTERNAL_METRICS and name.startswith("orbit_")}
