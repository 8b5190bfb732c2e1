"""Issue 29: the verification results and the list of written checkpoints become append-only
and carry signatures; the chains' writers mark what moved, for the checkpoint job."""

from django.db import migrations, models

from orbit_console.lib.appendonly import append_only


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="chainverification",
            name="statement",
            field=models.TextField(blank=True, default=""),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="chainverification",
            name="key_id",
            field=models.CharField(blank=True, default="", max_length=16),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="chainverification",
            name="signature",
            field=models.CharField(blank=True, default="", max_length=128),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="writtencheckpoint",
            name="key_id",
            field=models.CharField(blank=True, default="", max_length=16),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="writtencheckpoint",
            name="signature",
            field=models.CharField(blank=True, default="", max_length=128),
            preserve_default=False,
        ),
        migrations.CreateModel(
            name="MovedChain",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("family", models.CharField(max_length=16)),
                ("chain", models.CharField(max_length=64)),
            ],
        ),
        # After the columns: on SQLite adding one rebuilds the table, which drops its triggers.
        append_only("audit_chainverification"),
        append_only("audit_writtencheckpoint"),
    ]
