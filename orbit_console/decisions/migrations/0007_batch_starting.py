"""A batch's start stores its submissions in chunks, each its own transaction, while the batch
is "starting" (issue 29): a choice of the state column, so no table changes."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('decisions', '0006_approvals_of_batches'),
    ]

    operations = [
        migrations.AlterField(
            model_name='batch',
            name='state',
            field=models.CharField(choices=[('draft', 'Selected, not yet confirmed'), ('proposed', 'Waiting for approval'), ('rejected', 'Rejected by a supervisor'), ('starting', 'Starting: storing its submissions'), ('running', 'Sending'), ('paused', 'Paused'), ('cancelled', 'Cancelled'), ('finished', 'Finished')], default='draft', max_length=12),
        ),
    ]
