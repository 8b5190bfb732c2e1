from pathlib import Path
from typing import Any
import httpx
from tests.console.web import signed_in, review_through_console

def test_scratch(orbit_server: Any, world: dict[str, Any], people: Any, api: httpx.Client) -> None:
    out = Path("/tmp/scratch")
    op = signed_in(orbit_server.url, people["operator"])
    au = signed_in(orbit_server.url, people["auditor"])
    sid, page = review_through_console(op, world["tasks"]["needs_review"])
    (out / "submission.html").write_text(page.text)
    (out / "t_auditor.html").write_text(au.get(f"/tasks/{world['tasks']['needs_review']}").text)
    (out / "t_operator.html").write_text(op.get(f"/tasks/{world['tasks']['needs_review']}").text)
