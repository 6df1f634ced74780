"""A partial index of the firing alerts: counting or listing what fires now reads what fires,
not every alert ever stored (docs/benchmarks.md, "Pages over a year of alerts"). Built in one pass,
during which new alerts wait to be stored; webhooks still answer."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0013_delivery_body_lz4"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="alert",
            index=models.Index(
                condition=models.Q(("status", "firing")), fields=["starts_at", "id"], name="alert_firing_idx"
            ),
        ),
    ]
