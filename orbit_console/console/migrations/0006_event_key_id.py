from typing import Any

from django.db import migrations, models

from orbit_console.lib.appendonly import append_only, lift_append_only
from orbit_console.lib.rfc3339 import format_utc


def old_content(event: Any) -> dict[str, Any]:
    """What the plain SHA-256 links of 0001-0005 covered (frozen here)."""
    content = {
        "id": event.id,
        "seq": event.seq,
        "kind": event.kind,
        "task_id": event.task_id,
        "queue_id": event.queue_id,
        "submission_id": event.submission_id or "",
        "proposal_id": event.proposal_id or "",
        "actor_id": event.actor_id or 0,
        "note": event.note,
        "created_at": format_utc(event.created_at),
        "prev_hash": event.prev_hash,
    }
    if event.namespace_id:
        content["namespace_id"] = event.namespace_id
    return content


def relink_under_the_key(apps: Any, schema_editor: Any) -> None:
    from orbit_console.decisions.chain import CONSOLE_CHAIN, entry_hash
    from orbit_console.lib.keyset import ascending
    from orbit_console.lib.relink import relink

    events = apps.get_model("console", "ConsoleEvent").objects
    heads = apps.get_model("console", "ChainHead").objects

    def save(event: Any) -> None:
        events.filter(id=event.id).update(
            prev_hash=event.prev_hash, key_id=event.key_id, entry_hash=event.entry_hash
        )

    last = relink(
        ascending(events.all(), ("seq",)),
        chain_of=lambda event: "of the console's record",
        old_content=old_content,
        new_hash=entry_hash,
        save=save,
    )
    if last:
        heads.filter(name=CONSOLE_CHAIN).update(last_hash=last["of the console's record"])


class Migration(migrations.Migration):
    """The console record's links become HMACs under the audit key (lib/auditkeys.py)."""

    dependencies = [("console", "0005_credential_queue_ids")]

    operations = [
        lift_append_only("console_consoleevent"),
        migrations.AddField(
            model_name="consoleevent",
            name="key_id",
            field=models.CharField(default="", max_length=16),
        ),
        migrations.RunPython(relink_under_the_key, migrations.RunPython.noop),
        append_only("console_consoleevent"),
    ]
