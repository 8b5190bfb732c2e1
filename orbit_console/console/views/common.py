"""What every console view needs: the person, a client acting as them, and rendering that
is safe to call from async views."""

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from orbit_console.client import OrbitClient, OrbitError, OutcomeUnknown, Task
from orbit_console.console.views.drafts import remember_owner, sign_in_again
from orbit_console.ops.sessions import touch
from orbit_console.people.access import require_task_access
from orbit_console.people.person import Person, load_person, orbit_client, role_permissions
from orbit_console.signin import recheck
from orbit_console.signin.session import KEY as OIDC_SESSION

_answers = logging.getLogger("orbit_console.console.answers")

AsyncView = Callable[..., Any]  # async views; django-stubs types views as sync only


class ConsoleRequest(HttpRequest):
    person: Person


def console_view(view: AsyncView) -> AsyncView:
    """Sign-in required (else to the sign-in page, as ``login_required``, keeping the typed
    fields of a view marked ``keeps_draft``); the user and ``request.person`` are resolved once,
    in one hop to the sync thread, so that templates never touch the database lazily from the
    event loop. The person's request moves their session's idle end."""

    @wraps(view)
    async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        person = await sync_to_async(_signed_in)(request)
        if person is None:
            # Without a session: a form with typed text is kept for later (views/drafts.py).
            return await sync_to_async(sign_in_again)(request, view, kwargs)
        request.user = person.user
        request.person = person  # type: ignore[attr-defined]
        response = await _serve(view, request, *args, **kwargs)
        await remember_owner(request, response, person.user)
        return response

    return wrapper


def _what_to_ask_for(request: HttpRequest) -> dict[str, Any]:
    """A person with no credential, against an external Orbit: exactly what to ask an
    administrator for — a token for them, in the namespaces their company groups name, with
    the permissions of their roles, enrolled with ``console user`` (docs/sign-in.md)."""
    person: Person = request.person  # type: ignore[attr-defined]
    company = request.session.get(OIDC_SESSION)
    namespaces = company.get("namespaces", []) if isinstance(company, dict) else []
    return {
        "problem": "credential",
        "ask_username": person.name,
        "ask_roles": sorted(person.roles),
        "ask_permissions": sorted(role_permissions(person.roles)),
        "ask_namespaces": namespaces,
        "ask_command": " ".join(
            [
                "manage.py console user",
                person.name,
                *(f"--role {role}" for role in sorted(person.roles)),
                "--token-file PATH",
            ]
        ),
    }


async def _serve(view: AsyncView, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    try:
        response: HttpResponse = await view(request, *args, **kwargs)
        return response
    except NoCredentialError:
        return await arender(
            request, "console/api_problem.html", _what_to_ask_for(request), status=403
        )
    except OrbitError as error:
        # The API's 400 answers what the browser asked for (a cursor, a filter): the
        # browser's mistake is a 400 here too, not a failure of the console (502).
        status = {400: 400, 404: 404, 401: 403, 403: 403}.get(error.status, 502)
        context = {"problem": "error", "error": error}
        return await arender(request, "console/api_problem.html", context, status=status)
    except OutcomeUnknown as unknown:
        context = {"problem": "unavailable", "unknown": unknown}
        return await arender(request, "console/api_problem.html", context, status=503)


# A request the page made on its own (a live part refreshing, a catch-up after a reconnect):
# not the person's activity, so it does not keep an idle session alive (static/js/console.js).
BACKGROUND_HEADER = "Orbit-Background"


def _signed_in(request: HttpRequest) -> Person | None:
    if not recheck.confirmed(request):  # a company sign-in due for its re-check at the provider
        return None
    person = load_person(get_user(request))
    if person is not None and not request.headers.get(BACKGROUND_HEADER):
        touch(request.session)  # the person's request: the idle end moves (ops/sessions.py)
    return person


def requires_role(*roles: str) -> Callable[[AsyncView], AsyncView]:
    """Refuse (403) people who hold none of ``roles``: checked on the server for every request,
    whatever the page showed."""

    def decorate(view: AsyncView) -> AsyncView:
        @wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            person: Person = request.person  # type: ignore[attr-defined]
            if not person.roles & set(roles):
                raise PermissionDenied
            return await view(request, *args, **kwargs)

        return wrapper

    return decorate


async def arender(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """``render`` from an async view: templates read the session (messages, CSRF) and may touch
    the database, which Django only allows from sync code."""
    response = await sync_to_async(render)(request, template, context, status=status)
    if 400 <= status < 500:
        # A page that answers a person's input with what to correct (a form's errors, a
        # decision no longer possible) is the console working, not a fault: Django would log
        # every such answer as a WARNING line; it is an INFO line instead (issue 30).
        _answers.info(
            "Answered with corrections: %s %s (%s)",
            request.method,
            request.path,
            status,
            extra={"status_code": status},
        )
        response._has_been_logged = True  # type: ignore[attr-defined] # django.utils.log
    return response


async def task_client(request: HttpRequest, task_id: str) -> OrbitClient:
    """A client acting as the person with the credential that reads ``task_id``. With one
    credential, that one: the API's own 404 then stands for a task it cannot read, as for one
    that does not exist. With several, the one the API allows (``console/access.py``)."""
    person: Person = request.person  # type: ignore[attr-defined]
    if not person.credentials:
        raise NoCredentialError
    if len(person.credentials) == 1:
        return orbit_client(person.credentials[0])
    return orbit_client(await require_task_access(person, task_id))


class NoCredentialError(Exception):
    pass


async def task_now(
    request: HttpRequest, task_id: str, *, read: Task | None = None
) -> tuple[Task | None, str | None]:
    """The task as it is now, read as this person, beside a submission or a proposal: the task
    or, when the API did not answer, why not. A task the person's credential cannot read raises
    (404: the submission or proposal about it is not found either). ``read``: the task as the
    access check of this request has just read it (``access.require_task_read``)."""
    if read is not None:
        return read, None
    try:
        async with await task_client(request, task_id) as orbit:
            return await orbit.get_task(task_id), None
    except OutcomeUnknown as unknown:
        return None, str(unknown)


# --- A decision that was not recorded (issue 15) ----------------------------------------------

_SET_ASIDE = "orbit.set_aside."


async def set_aside(request: HttpRequest, standing_id: str, body: str) -> None:
    """Keep, for this person's session, the decision they made that was not recorded because
    ``standing_id`` (a submission or proposal for the same task revision) came first: its page
    shows it beside the one that stands."""
    await request.session.aset(_SET_ASIDE + standing_id, body)


async def kept_decision(request: HttpRequest, standing_id: str) -> str | None:
    """The body of the person's decision set aside for ``standing_id``, if there is one."""
    body: str | None = await request.session.aget(_SET_ASIDE + standing_id)
    return body


async def set_aside_context(
    request: HttpRequest,
    standing_id: str,
    *,
    action: str,
    standing_body: str,
    standing_by: str,
    task_id: str,
    revision: str,
) -> dict[str, Any]:
    """What ``console/partials/set_aside.html`` shows on the standing decision's page: nothing
    unless this person's decision was set aside for it."""
    mine = await kept_decision(request, standing_id)
    if mine is None:
        return {}
    return {
        "set_aside": mine,
        "set_aside_of": standing_id,
        "set_aside_action": action,
        "standing_body": standing_body,
        "standing_by": standing_by,
        # The person's own earlier decision (another tab, a double send): "You", not their name.
        "standing_is_mine": standing_by == request.user.get_username(),
        "task_id": task_id,
        "revision": revision,
    }
