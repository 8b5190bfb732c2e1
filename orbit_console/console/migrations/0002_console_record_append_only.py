from django.db import migrations

from orbit_console.lib.appendonly import append_only


def create_chain_head(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("console", "ChainHead").objects.get_or_create(name="console")


class Migration(migrations.Migration):
    dependencies = [("console", "0001_initial")]

    operations = [
        migrations.RunPython(create_chain_head, migrations.RunPython.noop),
        append_only("console_consoleevent"),
    ]
