"""Proposals, approvals, submissions and the console's record move here from the console app.
Their tables stay where they were (``console_*``, with the record's append-only triggers), so
this changes Django's state only."""

import django.db.models.deletion
import orbit_console.lib.ids
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
                    name="ChainHead",
                    fields=[
                        (
                            "name",
                            models.CharField(max_length=40, primary_key=True, serialize=False),
                        ),
                        ("seq", models.PositiveBigIntegerField(default=0)),
                        ("last_hash", models.CharField(blank=True, max_length=64)),
                    ],
                    options={
                        "db_table": "console_chainhead",
                    },
                ),
                migrations.CreateModel(
                    name="Proposal",
                    fields=[
                        (
                            "id",
                            models.CharField(
                                default=orbit_console.lib.ids.new_id,
                                editable=False,
                                max_length=32,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        (
                            "action",
                            models.CharField(
                                choices=[("review", "Review"), ("retry", "Retry")], max_length=8
                            ),
                        ),
                        ("task_id", models.CharField(db_index=True, max_length=64)),
                        ("queue_id", models.CharField(blank=True, max_length=64)),
                        ("handler", models.CharField(blank=True, default="", max_length=512)),
                        ("namespace_id", models.CharField(blank=True, max_length=64)),
                        ("expected_revision", models.CharField(max_length=24)),
                        ("idempotency_key", models.CharField(max_length=80, unique=True)),
                        ("body", models.TextField()),
                        ("required_approvals", models.PositiveSmallIntegerField()),
                        ("created_at", models.DateTimeField()),
                        ("expires_at", models.DateTimeField(db_index=True)),
                        (
                            "decision_slot",
                            models.CharField(blank=True, max_length=100, null=True, unique=True),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "Waiting for approval"),
                                    ("approved", "Approved and sent"),
                                    ("rejected", "Rejected by a supervisor"),
                                    ("withdrawn", "Withdrawn by the proposer"),
                                    ("expired", "Expired without being sent"),
                                ],
                                default="pending",
                                max_length=12,
                            ),
                        ),
                        ("decided_at", models.DateTimeField(blank=True, null=True)),
                        ("decision_note", models.TextField(blank=True)),
                        (
                            "decided_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "proposed_by",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="proposals",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_proposal",
                    },
                ),
                migrations.CreateModel(
                    name="Approval",
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
                        ("note", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField()),
                        (
                            "approver",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "proposal",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="approvals",
                                to="decisions.proposal",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_approval",
                    },
                ),
                migrations.CreateModel(
                    name="Submission",
                    fields=[
                        (
                            "id",
                            models.CharField(
                                default=orbit_console.lib.ids.new_id,
                                editable=False,
                                max_length=32,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        (
                            "action",
                            models.CharField(
                                choices=[("review", "Review"), ("retry", "Retry")], max_length=8
                            ),
                        ),
                        ("task_id", models.CharField(db_index=True, max_length=64)),
                        ("queue_id", models.CharField(blank=True, max_length=64)),
                        ("namespace_id", models.CharField(blank=True, default="", max_length=64)),
                        ("expected_revision", models.CharField(max_length=24)),
                        ("idempotency_key", models.CharField(max_length=80, unique=True)),
                        ("body", models.TextField()),
                        ("created_at", models.DateTimeField()),
                        (
                            "decision_slot",
                            models.CharField(blank=True, max_length=100, null=True, unique=True),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "Stored, not yet sent"),
                                    ("unknown", "Outcome unknown"),
                                    ("retry_later", "Not applied yet: try again later"),
                                    ("succeeded", "Applied"),
                                    ("rejected", "Rejected"),
                                ],
                                default="pending",
                                max_length=16,
                            ),
                        ),
                        ("send_count", models.PositiveIntegerField(default=0)),
                        ("last_sent_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "next_attempt_at",
                            models.DateTimeField(blank=True, db_index=True, null=True),
                        ),
                        ("reconcile_deadline", models.DateTimeField()),
                        ("http_status", models.PositiveSmallIntegerField(blank=True, null=True)),
                        ("error_code", models.CharField(blank=True, max_length=40)),
                        ("error_message", models.TextField(blank=True)),
                        ("api_request_id", models.CharField(blank=True, max_length=64)),
                        ("audit_id", models.CharField(blank=True, max_length=64)),
                        ("deduplicated", models.BooleanField(blank=True, null=True)),
                        ("result_task_id", models.CharField(blank=True, max_length=64)),
                        ("resolved_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="submissions",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "proposal",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="submission",
                                to="decisions.proposal",
                            ),
                        ),
                        (
                            "sent_as",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_submission",
                    },
                ),
                migrations.CreateModel(
                    name="ConsoleEvent",
                    fields=[
                        (
                            "id",
                            models.CharField(
                                default=orbit_console.lib.ids.new_id,
                                editable=False,
                                max_length=32,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("seq", models.PositiveBigIntegerField(unique=True)),
                        ("kind", models.CharField(max_length=40)),
                        ("task_id", models.CharField(blank=True, max_length=64)),
                        ("queue_id", models.CharField(blank=True, max_length=64)),
                        ("namespace_id", models.CharField(blank=True, default="", max_length=64)),
                        ("note", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField()),
                        ("prev_hash", models.CharField(blank=True, max_length=64)),
                        ("entry_hash", models.CharField(max_length=64)),
                        ("key_id", models.CharField(default="", max_length=16)),
                        (
                            "actor",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "proposal",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="events",
                                to="decisions.proposal",
                            ),
                        ),
                        (
                            "submission",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="events",
                                to="decisions.submission",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_consoleevent",
                    },
                ),
                migrations.AddIndex(
                    model_name="proposal",
                    index=models.Index(fields=["state", "created_at"], name="proposal_queue"),
                ),
                migrations.AddConstraint(
                    model_name="approval",
                    constraint=models.UniqueConstraint(
                        fields=("proposal", "approver"), name="one_approval_per_person"
                    ),
                ),
                migrations.AddIndex(
                    model_name="submission",
                    index=models.Index(
                        fields=["state", "next_attempt_at"], name="submission_backlog"
                    ),
                ),
                migrations.AddIndex(
                    model_name="consoleevent",
                    index=models.Index(
                        fields=["task_id", "created_at", "id"], name="console_event_task"
                    ),
                ),
                migrations.AddIndex(
                    model_name="consoleevent",
                    index=models.Index(fields=["created_at", "id"], name="console_event_time"),
                ),
                migrations.AddIndex(
                    model_name="consoleevent",
                    index=models.Index(
                        fields=["namespace_id", "created_at", "id"], name="console_event_namespace"
                    ),
                ),
            ],
        ),
    ]
