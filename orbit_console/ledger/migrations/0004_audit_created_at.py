"""Audit checkpoints find the chains that moved since the last one by the records' time."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ledger", "0003_audit_key_id")]

    operations = [
        migrations.AddIndex(
            model_name="operationaudit",
            index=models.Index(fields=["created_at"], name="audit_created"),
        ),
    ]
