"""Drafts: what a person typed into a form that arrived after their session had ended.

(people/drafts.py; docs/console.md, "Sessions and drafts")"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("people", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Draft",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("browser", models.CharField(max_length=64)),
                ("posted_to", models.CharField(max_length=300)),
                ("resume_at", models.CharField(max_length=300)),
                ("fields_sealed", models.TextField()),
                ("created_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField(db_index=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="drafts",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("browser", "resume_at"), name="one_draft_per_page"
                    )
                ],
            },
        ),
    ]
