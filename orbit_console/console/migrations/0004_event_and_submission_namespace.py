from django.db import migrations, models

from orbit_console.lib.appendonly import append_only, lift_append_only

# Adding a column rebuilds the table on SQLite, which would drop its triggers with it: they are
# lifted for the change and created again after it. Existing rows keep an empty namespace.


class Migration(migrations.Migration):
    dependencies = [("console", "0003_proposal_namespace_id")]

    operations = [
        lift_append_only("console_consoleevent"),
        migrations.AddField(
            model_name="consoleevent",
            name="namespace_id",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="submission",
            name="namespace_id",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddIndex(
            model_name="consoleevent",
            index=models.Index(
                fields=["namespace_id", "created_at", "id"], name="console_event_namespace"
            ),
        ),
        append_only("console_consoleevent"),
    ]
