"""The result events become the task event log the event stream reads (docs/events.md): every
acceptance, parking and completion, each naming its queue and the operation (and its audit
record) that caused it."""

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
            name="operation",
            field=models.CharField(default="", max_length=64),
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
