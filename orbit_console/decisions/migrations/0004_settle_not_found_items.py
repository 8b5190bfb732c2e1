"""Items of a task the verify step could not read ("not found") were stored without an
outcome: the worker waited for them for ever and its batch never finished (issue 29). They are
left out like every ineligible task: "not eligible". The worker then finishes their batches on
its next round, with the record's "batch.finished" entry."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def settle_not_found_items(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    BatchItem = apps.get_model("decisions", "BatchItem")  # noqa: N806 -- a model class
    BatchItem.objects.filter(ineligible="not_found", outcome="").update(outcome="skipped")


class Migration(migrations.Migration):
    dependencies = [("decisions", "0003_followups")]

    operations = [
        migrations.RunPython(settle_not_found_items, migrations.RunPython.noop, elidable=True),
    ]
