"""Rootline's own figures for /metrics (incidents/services/tallies.py): a small table of counters,
sums and last-run times shared by every process, so each web worker answers a scrape the same."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0027_retention_pruned_bodies_and_alert_rollups"),
    ]

    operations = [
        migrations.CreateModel(
            name="Tally",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("labels", models.CharField(blank=True, default="", max_length=500)),
                (
                    "kind",
                    models.CharField(
                        choices=[("sum", "Sum"), ("latest", "Latest")], default="sum", max_length=10
                    ),
                ),
                ("value", models.FloatField(default=0.0)),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("name", "labels"), name="tally_name_labels_once")
                ],
            },
        ),
    ]
