"""Retention (docs/retention.md): a delivery remembers when its body was pruned, and the counts of
pruned alerts are kept per UTC day and alert name for the weekly review. Adding a nullable column
rewrites nothing: it is instant on PostgreSQL, whatever the deliveries table holds."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0026_api_token_hashed"),
    ]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="body_pruned_at",
            field=models.DateTimeField(
                blank=True,
                help_text="when retention emptied its body (ROOTLINE_RETAIN_BODIES_DAYS); row and digest stay",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="AlertRollup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField(help_text="the UTC day the pruned alerts started")),
                ("alertname", models.CharField(blank=True, default="", max_length=255)),
                ("firings", models.PositiveIntegerField(default=0)),
                (
                    "runbook_linked",
                    models.BooleanField(
                        default=False, help_text="one of them carried its own http(s) runbook link"
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("day", "alertname"), name="alert_rollup_day_name_once")
                ],
            },
        ),
    ]
