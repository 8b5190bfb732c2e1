"""The Kubernetes manifests (issue 33): every overlay renders with ``kubectl kustomize`` and
passes ``kubernetes-validate --strict`` against Kubernetes' own schemas, and the rendered
objects keep the promises docs/deployment.md makes (probes, drained pods, the migrator's rights
only in the migrations Job, the signing key only where it is needed, secrets never written,
who may reach whom, images pinned, read-only root filesystems, the monitoring objects
Prometheus selects). Issue 41: the walkthrough "From an empty cluster" is followed as written
(its kustomization, its keys and secrets, with a kubectl that records what it is asked), and a
console of its render, in production mode, is scraped as the ServiceMonitor scrapes it."""

import base64
import functools
import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Origin

from orbit_console.ops.uvicorn_worker import GRACEFUL_SHUTDOWN_SECONDS
from tests.console.web import signed_in
from tests.support import servers
from tests.support.people import TestPerson
from tests.support.tools import tool

# kubectl is a system tool a fresh machine lacks: CI runs these beside the fresh machine's suite.
pytestmark = pytest.mark.system_extra

DEPLOY = Path(settings.BASE_DIR) / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
TARGETS = ["base", "overlays/external-database", "overlays/external-orbit"]
# The oldest Kubernetes the manifests are written for (docs/deployment.md), and a recent one.
VERSIONS = ["1.29.0", "1.32.0"]
# Custom resources whose schemas Kubernetes does not ship: checked by hand below.
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}
SECRETS = {
    "orbit-console": {"SECRET_KEY", "ORBIT_TOKEN_KEYS", "ORBIT_AUDIT_KEYS", "METRICS_TOKEN"},
    "orbit-database": {"MYSQL_PASSWORD", "MYSQL_MIGRATE_PASSWORD", "MYSQL_ROOT_PASSWORD"},
    "orbit-audit-signing": {"ORBIT_AUDIT_SIGNING_KEYS"},
    "orbit-redis": {"REDIS_URL"},
    "orbit-console-tls": set(),
}


def test_yamllint_accepts_every_deployment_file() -> None:
    """.ci/run lints deploy/ before the suite; the suite says the same where yamllint is, so a
    long alert summary fails here and not only in CI's lint step (stop 37's CI did)."""
    done = subprocess.run(
        [tool("yamllint"), "--strict", "-c", str(DEPLOY / "yamllint.yml"), str(DEPLOY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@functools.cache
def rendered_text(target: str) -> str:
    done = subprocess.run(
        [tool("kubectl"), "kustomize", str(KUBERNETES / target)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def render(target: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(rendered_text(target)) if doc]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def named_like(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The generated object ``name`` (its rendered name ends with a hash of its content)."""
    [found] = [
        d for d in docs if d["kind"] == kind and re.fullmatch(rf"{name}-\w+", d["metadata"]["name"])
    ]
    return found


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every workload's pod spec, by workload name."""
    specs = {}
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            specs[doc["metadata"]["name"]] = doc["spec"]["template"]["spec"]
        elif doc["kind"] == "CronJob":
            specs[doc["metadata"]["name"]] = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return specs


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry for entry in container.get("env", [])}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("target", TARGETS)
def test_every_overlay_renders_and_passes_kubernetes_own_schemas_strictly(
    target: str, version: str, tmp_path: Path
) -> None:
    """``kubernetes-validate --strict`` rejects unknown fields as well as wrong ones: a typo
    in a probe or a security context fails here, not in a cluster."""
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(rendered_text(target))
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "kubernetes-validate"),
            *("--strict", "--kubernetes-version", version),
            str(manifest),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    passed = re.findall(r"passed for resource (\S+)/", done.stdout + done.stderr)
    kinds = {doc["kind"] for doc in render(target)}
    # Every object was validated, except the custom resources (no schema in Kubernetes).
    assert len(passed) == len(render(target)) - sum(
        1 for doc in render(target) if doc["kind"] in CUSTOM_KINDS
    ), done.stdout + done.stderr
    assert {"Deployment", "Job", "CronJob", "NetworkPolicy", "Ingress"} <= kinds


def test_the_console_is_two_or_more_probed_drained_pods_with_a_budget_and_an_autoscaler() -> None:
    docs = render("base")
    console = named(docs, "Deployment", "orbit-console")
    spec = console["spec"]["template"]["spec"]
    [web] = spec["containers"]
    assert console["spec"]["replicas"] >= 2
    assert console["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert web["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert web["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    # The probe's Host header is one the console serves (a Django view checks it).
    [host] = web["readinessProbe"]["httpGet"]["httpHeaders"]
    assert host["value"] in env_of(web)["ALLOWED_HOSTS"]["value"].split(",")
    # Drained: out of the endpoints first, then SIGTERM, with time for uvicorn's own grace.
    sleep = int(web["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert spec["terminationGracePeriodSeconds"] > sleep + GRACEFUL_SHUTDOWN_SECONDS
    assert sleep > web["readinessProbe"]["periodSeconds"]
    budget = named(docs, "PodDisruptionBudget", "orbit-console")
    assert budget["spec"]["minAvailable"] >= 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= (
        console["spec"]["template"]["metadata"]["labels"].items()
    )
    scaler = named(docs, "HorizontalPodAutoscaler", "orbit-console")
    assert scaler["spec"]["scaleTargetRef"]["name"] == "orbit-console"
    assert scaler["spec"]["minReplicas"] >= 2
    # One worker a pod: a scrape of the pod reads all of it.
    config = next(d for d in docs if d["metadata"]["name"].startswith("orbit-console-config"))
    assert config["data"]["ORBIT_WORKERS"] == "1"


@pytest.mark.parametrize("target", TARGETS)
def test_every_container_has_resources_and_runs_unprivileged(target: str) -> None:
    for name, spec in pod_specs(render(target)).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec.get("automountServiceAccountToken") is False, name
        for container in containers(spec):
            where = f"{name}/{container['name']}"
            assert container["resources"]["requests"]["memory"], where
            assert container["resources"]["limits"]["memory"], where
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], where
            # What docs/deployment.md promises of every pod (the in-cluster MySQL lacked it).
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, where


def test_the_in_cluster_mysql_writes_only_to_volumes_of_its_own() -> None:
    """Its root filesystem read-only, the server writes its data, its socket and pid file, its
    temporary files and its import/export folder to volumes."""
    spec = pod_specs(render("base"))["orbit-mysql"]
    [mysql] = spec["containers"]
    mounted = {m["mountPath"] for m in mysql["volumeMounts"] if not m.get("readOnly")}
    writable = {"/var/lib/mysql", "/var/run/mysqld", "/tmp", "/var/lib/mysql-files"}  # noqa: S108
    assert writable <= mounted


@pytest.mark.parametrize("target", TARGETS)
def test_every_image_is_pinned_to_a_version_or_a_digest(target: str) -> None:
    """Issue 41: every image rendered as ``orbit-console:latest``, ``mysql:8.4`` or ``redis:7``,
    tags that move. The console's is the project's version; the others are full versions
    (a digest, ``@sha256:``, where an installation pins one: docs/deployment.md)."""
    version = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())["project"][
        "version"
    ]
    images = {
        container["image"]
        for spec in pod_specs(render(target)).values()
        for container in containers(spec)
    }
    assert images
    for image in images:
        name, _, tag = image.partition(":")
        assert "@sha256:" in image or re.fullmatch(r"\d+\.\d+\.\d+", tag), image
        if name == "orbit-console":
            assert tag == version, image


def test_every_long_running_container_is_probed_on_a_port_it_serves() -> None:
    """Each Deployment's and StatefulSet's containers answer a liveness and a readiness probe
    (the feed had none, and ``feed run`` no health port); an HTTP probe asks a port the
    container declares and its command serves."""
    docs = render("base")
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            where = f"{doc['metadata']['name']}/{container['name']}"
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            for probe in ("livenessProbe", "readinessProbe"):
                assert probe in container, f"{where}: no {probe}"
                http = container[probe].get("httpGet")
                if http is None:
                    continue
                served = ports[http["port"]]
                command = container["command"]
                if "--health-port" in command:
                    assert int(command[command.index("--health-port") + 1]) == served, where
                else:
                    assert f":{served}" in " ".join(command), where


@pytest.mark.parametrize("target", TARGETS)
def test_secrets_are_referenced_by_name_and_never_written(target: str) -> None:
    docs = render(target)
    assert not [d for d in docs if d["kind"] == "Secret"]
    text = rendered_text(target)
    for secret_name in ("SECRET_KEY", "ORBIT_TOKEN_KEYS", "MYSQL_PASSWORD", "METRICS_TOKEN"):
        assert not re.search(rf"^\s*{secret_name}:", text, re.M), secret_name  # no value
    for name, spec in pod_specs(docs).items():
        for container in containers(spec):
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    assert source["secretRef"]["name"] in SECRETS, name
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in SECRETS[ref["name"]], (name, ref)


@pytest.mark.parametrize("target", TARGETS)
def test_the_signing_key_is_only_where_checkpoints_are_signed_or_verified(target: str) -> None:
    holders = {
        name
        for name, spec in pod_specs(render(target)).items()
        for container in containers(spec)
        if any(
            source.get("secretRef", {}).get("name") == "orbit-audit-signing"
            for source in container.get("envFrom", [])
        )
    }
    assert holders == {"orbit-checkpointer", "orbit-audit-verify"}


@pytest.mark.parametrize("target", TARGETS)
def test_only_the_migrations_job_connects_as_the_migrator(target: str) -> None:
    users = {}
    for name, spec in pod_specs(render(target)).items():
        for container in containers(spec):
            url = env_of(container).get("DATABASE_URL", {}).get("value")
            if url:
                users[f"{name}/{container['name']}"] = url.split("://")[1].split(":")[0]
    assert users.pop("orbit-migrate/migrate") == "orbit_migrate"
    assert set(users.values()) == {"orbit"}, users
    # Every workload that serves or loops waits for the migrations first.
    for name in (
        "orbit-console",
        "orbit-reconciler",
        "orbit-notifier",
        "orbit-checkpointer",
        "orbit-feed",
    ):
        spec = pod_specs(render(target))[name]
        [wait] = spec["initContainers"]
        assert "migrate --check" in " ".join(wait["command"]), name


def test_the_loops_run_as_the_single_replicas_their_leases_allow() -> None:
    docs = render("base")
    for name in ("orbit-reconciler", "orbit-notifier", "orbit-checkpointer"):
        workload = named(docs, "Deployment", name)
        assert workload["spec"]["replicas"] == 1, name
        assert workload["spec"]["strategy"]["type"] == "Recreate", name  # never two at once
    # The feed's consumers elect one through the database's lease: a standby is safe.
    assert named(docs, "Deployment", "orbit-feed")["spec"]["replicas"] >= 2
    config = next(d for d in docs if d["metadata"]["name"].startswith("orbit-console-config"))
    assert config["data"]["CONSOLE_FEED"] == "off"  # the web pods are not candidates
    checkpointer = named(docs, "Deployment", "orbit-checkpointer")["spec"]["template"]["spec"]
    [claim] = [v for v in checkpointer["volumes"] if "persistentVolumeClaim" in v]
    pvc = named(docs, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    [container] = checkpointer["containers"]
    mounted = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env_of(container)["ORBIT_AUDIT_CHECKPOINT_DIR"]["value"] == mounted[claim["name"]]


def policies_selecting(docs: list[dict[str, Any]], labels: dict[str, str]) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == "NetworkPolicy"
        and d["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()
    ]


def pod_labels(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    return named(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("target", TARGETS)
def test_network_policies_let_the_console_reach_its_parts_and_nothing_reach_the_checkpointer(
    target: str,
) -> None:
    docs = render(target)
    checkpointer = policies_selecting(docs, pod_labels(docs, "orbit-checkpointer"))
    assert any("Ingress" in p["spec"]["policyTypes"] for p in checkpointer)
    assert not [p for p in checkpointer if p["spec"].get("ingress")]  # no rule lets anything in
    console = policies_selecting(docs, pod_labels(docs, "orbit-console"))
    assert any(p["metadata"]["name"] == "orbit-default-deny" for p in console)
    ports = {
        port["port"]
        for p in console
        for rule in p["spec"].get("egress", [])
        for port in rule.get("ports", [])
    }
    assert {53, 3306, 6379} <= ports
    if target.endswith("external-orbit"):
        assert 443 in ports  # the recovery API
    ingress = {
        port["port"]
        for p in console
        for rule in p["spec"].get("ingress", [])
        for port in rule.get("ports", [])
    }
    assert ingress == {8000}


def test_in_cluster_mysql_makes_the_same_users_and_grants_as_the_compose_file() -> None:
    init = named(render("base"), "ConfigMap", "orbit-mysql-init")["data"]
    assert init["10-init-users.sh"] == (DEPLOY / "mysql" / "init-users.sh").read_text()
    assert init["grants.sql.in"] == (DEPLOY / "mysql" / "grants.sql").read_text()


def test_the_ingress_passes_websockets_and_never_routes_metrics_to_the_console() -> None:
    docs = render("base")
    ingress = named(docs, "Ingress", "orbit-console")
    annotations = ingress["metadata"]["annotations"]
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    paths = {p["path"]: p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    assert paths["/"]["backend"]["service"]["name"] == "orbit-console"
    metrics = paths["/metrics"]
    assert metrics["pathType"] == "Exact"
    nowhere = named(docs, "Service", metrics["backend"]["service"]["name"])
    selected = nowhere["spec"]["selector"].items()
    assert not [name for name in pod_specs(docs) if selected <= pod_labels_any(docs, name).items()]


def pod_labels_any(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    for doc in docs:
        if doc["metadata"]["name"] == name and doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            return doc["spec"]["template"]["metadata"]["labels"]
        if doc["metadata"]["name"] == name and doc["kind"] == "CronJob":
            return doc["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    raise AssertionError(name)


def test_the_prometheus_rule_holds_the_rules_promtool_tests() -> None:
    """The base's PrometheusRule is deploy/prometheus/alerts.yml wrapped, made by the command
    in its header: the rules applied are the rules tested."""
    rule_file = (KUBERNETES / "base" / "prometheusrule.yaml").read_text()
    header = rule_file.split("\nspec:\n", 1)[0] + "\nspec:\n"
    rules = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    indented = "".join(f"  {line}" if line.strip() else line for line in rules.splitlines(True))
    assert rule_file == header + indented, "run the command in prometheusrule.yaml's header"
    rule = named(render("base"), "PrometheusRule", "orbit-console")
    assert rule["spec"]["groups"] == yaml.safe_load(rules)["groups"]


def monitoring_defaults() -> dict[str, str]:
    """The base's orbit-monitoring settings (never rendered: read when rendering)."""
    base = yaml.safe_load((KUBERNETES / "base" / "kustomization.yaml").read_text())
    [settings_] = [g for g in base["configMapGenerator"] if g["name"] == "orbit-monitoring"]
    return dict(literal.split("=", 1) for literal in settings_["literals"])


@pytest.mark.parametrize("target", TARGETS)
def test_the_monitoring_objects_carry_the_release_label_prometheus_selects_by(target: str) -> None:
    """Issue 41: kube-prometheus-stack's Prometheus selects ServiceMonitors and rules by the
    label ``release`` (its Helm release); without it both were ignored. The default is the
    base's setting, the rules' runbook links start with its RUNBOOK_URL, and the settings
    themselves are never applied to the cluster."""
    docs = render(target)
    defaults = monitoring_defaults()
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert (
            named(docs, kind, "orbit-console")["metadata"]["labels"]["release"]
            == (defaults["PROMETHEUS_RELEASE"])
        )
    rule = named(docs, "PrometheusRule", "orbit-console")
    links = [r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert {link.split("#")[0] for link in links} == {defaults["RUNBOOK_URL"]}
    assert not [d for d in docs if d["metadata"]["name"].startswith("orbit-monitoring")]


def test_the_service_monitor_scrapes_the_console_and_the_reconciler_with_the_token() -> None:
    """No schema ships for this custom resource: its fields are checked here instead."""
    docs = render("base")
    monitor = named(docs, "ServiceMonitor", "orbit-console")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"].items()
    scraped = [
        d for d in docs if d["kind"] == "Service" and selector <= d["metadata"]["labels"].items()
    ]
    assert {s["metadata"]["name"] for s in scraped} == {
        "orbit-console-metrics",
        "orbit-reconciler-metrics",
        "orbit-notifier-metrics",
    }
    [endpoint] = monitor["spec"]["endpoints"]
    assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "authorization"}
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "orbit-console", "key": "METRICS_TOKEN"},
    }
    for service in scraped:
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_external_database_overlay_runs_no_database_and_reads_redis_from_a_secret() -> None:
    docs = render("overlays/external-database")
    components = {d["metadata"].get("labels", {}).get("app.kubernetes.io/component") for d in docs}
    assert not components & {"mysql", "redis"}
    for name in ("orbit-console", "orbit-reconciler", "orbit-feed", "orbit-notifier"):
        [container] = pod_specs(docs)[name]["containers"]
        redis = env_of(container)["REDIS_URL"]["valueFrom"]["secretKeyRef"]
        assert redis == {"name": "orbit-redis", "key": "REDIS_URL"}, name


def test_only_the_notifier_reaches_out_of_the_cluster_and_never_to_private_ranges() -> None:
    """Webhooks and email leave the cluster (issue 32); the SSRF rule of the worker
    (docs/notifications.md) is held by the network too."""
    docs = render("base")
    policy = named(docs, "NetworkPolicy", "orbit-notifier-egress")
    selector = policy["spec"]["podSelector"]["matchLabels"].items()
    reaching = {
        name
        for name, labels in (
            (d["metadata"]["name"], d["spec"]["template"]["metadata"]["labels"])
            for d in docs
            if d["kind"] == "Deployment"
        )
        if selector <= labels.items()
    }
    assert reaching == {"orbit-notifier"}
    [rule] = policy["spec"]["egress"]
    [block] = rule["to"]
    assert block["ipBlock"]["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= set(
        block["ipBlock"]["except"]
    )


def test_the_external_orbit_overlay_points_every_process_at_that_orbit() -> None:
    docs = render("overlays/external-orbit")
    config = next(d for d in docs if d["metadata"]["name"].startswith("orbit-console-config"))
    assert config["data"]["ORBIT_API_URL"].startswith("https://")
    for name in ("orbit-console", "orbit-reconciler", "orbit-feed"):
        [container] = pod_specs(docs)[name]["containers"]
        refs = {s["configMapRef"]["name"] for s in container["envFrom"] if "configMapRef" in s}
        assert refs == {config["metadata"]["name"]}, name


# --- Graceful termination, for real ------------------------------------------------------------


def test_sigterm_closes_the_sockets_for_a_reconnect_and_stops_within_the_pods_grace(
    live_db: None, world: dict[str, Any], people: dict[str, TestPerson], tmp_path: Path
) -> None:
    """What the console Deployment's termination relies on, with the image's command: after
    the preStop pause, SIGTERM makes ``manage.py serve`` close an open WebSocket with 1012
    (service restart: the page reconnects, to another pod) and exit, well within the grace
    period that is left."""
    pod = yaml.safe_load_all((KUBERNETES / "base" / "console.yaml").read_text())
    spec = next(doc for doc in pod if doc["kind"] == "Deployment")["spec"]["template"]["spec"]
    [web] = spec["containers"]
    left = spec["terminationGracePeriodSeconds"] - int(
        web["lifecycle"]["preStop"]["exec"]["command"][-1]
    )
    assert web["command"][:3] == ["python", "manage.py", "serve"]

    port = servers.free_port()
    base_url = f"http://127.0.0.1:{port}"
    output = tmp_path / "serve.out"
    with output.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            cwd=settings.BASE_DIR,
            env=servers.child_env(ORBIT_SERVER="uvicorn"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        servers.wait_live(base_url, process)
        with signed_in(base_url, people["auditor"]) as auditor:
            session = auditor.http.cookies["sessionid"]
        task = world["tasks"]["succeeded"]
        with connect(
            f"ws://127.0.0.1:{port}/ws/tasks/{task}/timeline",
            origin=Origin(base_url),
            additional_headers={"Cookie": f"sessionid={session}"},
            proxy=None,
            open_timeout=30,
        ) as socket_:
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    socket_.recv(timeout=left)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert process.wait(timeout=left) == 0, output.read_text()
        took = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert took < left, f"stopping took {took:.1f} s of the {left} s left after preStop"


# --- The walkthrough, followed as written (issue 41) ---------------------------------------------

WALKTHROUGH = "### From an empty cluster to a running console"
REMOTE = re.compile(r"https://YOUR-COPY-OF-THIS-REPOSITORY//deploy/kubernetes/(\S+?)\?ref=VERSION")
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)
# A kubectl that only records what it is asked, one line per call (arguments split by \x1f):
# steps 2 and 3 talk to a cluster, and there is none here.
RECORDING_KUBECTL = "#!/bin/sh\n{ IFS=$(printf '\\037'); printf '%s\\n' \"$*\"; } >> \"$0.calls\"\n"


@dataclass
class Walkthrough:
    folder: Path
    calls: list[list[str]]  # what the walkthrough asked kubectl, in order
    docs: list[dict[str, Any]]  # ``kubectl kustomize`` of its kustomization

    def secret(self, name: str) -> dict[str, str]:
        """The literals of ``kubectl create secret generic NAME``, as the walkthrough ran it."""
        [call] = [c for c in self.calls if c[2:5] == ["create", "secret", "generic"] and name in c]
        return dict(
            arg.removeprefix("--from-literal=").split("=", 1)
            for arg in call
            if arg.startswith("--from-literal=")
        )

    def config(self, name: str) -> dict[str, str]:
        data: dict[str, str] = named_like(self.docs, "ConfigMap", name)["data"]
        return data


def walkthrough_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of the walkthrough in docs/deployment.md, as (language, text)."""
    text = (Path(settings.BASE_DIR) / "docs" / "deployment.md").read_text()
    section = text.split(WALKTHROUGH, 1)[1].split("\n### ", 1)[0]
    return [(lang, textwrap.dedent(body)) for _, lang, body in FENCE.findall(section)]


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Walkthrough:
    """Steps 1 to 3 of the walkthrough in a folder of their own: its kustomization (the base
    and the component from this checkout instead of a copy of the repository), its commands
    run as written with the recording kubectl, then its kustomization rendered."""
    tool("openssl")
    folder = tmp_path_factory.mktemp("walkthrough")
    blocks = walkthrough_blocks()
    [kustomization] = [body for lang, body in blocks if body.startswith("# kustomization.yaml")]
    (folder / "kustomization.yaml").write_text(
        REMOTE.sub(
            lambda found: os.path.relpath(KUBERNETES / found.group(1), folder), kustomization
        )
    )
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    recording = bin_dir / "kubectl"
    recording.write_text(RECORDING_KUBECTL)
    recording.chmod(0o755)
    steps = [body for lang, body in blocks if lang == "sh" and "orbit" in body]
    secrets_step = next(i for i, body in enumerate(steps) if "create namespace" in body)
    for body in steps[secrets_step : secrets_step + 2]:  # step 2 (keys, secrets), step 3 (apply)
        done = subprocess.run(
            ["bash", "-e", "-c", body],
            cwd=folder,
            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    calls = [line.split("\x1f") for line in Path(f"{recording}.calls").read_text().splitlines()]
    rendered = subprocess.run(
        [tool("kubectl"), "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    docs = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    return Walkthrough(folder, calls, docs)


def public_key_of(signing_key: str) -> str:
    private = Ed25519PrivateKey.from_private_bytes(
        base64.urlsafe_b64decode(signing_key + "=" * (-len(signing_key) % 4))
    )
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_the_walkthrough_gives_every_process_the_signing_keys_public_key_and_verifies_once(
    walkthrough: Walkthrough,
) -> None:
    """Issue 41: the documented install left ORBIT_AUDIT_VERIFY_KEYS empty (every console pod
    then reported the audit failing, and AuditVerifyFailing fired at once) and never ran the
    nightly verification (AuditVerifyNotRun an hour later)."""
    signing_key = walkthrough.secret("orbit-audit-signing")["ORBIT_AUDIT_SIGNING_KEYS"]
    config = walkthrough.config("orbit-console-config")
    assert config["ORBIT_AUDIT_VERIFY_KEYS"] == public_key_of(signing_key)
    config_name = named_like(walkthrough.docs, "ConfigMap", "orbit-console-config")["metadata"]
    for name, spec in pod_specs(walkthrough.docs).items():
        for container in containers(spec):
            if container["image"].startswith(("mysql", "redis")):
                continue
            refs = {s["configMapRef"]["name"] for s in container["envFrom"] if "configMapRef" in s}
            assert refs == {config_name["name"]}, f"{name}/{container['name']}"
    # The first verification runs at install, once the checkpointer signed its first checkpoint.
    verbs = [" ".join(call[2:4]) for call in walkthrough.calls]
    created = walkthrough.calls[verbs.index("create job")]
    [source] = [arg.split("=", 1)[1] for arg in created if arg.startswith("--from=")]
    assert source == "cronjob/orbit-audit-verify"
    assert named(walkthrough.docs, "CronJob", "orbit-audit-verify")
    assert verbs.index("rollout status") < verbs.index("create job")
    assert ["status", "deploy/orbit-checkpointer"] in [call[3:5] for call in walkthrough.calls]
    job = created[-1]
    assert any(f"job/{job}" in call for call in walkthrough.calls[verbs.index("create job") :])


def console_environment(walkthrough: Walkthrough, pod_ip: str) -> dict[str, str]:
    """The environment of the console container as Kubernetes would give it: its ConfigMap and
    Secrets (``envFrom``), then its own ``env``, with ``$(VAR)`` references resolved."""
    [web] = named(walkthrough.docs, "Deployment", "orbit-console")["spec"]["template"]["spec"][
        "containers"
    ]
    env: dict[str, str] = {}
    for source in web["envFrom"]:
        if "configMapRef" in source:
            env.update(named(walkthrough.docs, "ConfigMap", source["configMapRef"]["name"])["data"])
        else:
            env.update(walkthrough.secret(source["secretRef"]["name"]))
    for entry in web["env"]:
        value_from = entry.get("valueFrom", {})
        if "fieldRef" in value_from:
            assert value_from["fieldRef"]["fieldPath"] == "status.podIP"
            env[entry["name"]] = pod_ip
        elif "secretKeyRef" in value_from:
            ref = value_from["secretKeyRef"]
            env[entry["name"]] = walkthrough.secret(ref["name"])[ref["key"]]
        else:
            env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], entry["value"])
    return env


def test_the_walkthroughs_console_answers_a_scrape_as_the_service_monitor_makes_it_and_is_quiet(
    walkthrough: Walkthrough, live_db: None, tmp_path: Path
) -> None:
    """Issue 41, items 7 and 8. The console of the walkthrough's render, in production mode
    with its own command and environment (only the database and Redis are this run's), scraped
    as the ServiceMonitor scrapes: plain HTTP at the pod's address and port, the path and
    bearer token it names, no redirect followed. Production's SSL redirect answered it 301
    (``up`` 0 for every console pod: every alert blind). Then, after the checkpointer's first
    round and the walkthrough's first verification, the audit's gauges are quiet: no failing
    verification, a checkpoint and a verification minutes old (AuditVerifyFailing,
    AuditCheckpointTooOld and AuditVerifyNotRun fired on the documented install)."""
    from orbit_console.audit import signing
    from orbit_console.audit.models import ChainVerification
    from tests.audit.conftest import VERIFICATION_TABLE, append_only_lifted, forget_checkpoints
    from tests.ops.helpers import values

    monitor = named(walkthrough.docs, "ServiceMonitor", "orbit-console")
    [endpoint] = monitor["spec"]["endpoints"]
    service = named(walkthrough.docs, "Service", "orbit-console-metrics")
    [port] = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    [web] = named(walkthrough.docs, "Deployment", "orbit-console")["spec"]["template"]["spec"][
        "containers"
    ]
    assert {p["name"]: p["containerPort"] for p in web["ports"]}[port["targetPort"]] == 8000
    listen = servers.free_port()
    command = [sys.executable if word == "python" else word for word in web["command"]]
    command[command.index("--bind") + 1] = f"127.0.0.1:{listen}"
    env = console_environment(walkthrough, pod_ip="127.0.0.1")
    assert env["ORBIT_ENV"] == "production"
    env["DATABASE_URL"] = servers.test_database_url()
    env["REDIS_URL"] = os.environ.get("REDIS_URL", "")  # this run's, or the in-memory layer
    output = tmp_path / "console.out"
    with output.open("w") as out:
        console = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=servers.child_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    signing_key = walkthrough.secret("orbit-audit-signing")["ORBIT_AUDIT_SIGNING_KEYS"]
    verifications = set(ChainVerification.objects.values_list("id", flat=True))
    forget_checkpoints()
    try:
        servers.wait_live(f"http://127.0.0.1:{listen}", console)
        # The checkpointer's first round, then the walkthrough's first verification (the
        # CronJob's command), each with the walkthrough's signing key.
        with override_settings(
            ORBIT_AUDIT_SIGNING_KEYS=[signing_key],
            ORBIT_AUDIT_VERIFY_KEYS=[],
            ORBIT_AUDIT_CHECKPOINT_DIR=tmp_path / "checkpoints",
        ):
            signing._signing_keys.cache_clear()
            signing._verify_keys.cache_clear()
            call_command("audit", "checkpoint", stdout=io.StringIO())
            call_command("audit", "verify", stdout=io.StringIO())
        bearer = walkthrough.secret(endpoint["authorization"]["credentials"]["name"])[
            endpoint["authorization"]["credentials"]["key"]
        ]
        answer = httpx.get(
            f"{endpoint.get('scheme', 'http')}://127.0.0.1:{listen}{endpoint['path']}",
            headers={"Authorization": f"{endpoint['authorization']['type']} {bearer}"},
            timeout=float(endpoint["scrapeTimeout"].rstrip("s")),
            follow_redirects=False,
        )
    finally:
        signing._signing_keys.cache_clear()
        signing._verify_keys.cache_clear()
        console.terminate()
        console.wait(timeout=30)
        forget_checkpoints()
        with append_only_lifted(VERIFICATION_TABLE):
            ChainVerification.objects.exclude(id__in=verifications).delete()
    assert answer.status_code == 200, (answer.status_code, answer.headers, output.read_text())
    assert answer.headers["content-type"].startswith("text/plain")
    samples = [
        sample
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    ]
    assert values(samples, "orbit_dependency_up", dependency="database") == [1.0]
    now = time.time()
    assert values(samples, "orbit_audit_verify_failing") == [0.0]
    [checkpoint_at] = values(samples, "orbit_audit_checkpoint_last_timestamp_seconds")
    [verified_at] = values(samples, "orbit_audit_verify_last_timestamp_seconds")
    assert now - 600 < checkpoint_at <= now
    assert now - 600 < verified_at <= now


def test_the_walkthroughs_monitoring_settings_reach_the_label_and_every_runbook_link(
    walkthrough: Walkthrough,
) -> None:
    """The settings are the installation's: its kustomization's PROMETHEUS_RELEASE and
    RUNBOOK_URL (components/monitoring) replace the base's in both objects."""
    kustomization = yaml.safe_load((walkthrough.folder / "kustomization.yaml").read_text())
    [given] = [g for g in kustomization["configMapGenerator"] if g["name"] == "orbit-monitoring"]
    chosen = dict(literal.split("=", 1) for literal in given["literals"])
    assert chosen.items() & monitoring_defaults().items() == set()  # both differ from the base's
    for kind in ("ServiceMonitor", "PrometheusRule"):
        labels = named(walkthrough.docs, kind, "orbit-console")["metadata"]["labels"]
        assert labels["release"] == chosen["PROMETHEUS_RELEASE"]
    rule = named(walkthrough.docs, "PrometheusRule", "orbit-console")
    for group in rule["spec"]["groups"]:
        for each in group["rules"]:
            link = each["annotations"]["runbook_url"]
            assert link == f"{chosen['RUNBOOK_URL']}#{each['alert'].lower()}", link
