"""The audit app: ChainVerification taken over from the console (same table, then renamed),
and the list of written checkpoints."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [("console", "0007_chainverification_to_audit")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ChainVerification",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("ran_at", models.DateTimeField()),
                        ("ok", models.BooleanField()),
                        ("checked", models.PositiveBigIntegerField()),
                        ("first_break", models.TextField(blank=True)),
                    ],
                    options={"db_table": "console_chainverification"},
                ),
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="ChainVerification", table=None),
        migrations.CreateModel(
            name="WrittenCheckpoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("series", models.CharField(max_length=32)),
                ("number", models.PositiveBigIntegerField()),
                ("digest", models.CharField(max_length=64)),
                ("taken_at", models.DateTimeField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("series", "number"), name="checkpoint_number")
                ],
            },
        ),
    ]
