"""The webhook payloads are what the JSON Schemas and the OpenAPI document say (issue 32)."""

import json
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from orbit_console.decisions.proposals import proposal_reject
from orbit_console.ledger.api.openapi import document
from orbit_console.notifications.models import Notification
from orbit_console.notifications.payloads import plain, slack
from orbit_console.notifications.schema import PLAIN, SLACK
from tests.notifications.conftest import person, propose


def test_real_payloads_validate_against_the_documented_schemas(namespace: str) -> None:
    author = person(namespace, "operator")
    supervisor = person(namespace, "supervisor")
    proposal = propose(author, namespace)
    proposal_reject(proposal_id=proposal.id, supervisor=supervisor, reason="no <evidence> & more")
    Draft202012Validator.check_schema(PLAIN)
    for notification in Notification.objects.filter(proposal_id=proposal.id):
        for language in ("en", "zh-hans"):
            Draft202012Validator(PLAIN).validate(plain(notification, language))
            Draft202012Validator(SLACK).validate(slack(notification, language))
    rejected = Notification.objects.get(proposal_id=proposal.id, kind="proposal.rejected")
    assert "&lt;evidence&gt; &amp; more" in str(slack(rejected, "en")["blocks"])


def test_the_openapi_document_describes_the_webhook() -> None:
    described: dict[str, Any] = document()
    post = described["webhooks"]["orbitNotification"]["post"]
    headers = {p["name"] for p in post["parameters"]}
    assert headers == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    schemas = described["components"]["schemas"]
    assert schemas["NotificationPayload"]["properties"]["type"]["enum"]
    assert "SlackNotificationPayload" in schemas


def test_the_docs_show_the_schema_the_code_uses() -> None:
    text = (Path(__file__).parents[2] / "docs" / "notifications.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.DOTALL)
    assert PLAIN in [json.loads(block) for block in blocks if '"$schema"' in block]
