"""ChainVerification moves to the audit app (its table is renamed there, its rows kept)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("console", "0006_event_key_id")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ChainVerification")],
            database_operations=[],
        ),
    ]
