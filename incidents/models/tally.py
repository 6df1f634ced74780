"""Rootline's own figures for `/metrics` (incidents/services/tallies.py): counters, sums and
last-run times that the web, the workers and beat add to, read back by every web process alike."""

from __future__ import annotations

from django.db import models


class Tally(models.Model):
    """One figure: a name, its labels as canonical JSON text (keys sorted) and its value. A `sum`
    only grows (a Prometheus counter, or a summary's `_sum` and `_count`); a `latest` holds the
    last value written (a moment, in Unix seconds). A few dozen rows in all."""

    class Kind(models.TextChoices):
        SUM = "sum"
        LATEST = "latest"

    name = models.CharField(max_length=100)
    labels = models.CharField(max_length=500, blank=True, default="")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.SUM)
    value = models.FloatField(default=0.0)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "labels"], name="tally_name_labels_once"),
        ]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} = {self.value:g}"
