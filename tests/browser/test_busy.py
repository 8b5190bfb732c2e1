"""A console process past its bound (issue 34, capacity), as a person sees it: the page they
open is the styled "The console is busy" page, with how long to wait and the request id; once
the process has room again, the same page opens.

The process (``CONSOLE_MAX_IN_FLIGHT=1``) reaches its own recovery API through a TCP proxy
that the test makes stop answering: a request of the person's that calls the API then stays in
flight, and holds the one place."""

import threading
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import sign_in
from tests.support.people import TestPerson
from tests.support.proxy import TcpProxy
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser


def test_a_person_past_the_bound_sees_the_busy_page_and_then_the_page(
    page: Page, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    server = DaphneServer(
        "console-busy",
        env={
            "CONSOLE_MAX_IN_FLIGHT": "1",
            "CONSOLE_SHED_RETRY_AFTER_SECONDS": "2",
            "ORBIT_API_TIMEOUT_SECONDS": "60",
        },
    )
    proxy = TcpProxy(("127.0.0.1", server.port))
    server.extra_env["ORBIT_EMBEDDED_API_URL"] = f"http://127.0.0.1:{proxy.port}"
    held: list[int] = []
    try:
        server.start()
        sign_in(page, server, people["operator"])
        cookies = {c["name"]: c["value"] for c in page.context.cookies()}
        proxy.set_mode("hang")

        def stay_in_flight() -> None:  # the person's other tab: a task page, which asks the API
            answer = httpx.get(
                f"{server.url}/tasks/{world['tasks']['failed']}", cookies=cookies, timeout=60
            )
            held.append(answer.status_code)

        other_tab = threading.Thread(target=stay_in_flight)
        other_tab.start()
        # Once its view waits on the API, the other tab's request holds the one place.
        for _ in range(100):
            if httpx.get(f"{server.url}/signin", timeout=10).status_code == 503:
                break
            page.wait_for_timeout(100)
        # A part of the page asked again (the work queue's filter): turned away, and said so.
        expect(page.locator("#busy-note")).to_be_hidden()
        page.locator("form.filters select[name=state]").select_option(index=1)
        expect(page.locator("#busy-note")).to_be_visible()
        expect(page.locator("#busy-note")).to_contain_text("The console is busy")
        # A page opened: the busy page.
        busy = page.goto(f"{server.url}/")
        assert busy is not None and busy.status == 503
        assert busy.headers["retry-after"] == "2"
        expect(page).to_have_title("The console is busy · Orbit Console")
        expect(page.locator("h1")).to_have_text("The console is busy")
        expect(page.locator("#busy")).to_contain_text("Nothing was done with it.")
        expect(page.locator("#busy")).to_contain_text("Try again in 2 seconds.")
        expect(page.locator("#request-id")).to_have_text(busy.headers["x-request-id"])
        # Styled: the console's stylesheet is applied (the top bar is laid out as a bar).
        assert page.locator("header.topbar").evaluate("e => getComputedStyle(e).display") == "flex"
        proxy.set_mode("pass")
        other_tab.join(timeout=60)
        assert held and held[0] == 200
        page.reload()
        expect(page.locator("header .who")).to_contain_text(people["operator"].username)
    finally:
        proxy.set_mode("pass")
        server.stop()
        proxy.close()
