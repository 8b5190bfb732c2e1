from typing import Any

from django.db import migrations, models

from orbit_console.lib import strictjson
from orbit_console.lib.appendonly import append_only, lift_append_only
from orbit_console.lib.rfc3339 import format_utc


def old_content(record: Any) -> dict[str, Any]:
    """What the plain SHA-256 links of 0001 covered (frozen here)."""
    return {
        "id": record.id,
        "namespace_id": record.namespace_id,
        "task_id": record.task_id,
        "seq": record.seq,
        "operation_id": record.operation_id,
        "actor_id": record.actor_id,
        "action": record.action,
        "reason": record.reason,
        "evidence_ref": record.evidence_ref,
        "before": strictjson.loads(record.before),
        "after": strictjson.loads(record.after),
        "created_at": format_utc(record.created_at),
        "prev_hash": record.prev_hash,
    }


def relink_under_the_key(apps: Any, schema_editor: Any) -> None:
    from orbit_console.ledger.chain import entry_hash
    from orbit_console.lib.keyset import ascending
    from orbit_console.lib.relink import relink

    audits = apps.get_model("ledger", "OperationAudit").objects

    def save(record: Any) -> None:
        audits.filter(id=record.id).update(
            prev_hash=record.prev_hash, key_id=record.key_id, entry_hash=record.entry_hash
        )

    relink(
        ascending(audits.all(), ("task_id", "seq")),
        chain_of=lambda record: f"of task {record.task_id}",
        old_content=old_content,
        new_hash=entry_hash,
        save=save,
    )


class Migration(migrations.Migration):
    """The operation audit's links become HMACs under the audit key (lib/auditkeys.py)."""

    dependencies = [("ledger", "0002_operation_audit_append_only")]

    operations = [
        lift_append_only("ledger_operationaudit"),
        migrations.AddField(
            model_name="operationaudit",
            name="key_id",
            field=models.CharField(default="", max_length=16),
        ),
        migrations.RunPython(relink_under_the_key, migrations.RunPython.noop),
        append_only("ledger_operationaudit"),
    ]
