"""Remediation items: what a postmortem promised, tracked until the data says it worked.

An item has an owner, a horizon (24 h, a week, a month, or a date) and its due time, how it is
verified (words) and, where metrics allow, a `check`: a PromQL expression that holds when its
result is non-empty. A `done` item's check is evaluated after the fix (no earlier than done_at
plus the longest range in the query); it is `verified` once it held for `check_for`, and a
verified item whose check fails later is `regressed`. Suggested items (proposed by the catalog
from the postmortem's matrix) wait for a person to accept or reject them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from incidents.models.incidents import Incident


class RemediationItem(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        IN_PROGRESS = "in_progress"
        DONE = "done"
        VERIFIED = "verified"
        REGRESSED = "regressed"
        WONT_DO = "wont_do"

    class Horizon(models.TextChoices):
        DAY = "24h"
        WEEK = "1w"
        MONTH = "1m"
        DATE = "date"

    incident = models.ForeignKey("Incident", on_delete=models.CASCADE, related_name="remediations")
    incidents: models.ManyToManyField[Incident, Any] = models.ManyToManyField(
        "Incident",
        related_name="+",
        blank=True,
        help_text="every incident it answers (the first is `incident`)",
    )
    title = models.CharField(max_length=300)
    owner = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    horizon = models.CharField(max_length=5, choices=Horizon.choices, default=Horizon.WEEK)
    due_at = models.DateTimeField()
    verification = models.TextField(blank=True, default="")
    check_expr = models.TextField(
        blank=True, default="", help_text="`check` in the API: PromQL, holds when non-empty"
    )
    check_for = models.CharField(max_length=20, default="0s", help_text="how long it must keep holding")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    done_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    held_since = models.DateTimeField(null=True, blank=True, help_text="first of the run of checks that held")
    last_check = models.JSONField(null=True, blank=True, help_text="{at, query, range, result, ok, reason}")
    next_check_at = models.DateTimeField(
        null=True, blank=True, help_text="backoff after a check that could not run"
    )
    check_failures = models.PositiveIntegerField(default=0)
    suggested = models.BooleanField(default=False)
    source = models.JSONField(default=dict, blank=True, help_text="{postmortem, layer, column, mode}")
    recurred = models.JSONField(default=list, blank=True, help_text="incident ids whose chain came back")
    reminded = models.CharField(
        max_length=80, blank=True, default="", help_text="the last state its owner was told of"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "due_at"], name="remediation_status_due_idx"),
            models.Index(fields=["owner", "status"], name="remediation_owner_idx"),
        ]

    def __str__(self) -> str:
        return f"remediation {self.pk}: {self.title[:60]}"
