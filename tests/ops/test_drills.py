"""Fast subsets of the drills of issue 34 (the drills themselves: ``bench/drills/``, their
figures: docs/reliability.md).

Credential rotation: the moment of a rolling rotation when one console replica already signs
with the new keys and the other still signs with the old ones (both accepting both). A person
signed in on one walks a wizard on the other, confirms on the first and opens pages on both:
never sent to sign in, the decision applied once; then ``keys reseal`` leaves the old token key
needed by nothing. The full drill restarts two replicas, the reconciler and the API three times
under load: ``bench/drills/rotation.py``.

Every drill's run names what it makes on shared servers after itself (issue 41)."""

import io
import json
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout, suppress
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.conf import settings as django_settings
from django.core.management import call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.ledger.models import OperationAudit
from orbit_console.lib import secretbox
from tests.console.web import Console, review_values, wizard_submit, wizard_to_confirm
from tests.support.people import make_person
from tests.support.servers import DaphneServer
from tests.support.threads import at_once

SIGNED_OUT = "/signin"


@pytest.fixture
def old_token_key(settings: SettingsWrapper) -> Iterator[str]:
    """The test run's people get tokens sealed under this key (the "old" one)."""
    key = Fernet.generate_key().decode()
    settings.ORBIT_TOKEN_KEYS = [key]
    yield key


def signed_in_on(console: Console, url: str, path: str) -> bool:
    console.http.base_url = url
    page = console.get(path)
    return not (page.status_code in (302, 303) and SIGNED_OUT in page.headers.get("location", ""))


def test_mid_rotation_two_replicas_with_different_keys_keep_people_signed_in_and_decide(
    settings: SettingsWrapper, old_token_key: str, world: dict[str, Any], live_db: None
) -> None:
    old_secret = django_settings.SECRET_KEY
    new_secret, new_token_key = secrets.token_urlsafe(50), Fernet.generate_key().decode()
    common = {"CONSOLE_REVIEW_APPROVAL": "off", "CONSOLE_RETRY_APPROVAL": "off"}
    accepting = DaphneServer(
        "rotation-accept",
        env={
            **common,
            "SECRET_KEY": old_secret,
            "SECRET_KEY_FALLBACKS": new_secret,
            "ORBIT_TOKEN_KEYS": f"{old_token_key},{new_token_key}",
        },
    )
    using = DaphneServer(
        "rotation-use",
        env={
            **common,
            "SECRET_KEY": new_secret,
            "SECRET_KEY_FALLBACKS": old_secret,
            "ORBIT_TOKEN_KEYS": f"{new_token_key},{old_token_key}",
        },
    )
    operator = make_person(world, "operator")
    task_id = world["tasks"]["needs_review"]
    try:
        at_once(DaphneServer.start, [accepting, using])
        with Console(using.url) as console:
            console.sign_in(operator)  # signed in under the new SECRET_KEY
            console.http.base_url = accepting.url  # the wizard on the replica of the old one
            confirm = wizard_to_confirm(console, task_id, "review", review_values())
            console.http.base_url = using.url
            sent = wizard_submit(console, task_id, "review", confirm.text)
            assert sent.status_code == 303, sent.text
            assert sent.headers["location"].startswith("/submissions/")
            for url in (accepting.url, using.url, accepting.url):
                assert signed_in_on(console, url, "/"), f"sent to sign in on {url}"
    finally:
        accepting.stop()
        using.stop()
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1

    settings.ORBIT_TOKEN_KEYS = [new_token_key, old_token_key]
    with suppress(SystemExit):  # exit 1 when other tests' rows open with no key set here
        call_command("keys", "reseal", stdout=io.StringIO())
    out = io.StringIO()
    with redirect_stdout(out), suppress(SystemExit):  # exit 1 while anything needs an old key
        call_command("keys", "retire-check", "--json", stdout=out)
    report = json.loads(out.getvalue())
    old = next(k for k in report["keys"] if k["key_id"] == secretbox.key_id(old_token_key))
    assert old["retirable"], old


NAMES_OF_A_RUN = """
import json, sys
sys.path[:0] = ["bench/drills", "bench"]
import common
from bench import faults
url = "mysql://root@127.0.0.1:3306/orbit_kube_drill_backup"
print(json.dumps([
    common.run_database_url(url), common.run_database_url(url, "restored"),
    faults.RIG_USER, common.os.environ["REDIS_CHANNEL_PREFIX"], str(common.run_dir("backup")),
]))
"""


def test_two_runs_of_a_drill_name_what_they_make_on_shared_servers_apart() -> None:
    """Issue 41: every drill used fixed database and user names (``drill_backup``,
    ``orbit_faults``), so two drills on one MariaDB dropped each other's database and user.
    Each run now names its databases, its database user, its channel layer's keys and its
    files after itself."""
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", NAMES_OF_A_RUN],
            cwd=django_settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        runs.append(json.loads(done.stdout))
    for first, second in zip(*runs, strict=True):
        assert first != second
    live, restored, user, prefix, folder = runs[0]
    name = live.rsplit("/", 1)[1]
    assert re.fullmatch(r"orbit_kube_drill_backup_[0-9a-f]{8}", name)
    assert restored.endswith(f"/{name}_restored")
    assert len(user) <= 32  # MySQL's longest user name
    assert prefix.startswith("drill-")
    for made in (folder, runs[1][4]):
        Path(made).rmdir()
