"""One approvals model for proposals and batches (issue 29): an approval names exactly one of
the two, at most one per supervisor each. Batches approved before kept their approver only on
the batch (``decided_by``): each gets that approval as a row, so that the record of who
approved what is in one place."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

APPROVED_STATES = ("running", "paused", "cancelled", "finished")


def approvals_of_approved_batches(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Approval = apps.get_model("decisions", "Approval")  # noqa: N806 -- a model class
    Batch = apps.get_model("decisions", "Batch")  # noqa: N806
    approved = Batch.objects.filter(
        state__in=APPROVED_STATES, decided_by__isnull=False, approvals__isnull=True
    )
    Approval.objects.bulk_create(
        [
            Approval(
                batch_id=batch.id,
                approver_id=batch.decided_by_id,
                note=batch.decision_note,
                created_at=batch.decided_at or batch.started_at or batch.created_at,
            )
            for batch in approved.iterator()
        ],
        batch_size=500,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('decisions', '0005_batch_item_business_key_as_the_api'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='approval',
            name='batch',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='approvals', to='decisions.batch'),
        ),
        migrations.AlterField(
            model_name='approval',
            name='proposal',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='approvals', to='decisions.proposal'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.UniqueConstraint(fields=('batch', 'approver'), name='one_batch_approval_per_person'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('batch__isnull', True), ('proposal__isnull', False)), models.Q(('batch__isnull', False), ('proposal__isnull', True)), _connector='OR'), name='approval_of_one_decision'),
        ),
        migrations.RunPython(approvals_of_approved_batches, migrations.RunPython.noop),
    ]
