"""The console's commands, each in a process of its own as a person runs them: ``manage.py
console user`` (people, roles, credentials) and ``manage.py demo`` (the README's first
command, on a fresh SQLite database)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.models import User

from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.lifecycle import credential_issue
from orbit_console.ledger.models import Credential, Namespace, Queue
from orbit_console.lib.secretbox import unseal
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import role_permissions
from tests.console.web import Console, text_of
from tests.support.people import TestPerson
from tests.support.servers import child_env, free_port, run_manage, wait_live

PASSWORD_LINE = re.compile(r"password for (\S+): (\S+)")


def console_user(*args: str) -> subprocess.CompletedProcess[str]:
    return run_manage("console", "user", *args, timeout=120)


def ledger_credential(stored: OrbitCredential) -> Credential:
    return Credential.objects.get(token_hash=hash_token(unseal(stored.token_ciphertext)))


def test_console_user_creates_a_person_with_a_credential_of_their_roles(
    world: dict[str, Any],
) -> None:
    done = console_user("carol", "--role", "operator", "--namespace", world["namespace_id"])

    assert done.returncode == 0, done.stderr
    [(name, password)] = PASSWORD_LINE.findall(done.stdout)
    user = User.objects.get(username="carol")
    assert name == "carol" and user.check_password(password)
    assert set(user.groups.values_list("name", flat=True)) == {"operator"}
    stored = OrbitCredential.objects.get(user=user)
    assert stored.namespace_id == world["namespace_id"]
    assert set(stored.permissions.split()) == role_permissions(frozenset({"operator"}))
    issued = ledger_credential(stored)
    assert (issued.namespace_id, issued.actor_id, issued.revoked_at) == (
        world["namespace_id"],
        stored.actor_id,
        None,
    )
    # The token is stored encrypted and never printed.
    token = unseal(stored.token_ciphertext)
    assert token not in stored.token_ciphertext
    assert token not in done.stdout + done.stderr


def test_console_user_again_changes_the_roles_and_replaces_the_credential(
    world: dict[str, Any],
) -> None:
    namespace = ("--namespace", world["namespace_id"])
    assert console_user("dave", "--role", "operator", *namespace).returncode == 0
    before = OrbitCredential.objects.get(user__username="dave")
    first = ledger_credential(before)

    again = console_user("dave", "--role", "auditor", "--role", "supervisor", *namespace)

    assert again.returncode == 0, again.stderr
    assert PASSWORD_LINE.findall(again.stdout) == []  # an existing person keeps their password
    user = User.objects.get(username="dave")
    assert set(user.groups.values_list("name", flat=True)) == {"auditor", "supervisor"}
    after = OrbitCredential.objects.get(user=user)
    roles = frozenset({"auditor", "supervisor"})
    assert set(after.permissions.split()) == role_permissions(roles)
    first.refresh_from_db()
    assert first.revoked_at is not None  # the old token no longer works
    assert ledger_credential(after).revoked_at is None


def test_console_user_stores_a_token_issued_by_orbit_with_the_scope_the_api_gives(
    world: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 13: the token's namespace, queues, actor and permissions are asked of the API
    (GET /v1/credential) and stored with it, encrypted."""
    reports = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    issued, token = credential_issue(
        namespace=Namespace.objects.get(id=world["namespace_id"]),
        actor_name="erin",
        permissions=["tasks:read", "tasks:audit:read"],
        recovery_access=True,
        queues=[reports],
    )
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")

    done = console_user("erin", "--role", "auditor", "--token-file", str(token_file))

    assert done.returncode == 0, done.stderr
    stored = OrbitCredential.objects.get(user__username="erin")
    assert unseal(stored.token_ciphertext) == token
    assert token not in stored.token_ciphertext
    assert (stored.actor_id, stored.namespace_id, stored.queue_ids, stored.permissions) == (
        issued.actor_id,
        world["namespace_id"],
        reports.id,
        "tasks:audit:read tasks:read",
    )
    assert stored.namespace_name == Namespace.objects.get(id=world["namespace_id"]).name
    assert token not in done.stdout + done.stderr


def test_console_user_refuses_a_token_the_api_refuses_and_stores_nothing(
    world: dict[str, Any], tmp_path: Path
) -> None:
    token = "orb_not-issued-by-this-orbit-0123456789abcdef"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")

    done = console_user("gina", "--role", "auditor", "--token-file", str(token_file))

    assert done.returncode != 0
    assert "the recovery API refused the token: UNAUTHENTICATED" in done.stderr
    assert not User.objects.filter(username="gina").exists()
    assert token not in done.stdout + done.stderr


def test_console_user_with_an_empty_token_file_changes_nothing(
    world: dict[str, Any], tmp_path: Path
) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")

    done = console_user("frank", "--role", "auditor", "--token-file", str(empty))

    assert done.returncode != 0
    assert "the token file is empty" in done.stderr
    assert not User.objects.filter(username="frank").exists()


def test_demo_serves_the_console_with_its_people_until_sigterm(tmp_path: Path) -> None:
    """``uv run manage.py demo`` on a machine with nothing set up: a fresh SQLite database, the
    in-memory channel layer; the printed people can sign in; the audit checkpoint job signs
    the chains' heads; SIGTERM stops everything."""
    checkpoints = tmp_path / "checkpoints"
    # Checkpoints of an earlier demo database: a new demo world sets them aside.
    checkpoints.mkdir()
    (checkpoints / "00000001.json").write_text("{}")
    demo, port, output = start_demo(tmp_path)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_live(base_url, demo)
        printed = output.read_text()
        passwords = dict(re.findall(r"^\s+(\w+)\s+password (\S+)", printed, re.MULTILINE))
        assert set(passwords) == {"operator", "supervisor", "auditor"}, printed
        for name, password in passwords.items():
            person = TestPerson(name, password, User(username=name), frozenset({name}))
            with Console(base_url).sign_in(person) as console:
                queue = console.get("/")
                assert queue.status_code == 200
                assert "NEEDS_REVIEW" in text_of(queue.text)
        [aside] = tmp_path.glob("checkpoints.before-*")
        assert (aside / "00000001.json").read_text() == "{}"
        deadline = time.monotonic() + 60
        while not (checkpoints / "00000001.json").exists():
            assert time.monotonic() < deadline, "the demo's checkpoint job wrote nothing"
            time.sleep(0.2)
    finally:
        demo.send_signal(signal.SIGTERM)
        code = demo.wait(timeout=60)
    assert code == 0, output.read_text()
    assert "Orbit Console demo stopped." in output.read_text()
    assert_port_closed(port)


def start_demo(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    """``manage.py demo`` on a free port, with a SQLite database and the checkpoint directory
    ``checkpoints`` in ``tmp_path``, in a process group of its own (as a terminal's foreground
    job is): the process, its port and the file of its output."""
    port = free_port()
    env = child_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        ORBIT_AUDIT_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
    )
    env.pop("REDIS_URL", None)
    output = tmp_path / "demo.out"
    with output.open("w") as out:
        demo = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--port", str(port)],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return demo, port, output


def assert_port_closed(port: int) -> None:
    """Nothing the demo started still serves: daphne was stopped with it."""
    try:
        httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=2)
    except httpx.TransportError:
        return
    raise AssertionError(f"something still answers on port {port}")


def test_the_documented_console_user_commands_work_as_written_against_the_demo(
    tmp_path: Path,
) -> None:
    """Issue 15: ``console user sup2 --role supervisor``, as docs/console.md writes it, failed
    against the demo ("pass --namespace"): the demo's ledger has several namespaces. Without
    ``--namespace`` the credential is now minted where the console's people work (the demo's
    namespace, said on stderr); ``--namespace`` takes a name as well as an id; with nothing to
    go by, the error lists the namespaces."""
    env = child_env(DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}")
    env.pop("REDIS_URL", None)
    prepared = run_manage("demo", "--no-serve", env=env, timeout=180)
    assert prepared.returncode == 0, prepared.stderr

    supervisor = run_manage("console", "user", "sup2", "--role", "supervisor", env=env)
    assert supervisor.returncode == 0, supervisor.stderr
    assert "in namespace 'Orbit demo namespace'" in supervisor.stderr, supervisor.stderr
    by_name = run_manage(
        "console",
        "user",
        "aud2",
        "--role",
        "auditor",
        "--namespace",
        "Orbit demo namespace",
        env=env,
    )
    assert by_name.returncode == 0, by_name.stderr
    unknown = run_manage(
        "console", "user", "op2", "--role", "operator", "--namespace", "no such", env=env
    )
    assert unknown.returncode != 0 and "no namespace 'no such'" in unknown.stderr

    listed = run_manage(
        "shell",
        "-c",
        "import json; from orbit_console.people.models import OrbitCredential as C; "
        "print(json.dumps({c.user.username: c.namespace_id for c in C.objects.all()}))",
        env=env,
    )
    assert listed.returncode == 0, listed.stderr
    held = json.loads(listed.stdout.strip().splitlines()[-1])
    assert held["sup2"] == held["aud2"] == held["operator"], held


def test_the_demo_prints_its_people_last_and_stops_on_ctrl_c_without_a_traceback(
    tmp_path: Path,
) -> None:
    """Issue 30: the demo's table of people scrolled away under the checkpoint job's lines, and
    Ctrl-C (SIGINT to the terminal's whole foreground group) printed a traceback per child."""
    checkpoints = tmp_path / "checkpoints"
    demo, port, output = start_demo(tmp_path)
    try:
        wait_live(f"http://127.0.0.1:{port}", demo)
        deadline = time.monotonic() + 60
        while not (checkpoints / "00000001.json").exists() or "ready at" not in (
            output.read_text()
        ):
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(0.2)
        printed = output.read_text()
        assert "checkpoint 1 written" not in printed, printed
        last = printed[printed.rindex("ready at") :]
        assert re.findall(r"^\s+(\w+)\s+password", last, re.MULTILINE) == [
            "operator",
            "supervisor",
            "auditor",
        ], printed
    finally:
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C
        code = demo.wait(timeout=60)
    printed = output.read_text()
    assert code == 0, printed
    assert "Traceback" not in printed and "KeyboardInterrupt" not in printed, printed
    assert printed.rstrip().endswith("Orbit Console demo stopped."), printed
    assert_port_closed(port)


def test_console_signout_ends_every_session_of_the_person_at_once(
    orbit_server: Any, people: dict[str, TestPerson]
) -> None:
    """Issue 31: an administrator ends a person's sessions; their next request is signed out,
    another person's session stays."""
    operator, supervisor = people["operator"], people["supervisor"]
    with (
        Console(orbit_server.url).sign_in(operator) as first,
        Console(orbit_server.url).sign_in(operator) as second,
        Console(orbit_server.url).sign_in(supervisor) as bystander,
    ):
        assert first.get("/").status_code == 200
        done = run_manage("console", "signout", operator.username, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "2 session(s) ended" in done.stderr
        for console in (first, second):
            refused = console.get("/")
            assert refused.status_code == 302
            assert refused.headers["location"].startswith("/signin")
        assert bystander.get("/").status_code == 200
    unknown = run_manage("console", "signout", "nobody-of-that-name", timeout=120)
    assert unknown.returncode != 0
    assert "no person named" in unknown.stderr


def test_an_administrator_ends_every_session_of_a_person_from_their_page(
    orbit_server: Any, people: dict[str, TestPerson]
) -> None:
    """Issue 31: the person's page, for administrators (superusers), says how many sessions
    they have open and ends them all; for anyone else it is refused."""
    operator = people["operator"]
    password = "an administrator's long password"
    admin = User.objects.create_superuser(f"admin-{operator.username}", password=password)
    administrator = TestPerson(
        username=admin.username, password=password, user=admin, roles=frozenset()
    )
    page = f"/people/{operator.username}"
    with (
        Console(orbit_server.url).sign_in(operator) as first,
        Console(orbit_server.url).sign_in(operator) as second,
        Console(orbit_server.url).sign_in(administrator) as console,
    ):
        assert first.get(page).status_code == 403
        shown = console.get(page)
        assert shown.status_code == 200
        assert "2" in text_of(shown.text.split('id="person-sessions"')[1].split("</dd>")[0])
        ended = console.post(
            f"{page}/signout", data=[("csrfmiddlewaretoken", console.csrf_token())]
        )
        assert ended.status_code == 302
        for person_console in (first, second):
            assert person_console.get("/").status_code == 302
        assert console.get(page).status_code == 200  # the administrator's session stays
