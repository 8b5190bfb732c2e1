"""The suite itself (issue 35): ``uv run pytest`` runs on every core, and its workers share
nothing a test makes.

A small suite of its own is run here in a child pytest on two workers, with this project's
plugins: each of its tests writes down what its worker was given — the test database's name,
``ORBIT_VAR_DIR``, the channel layer's prefix, the ports ``free_port`` hands out, the
checkpoint folder — and the test compares the two workers.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

PROBE = """
import json, os
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.support.servers import free_port


def test_probe(django_db_modify_db_settings):
    layer = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    found = {
        "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        "database": connection.settings_dict["TEST"]["NAME"] or connection.settings_dict["NAME"],
        "var_dir": str(settings.VAR_DIR),
        "prefix": layer.get("prefix", ""),
        "ports": [free_port() for _ in range(3)],
        "checkpoints": str(settings.ORBIT_AUDIT_CHECKPOINT_DIR),
        "hashers": settings.PASSWORD_HASHERS[:1],
    }
    out = Path(os.environ["PROBE_OUT"]) / (found["worker"] or "main")
    out.write_text(json.dumps(found))


def test_probe_2(django_db_modify_db_settings):
    test_probe(django_db_modify_db_settings)
"""


def run_probe(tmp_path: Path, *args: str) -> dict[str, dict[str, object]]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "found"
    out.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_XDIST", "ORBIT_VAR_DIR", "REDIS_CHANNEL_PREFIX"))
        and key != "ORBIT_AUDIT_CHECKPOINT_DIR"
    }
    env["PROBE_OUT"] = str(out)
    # The channel layer's settings, as the run on Redis has them (nothing connects to it here).
    env["REDIS_URL"] = "redis://127.0.0.1:6379/15"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "--dist=load", *args),
            *("-c", str(Path(settings.BASE_DIR) / "pyproject.toml")),
            *("--rootdir", str(settings.BASE_DIR), str(tmp_path / "test_probe.py")),
        ],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {path.name: json.loads(path.read_text()) for path in out.iterdir()}


def test_the_suite_runs_on_every_core_with_workers_that_share_nothing(tmp_path: Path) -> None:
    found = run_probe(tmp_path, "-n", "2")
    assert sorted(found) == ["gw0", "gw1"]
    first, second = found["gw0"], found["gw1"]
    for what in ("database", "var_dir", "prefix", "checkpoints"):
        assert first[what] != second[what], what
    assert str(first["database"]).endswith("_gw0")
    assert str(second["database"]).endswith("_gw1")
    assert not set(first["ports"]) & set(second["ports"])  # type: ignore[arg-type]
    # Test-only people get the fast hasher in every worker (tests/support/settings.py).
    assert first["hashers"] == ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_one_process_still_runs_the_suite_with_n_0(tmp_path: Path) -> None:
    found = run_probe(tmp_path, "-n", "0")
    assert list(found) == ["main"]
