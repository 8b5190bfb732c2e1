"""The result events become the task event log the event stream reads (docs/events.md): every
acceptance, parking, completion and recovery operation, each naming its queue and the audit
record of the operation that caused it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ledger", "0004_audit_created_at")]

    operations = [
        migrations.RenameModel("ResultEvent", "TaskEvent"),
        migrations.AddField(
            model_name="taskevent",
            name="queue_id",
            field=models.CharField(default="", max_length=32),
        ),
        migrations.AddField(
            model_name="taskevent",
            name="audit_id",
            field=models.CharField(default="", max_length=32),
        ),
        migrations.AddField(
            model_name="taskevent",
            name="detail",
            field=models.TextField(default="{}"),
        ),
    ]
