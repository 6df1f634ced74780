"""What retention keeps of the alerts it prunes (docs/retention.md): their counts, per UTC day and
alert name, so the weekly review's alert figures read the same after a prune as before."""

from __future__ import annotations

from django.db import models


class AlertRollup(models.Model):
    """The alerts of one name that started on one UTC day and were pruned: how many fired
    (`kind=alert` only, as the review counts firings) and whether one of them, alert or change,
    carried its own runbook link (the review's "without a runbook" looks for one). Pruned alerts
    were in no incident and not judged false positives, so they add firings and nothing else."""

    day = models.DateField(help_text="the UTC day the pruned alerts started")
    alertname = models.CharField(max_length=255, blank=True, default="")
    firings = models.PositiveIntegerField(default=0)
    runbook_linked = models.BooleanField(
        default=False, help_text="one of them carried its own http(s) runbook link"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "alertname"], name="alert_rollup_day_name_once"),
        ]

    def __str__(self) -> str:
        return f"{self.alertname or '(unnamed)'} on {self.day:%Y-%m-%d}: {self.firings} pruned"
