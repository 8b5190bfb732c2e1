from django.db import migrations

from orbit_console.lib.appendonly import append_only


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]

    operations = [append_only("ledger_operationaudit")]
