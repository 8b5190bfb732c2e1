"""A batch item keeps its task's business key whole: the API allows 512 characters, the column
held 255, and one longer key failed the selection of its whole filter on MariaDB (issue 29)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("decisions", "0004_settle_not_found_items")]

    operations = [
        migrations.AlterField(
            model_name="batchitem",
            name="business_key",
            field=models.CharField(blank=True, default="", max_length=512),
        ),
    ]
