"""The Kubernetes manifests (issue 33): every overlay renders with ``kubectl kustomize`` and
passes ``kubernetes-validate --strict`` against Kubernetes' own schemas, and the rendered
objects keep the promises docs/deployment.md makes (probes, drained pods, the migrator's rights
only in the migrations Job, the signing key only where it is needed, secrets never written,
who may reach whom)."""

import functools
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
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
CUSTOM_KINDS = {"ServiceMonitor"}
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
