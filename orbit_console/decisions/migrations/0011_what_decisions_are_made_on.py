# What each decision was made on, kept with it for the insight figures (docs/insight.md): the
# task's handler and last error code, since when it waited for a person, when the decision was
# started. Decisions made before this say nothing of it (empty).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('decisions', '0010_event_authentication'),
    ]

    operations = [
        migrations.AddField(
            model_name='batchitem',
            name='waiting_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='proposal',
            name='last_error_code',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='proposal',
            name='started_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='proposal',
            name='waiting_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='submission',
            name='handler',
            field=models.CharField(blank=True, default='', max_length=512),
        ),
        migrations.AddField(
            model_name='submission',
            name='last_error_code',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='submission',
            name='started_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='submission',
            name='waiting_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
