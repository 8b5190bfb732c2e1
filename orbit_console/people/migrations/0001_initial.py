"""The people's credentials move here from the console app; the table stays where it was
(``console_orbitcredential``), so this changes Django's state only."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("console", "0010_proposal_handler"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="OrbitCredential",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("token_ciphertext", models.TextField()),
                        ("actor_id", models.CharField(blank=True, max_length=64)),
                        ("permissions", models.CharField(blank=True, max_length=200)),
                        ("namespace_id", models.CharField(blank=True, max_length=64)),
                        (
                            "namespace_name",
                            models.CharField(blank=True, default="", max_length=200),
                        ),
                        ("queue_ids", models.TextField(blank=True, default="")),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="orbit_credentials",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_orbitcredential",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("user", "namespace_id"), name="one_credential_per_namespace"
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
