"""Credentials keep their namespace's name, for people to read. Those already stored take it
from the embedded ledger where it issued them; others show the id until stored again."""

from django.db import migrations, models


def names_from_the_embedded_ledger(apps, schema_editor):  # type: ignore[no-untyped-def]
    OrbitCredential = apps.get_model("console", "OrbitCredential")
    Namespace = apps.get_model("ledger", "Namespace")
    names = dict(Namespace.objects.values_list("id", "name"))
    for credential in OrbitCredential.objects.filter(namespace_name=""):
        if credential.namespace_id in names:
            credential.namespace_name = names[credential.namespace_id]
            credential.save(update_fields=["namespace_name"])


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0008_credential_per_namespace"),
        ("ledger", "0004_audit_created_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="orbitcredential",
            name="namespace_name",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.RunPython(names_from_the_embedded_ledger, migrations.RunPython.noop),
    ]
