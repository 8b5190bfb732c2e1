from django.db import migrations, models

from orbit_console.lib.appendonly import append_only, lift_append_only

# Adding a column with a default rebuilds the table on SQLite, which would drop its triggers
# with it: they are lifted for the change and created again after it. Existing rows say
# nothing of how their actor authenticated (and keep their links: decisions/chain.py).


class Migration(migrations.Migration):
    dependencies = [("decisions", "0009_batch_expiry_and_evidence_policy")]

    operations = [
        lift_append_only("console_consoleevent"),
        migrations.AddField(
            model_name="consoleevent",
            name="authenticated_how",
            field=models.CharField(blank=True, default="", max_length=120),
        ),
        migrations.AddField(
            model_name="consoleevent",
            name="authenticated_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        append_only("console_consoleevent"),
    ]
