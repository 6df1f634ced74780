"""What an incident keeps as evidence: the series around it (from Prometheus or the local store),
the gaps where evidence is missing, and the root-cause matrix as people edited it."""

from __future__ import annotations

from django.db import models

from incidents.models.incidents import Incident


class EvidenceSeries(models.Model):
    """One series kept as an incident's evidence: Prometheus retention ends, the postmortem must
    not. Points are stored compactly (see `incidents.evidence.pack_points`)."""

    class Source(models.TextChoices):
        PROMETHEUS = "prometheus"
        IMPORT = "import"

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="evidence")
    signal = models.CharField(
        max_length=100, help_text="the catalog band or query it answers, e.g. kv_pool_usage"
    )
    query = models.TextField(help_text="the PromQL (or imported metric name) it came from")
    labels = models.JSONField(default=dict)
    labels_key = models.CharField(max_length=64, help_text="sha256 of the sorted labels, for uniqueness")
    step_seconds = models.FloatField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    points = models.BinaryField()
    point_count = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=20, choices=Source.choices)
    fetched_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["incident", "signal", "query", "labels_key"], name="evidence_series_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.signal} of incident {self.incident_id} ({self.point_count} points)"


class EvidenceGap(models.Model):
    """What evidence is missing for an incident, and since when (Prometheus unset or down)."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="evidence_gaps")
    signal = models.CharField(max_length=100)
    error = models.TextField()
    since = models.DateTimeField()
    last_tried = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["incident", "signal"], name="evidence_gap_unique")]

    def __str__(self) -> str:
        return f"{self.signal} missing for incident {self.incident_id}: {self.error[:60]}"


class LocalSeries(models.Model):
    """The local series store `import_metrics` fills (OpenMetrics files), read by evidence the way
    Prometheus is read when there is no Prometheus."""

    metric = models.CharField(max_length=255)
    labels = models.JSONField(default=dict)
    labels_key = models.CharField(max_length=64)
    start = models.DateTimeField()
    end = models.DateTimeField()
    points = models.BinaryField()
    point_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "labels_key"], name="local_series_unique")]
        indexes = [models.Index(fields=["metric", "start", "end"], name="local_series_span_idx")]

    def __str__(self) -> str:
        return f"{self.metric} ({self.point_count} points)"


class MatrixCell(models.Model):
    """One cell of an incident's root-cause matrix (layer x column). Every edit is a new row;
    the newest per (incident, layer, column) is the current cell, the rest is its history."""

    class Column(models.TextChoices):
        DIRECT_CAUSE = "direct_cause"
        SYSTEM_DEFECT = "system_defect"
        PROCESS_GAP = "process_gap"

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="matrix_cells")
    layer = models.CharField(max_length=20)
    column = models.CharField(max_length=20, choices=Column.choices)
    text = models.TextField(blank=True, default="")
    evidence = models.JSONField(
        default=list, help_text="[{kind, id}] with kind alert|threshold|action|change|catalog"
    )
    edited_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["incident", "layer", "column", "-created_at", "-id"]
        indexes = [models.Index(fields=["incident", "layer", "column"], name="matrix_cell_idx")]

    def __str__(self) -> str:
        return f"incident {self.incident_id} {self.layer}/{self.column}"
