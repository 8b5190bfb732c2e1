"""Every command that takes a namespace resolves it the same way (issue 41, item 3): by its id
or its exact name, as ``console user`` does; an unknown or ambiguous one stops the command with
exit status 1 and changes nothing. Before, ``notify webhook add "Orbit demo namespace" URL`` and
``evidence set "Orbit demo namespace" …`` stored the name as the id (nothing was ever delivered
or checked), ``evidence show <anything>`` answered "no policy", and ``events``, ``orbit`` took
ids only. What was stored under a name is marked where it is listed, and how it goes is said."""

import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from orbit_console.decisions.models import EvidencePolicy
from orbit_console.events.models import Subscription
from orbit_console.feed.models import Source
from orbit_console.insight.models import Objective, StallAlarm
from orbit_console.ledger.lifecycle import namespace_create
from orbit_console.ledger.models import Credential, Namespace
from orbit_console.lib.ids import new_id
from orbit_console.lib.namespaces import NamespaceNotFound
from orbit_console.notifications.models import Endpoint
from orbit_console.notifications.webhooks import endpoint_add
from orbit_console.people.models import OrbitCredential

HOOK = "http://127.0.0.1/hook"
NS = "{namespace}"

# Every command of every app that takes a namespace (grep management/commands for it).
COMMANDS: dict[str, list[str]] = {
    "notify webhook add": ["notify", "webhook", "add", NS, HOOK],
    "notify webhook list": ["notify", "webhook", "list", "--namespace", NS],
    "evidence set": ["evidence", "set", NS, "--pattern", r"INC-(\d+)", "--example", "INC-1"],
    "evidence show": ["evidence", "show", NS],
    "evidence clear": ["evidence", "clear", NS],
    "events subscribe": ["events", "subscribe", "--namespace", NS, "--name", "s"],
    "events list": ["events", "list", "--namespace", NS],
    "orbit credential": [
        *("orbit", "credential", "--actor", "a", "--namespace", NS),
        *("--permission", "tasks:read"),
    ],
    "orbit work": ["orbit", "work", "--namespace", NS],
    "feed add": ["feed", "add", "--namespace", NS],
    "console user --namespace": ["console", "user", "u", "--role", "auditor", "--namespace", NS],
    "console user --drop-namespace": [
        *("console", "user", "u", "--role", "auditor", "--drop-namespace", NS)
    ],
    "console objective": ["console", "objective", NS, "--decide-within", "4h"],
    "console objective --stall-after": ["console", "objective", NS, "--stall-after", "2h"],
}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def command(name: str, namespace: str) -> list[str]:
    person = f"person-{new_id()[:12]}"
    return [
        namespace if arg == NS else person if (arg == "u" and name.startswith("console")) else arg
        for arg in COMMANDS[name]
    ]


def written() -> tuple[int, ...]:
    """What the commands write, counted."""
    models: list[Any] = [
        *(Endpoint, EvidencePolicy, Subscription, Credential, OrbitCredential),
        *(Objective, StallAlarm),
    ]
    return (
        *(model.objects.count() for model in models),
        User.objects.count(),
        Source.objects.count(),
    )


@pytest.fixture
def team(live_db: None, settings: Any) -> Namespace:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return namespace_create(name=f"Team {new_id()}")[0]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_unknown_namespace_stops_every_command_and_writes_nothing(
    name: str, team: Namespace
) -> None:
    before = written()
    typo = team.name.lower()
    with pytest.raises(NamespaceNotFound, match=f"no namespace '{typo}'") as refused:
        run(*command(name, typo))
    assert f"did you mean '{team.name}' ({team.id})" in str(refused.value)
    assert refused.value.returncode == 1
    assert written() == before


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_name_two_namespaces_share_stops_every_command(name: str, team: Namespace) -> None:
    twin = namespace_create(name=team.name)[0]
    before = written()
    with pytest.raises(NamespaceNotFound, match="several namespaces are named") as refused:
        run(*command(name, team.name))
    assert team.id in str(refused.value) and twin.id in str(refused.value)
    assert written() == before


def test_the_namespaces_name_does_what_its_id_does(team: Namespace) -> None:
    """Issue 41's commands, as an administrator types them: by the name the pages show."""
    endpoint_id = run("notify", "webhook", "add", team.name, HOOK).split()[0]
    assert Endpoint.objects.get(id=endpoint_id).namespace_id == team.id
    assert f"{endpoint_id} {team.id} {HOOK}" in run(*command("notify webhook list", team.name))

    shown = run(*command("evidence set", team.name))
    assert EvidencePolicy.objects.get(namespace_id=team.id).pattern == r"INC-(\d+)"
    assert shown.startswith(f"'{team.name}' ({team.id}): pattern INC-(\\d+)")
    assert "INC-(\\d+)" in run("evidence", "show", team.id)
    run("evidence", "clear", team.name)
    assert run("evidence", "show", team.name) == f"'{team.name}' ({team.id}): no policy\n"

    subscription_id = run(*command("events subscribe", team.name)).strip()
    assert Subscription.objects.get(id=subscription_id).namespace_id == team.id
    assert subscription_id in run(*command("events list", team.name))

    run(*command("orbit credential", team.name))
    assert Credential.objects.filter(namespace=team, actor_name="a").count() == 1

    person = f"person-{new_id()[:12]}"
    run("console", "user", person, "--role", "auditor", "--namespace", team.name)
    assert OrbitCredential.objects.get(user__username=person).namespace_id == team.id
    run("console", "user", person, "--role", "auditor", "--drop-namespace", team.name)
    assert not OrbitCredential.objects.filter(user__username=person).exists()

    assert f"'{team.name}' ({team.id})" in run("console", "namespaces")


def stray_endpoint(namespace_id: str) -> Endpoint:
    """An endpoint as ``notify webhook add NAME URL`` kept it before: the name as the id."""
    return endpoint_add(namespace_id=namespace_id, url=HOOK, event_types=[])[0]


def test_endpoints_kept_under_a_name_are_marked_where_they_are_listed(team: Namespace) -> None:
    stray = stray_endpoint(team.name)
    meant = run("notify", "webhook", "add", team.name, HOOK).split()[0]

    listed = run("notify", "webhook", "list", "--namespace", team.name).splitlines()
    lines: dict[str, str] = {line.split()[0]: line for line in listed}
    assert set(lines) == {stray.id, meant}
    assert "UNKNOWN NAMESPACE: hears nothing" in lines[stray.id]
    assert "UNKNOWN" not in lines[meant]
    everything = run("notify", "webhook", "list")
    assert f"{stray.id} {team.name} {HOOK}" in everything and "UNKNOWN NAMESPACE" in everything

    # Kept under a text that names nothing at all: listed, marked, and still an error.
    lost = stray_endpoint(f"lost {new_id()}")
    out = io.StringIO()
    with pytest.raises(NamespaceNotFound):
        call_command("notify", "webhook", "list", "--namespace", lost.namespace_id, stdout=out)
    assert lost.id in out.getvalue() and "UNKNOWN NAMESPACE" in out.getvalue()


def test_policies_kept_under_a_name_are_marked_and_replaced_by_setting_again(
    team: Namespace,
) -> None:
    def stray(key: str) -> EvidencePolicy:
        return EvidencePolicy.objects.create(
            namespace_id=key, pattern="INC-1", example="INC-1", updated_at=team.created_at
        )

    stray(team.name)
    assert "UNKNOWN NAMESPACE: checks nothing" in run("evidence", "show")
    assert "UNKNOWN NAMESPACE" in run("evidence", "show", team.name)

    # The same command again, as the administrator first typed it, now sets it where it holds.
    run(*command("evidence set", team.name))
    assert set(EvidencePolicy.objects.filter(namespace_id__in=[team.id, team.name])) == {
        EvidencePolicy.objects.get(namespace_id=team.id)
    }

    lost = stray(f"lost {new_id()}").namespace_id
    out = io.StringIO()
    with pytest.raises(NamespaceNotFound):
        call_command("evidence", "show", lost, stdout=out)
    assert "UNKNOWN NAMESPACE" in out.getvalue()
    assert "cleared" in run("evidence", "clear", lost)
    assert not EvidencePolicy.objects.filter(namespace_id=lost).exists()


def test_against_an_external_orbit_the_namespaces_are_those_the_console_knows(
    team: Namespace, settings: Any
) -> None:
    """No ledger to ask: the namespaces of the console's people's credentials (named as the API
    named them) and those the deployment names."""
    settings.ORBIT_API_EMBEDDED = False
    external, configured = new_id(), new_id()
    settings.CONSOLE_NAMESPACE_NAMES = {configured: f"Configured {configured}"}
    user = User.objects.create_user(username=f"ext-{new_id()[:12]}")
    OrbitCredential.objects.create(
        user=user, token_ciphertext="-", namespace_id=external, namespace_name=f"Ext {external}"
    )

    run("evidence", "set", f"Ext {external}", "--pattern", "INC-1", "--example", "INC-1")
    run("evidence", "set", f"Configured {configured}", "--pattern", "INC-1", "--example", "INC-1")
    assert EvidencePolicy.objects.filter(namespace_id__in=[external, configured]).count() == 2
    with pytest.raises(NamespaceNotFound):
        run("evidence", "set", team.id, "--pattern", "INC-1", "--example", "INC-1")
