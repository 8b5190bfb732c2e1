"""A person may hold one Orbit credential per namespace (issue 13): the credential's user is no
longer unique on its own, the pair (user, namespace) is. The pair's index comes first, so that
MySQL keeps an index for the user's foreign key while the one-to-one's unique index goes."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0007_chainverification_to_audit"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="orbitcredential",
            constraint=models.UniqueConstraint(
                fields=("user", "namespace_id"), name="one_credential_per_namespace"
            ),
        ),
        migrations.AlterField(
            model_name="orbitcredential",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="orbit_credentials",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
