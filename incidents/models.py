"""Rootline's rows: integrations that send alerts, the deliveries they made, the alerts those held."""

from __future__ import annotations

import hashlib
import hmac
from functools import cached_property

from django.db import connections, models
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.utils import timezone

from correlate.events import occurrence_key
from incidents.fields import StringMapField


def storable_id(value: int) -> bool:
    """Whether an id a client sent can name a row: ids are 64-bit. A bigger one names nothing
    (PostgreSQL compares it and finds no row; SQLite's driver raised OverflowError, a 500)."""
    return 0 < value < 2**63


def token_digest(token: str) -> str:
    """SHA-256, not a password hash: tokens are long random strings, and a password hash would
    cost ~0.4 s on every webhook request."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Integration(models.Model):
    class Kind(models.TextChoices):
        ALERTMANAGER = "alertmanager"
        GRAFANA = "grafana"
        EVENTS = "events"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=200, unique=True)
    token_digest = models.CharField(max_length=64, unique=True)
    rate_limit = models.FloatField(null=True, blank=True, help_text="alerts per second; empty: no limit")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(rate_limit__isnull=True) | Q(rate_limit__gt=0), name="rate_limit_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def path(self) -> str:
        return f"/hooks/{self.kind}/{self.pk}/"

    def token_matches(self, token: str) -> bool:
        return hmac.compare_digest(self.token_digest, token_digest(token))


class Delivery(models.Model):
    """One POST as received. The raw body is kept (except over the size limit) so that any
    delivery, good or bad, can be replayed after a fix."""

    class Status(models.TextChoices):
        PENDING = "pending"
        PROCESSED = "processed"
        REJECTED = "rejected"
        TOO_LARGE = "too_large"
        THROTTLED = "throttled"
        FAILED = "failed"

    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="deliveries")
    received_at = models.DateTimeField(db_index=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    body = models.BinaryField(default=b"", blank=True)
    body_digest = models.CharField(max_length=64, blank=True, default="")
    size = models.PositiveBigIntegerField(default=0)
    headers = models.JSONField(default=dict, blank=True)
    accepted = models.PositiveIntegerField(default=0)
    rejected = models.JSONField(
        default=list, blank=True, help_text="[{path, error}] of alerts that could not be read"
    )
    truncated_alerts = models.PositiveIntegerField(
        default=0,
        help_text="alerts the sender left out of this body (Alertmanager's truncatedAlerts, max_alerts)",
    )
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            # A re-sent body answers as the first one did instead of being stored twice.
            models.UniqueConstraint(
                fields=["integration", "body_digest"], condition=~Q(body_digest=""), name="delivery_body_once"
            ),
        ]
        indexes = [
            models.Index(fields=["status", "received_at"], name="delivery_status_idx"),
            # The few bodies a sender cut, found without reading every delivery (pages, /metrics).
            models.Index(
                fields=["received_at"], condition=Q(truncated_alerts__gt=0), name="delivery_truncated_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.status})"


class AlertQuerySet(models.QuerySet):
    def firing(self) -> AlertQuerySet:
        return self.filter(status=Alert.Status.FIRING)

    def with_label(self, key: str, value: str) -> AlertQuerySet:
        if connections[self.db].vendor == "postgresql":
            return self.filter(labels__contains={key: value})
        return self.alias(_label_value=Cast(KeyTextTransform(key, "labels"), models.TextField())).filter(
            _label_value=value
        )


def place_named(labels: dict) -> str:
    """The narrowest place a label map names (an alert's `where`), "" when it names none."""
    for name in (
        "exported_pod",
        "pod",
        "node",
        "Hostname",
        "hostname",
        "instance",
        "model_name",
        "model",
        "service",
        "namespace",
    ):
        if labels.get(name):
            return labels[name]
    return ""


class Alert(models.Model):
    """One occurrence of an alert: a fingerprint firing from `starts_at`. A later firing of the
    same fingerprint is another occurrence, hence the unique pair."""

    class Status(models.TextChoices):
        FIRING = "firing"
        RESOLVED = "resolved"

    class Kind(models.TextChoices):
        ALERT = "alert"
        CHANGE = "change"

    fingerprint = models.CharField(max_length=255)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.ALERT)
    alertname = models.CharField(
        max_length=255, blank=True, default=""
    )  # no index: nothing looks alerts up by name, and every index costs each insert and correlation update
    labels = StringMapField(default=dict)
    annotations = StringMapField(default=dict, blank=True)
    generator_url = models.TextField(blank=True, default="")
    # The alert's references are kept by Django, not by PostgreSQL: a foreign-key constraint is a
    # trigger that looks up (and share-locks) the referenced row for every row inserted or every
    # reference changed, and alerts arrive by the thousand a second in a storm (125,000 rows:
    # INSERT 2.5 -> 1.5 s, the correlation's UPDATE 3.7 -> 3.0 s without them). Only Rootline's own
    # code writes these columns, from rows it has just read or written, and deletions go through
    # Django's collector, which applies PROTECT and SET_NULL itself. Sentry keeps its event tables
    # the same way (`FlexibleForeignKey(db_constraint=False)`).
    # Not indexed either: no query looks alerts up by integration, and every index costs each
    # insert and each correlation update (deleting an integration scans the alerts, once, in the admin).
    integration = models.ForeignKey(
        Integration, on_delete=models.PROTECT, related_name="alerts", db_index=False, db_constraint=False
    )
    first_delivery = models.ForeignKey(
        Delivery, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_constraint=False
    )
    received_at = models.DateTimeField()
    correlation_key = models.CharField(
        max_length=255, blank=True, default="", help_text="the cluster: correlation is serialised per key"
    )
    incident = models.ForeignKey(
        "Incident",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="alerts",
        db_constraint=False,
    )
    layer = models.CharField(max_length=20, null=True, blank=True)
    failure_mode = models.CharField(max_length=30, null=True, blank=True)
    classified_by = models.CharField(max_length=40, blank=True, default="")
    onset = models.DateTimeField(
        null=True, blank=True, help_text="when the condition began, inferred by the engine"
    )
    false_positive = models.BooleanField(default=False)
    correlated = models.BooleanField(
        default=False, help_text="seen by a correlation run since it last changed"
    )

    objects = AlertQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="alert_occurrence_unique"),
        ]
        # Each index costs every insert and every correlation update (a non-HOT update: it changes
        # `incident` and `correlated`): a fingerprint's occurrences are found through the unique
        # pair, whose first column it is.
        indexes = [
            models.Index(fields=["starts_at"], name="alert_starts_idx"),
            models.Index(fields=["correlation_key", "starts_at"], name="alert_key_starts_idx"),
            # What the next correlation run of a key takes: small, whatever the key's history.
            models.Index(
                fields=["correlation_key", "starts_at"],
                condition=Q(correlated=False),
                name="alert_uncorrelated_idx",
            ),
            # What fires now, newest first: the alerts page's count, `?status=firing` and /metrics
            # read what is firing, not every alert ever stored (docs/benchmarks.md, "Pages over a
            # year of alerts"). It costs each firing alert's insert and correlation update ~8 us.
            models.Index(fields=["starts_at", "id"], condition=Q(status="firing"), name="alert_firing_idx"),
        ]

    @property
    def where(self) -> str:
        """The narrowest place the labels name, for pages."""
        return place_named(self.labels)

    @cached_property
    def key(self) -> str:
        """The occurrence key the engine and human decisions use (an occurrence's fingerprint
        and start never change, so it is computed once per instance)."""
        return occurrence_key(self.fingerprint, self.starts_at)

    def __str__(self) -> str:
        return f"{self.alertname or self.fingerprint} @ {self.starts_at:%Y-%m-%d %H:%M:%S}"


class IncidentQuerySet(models.QuerySet):
    def visible(self) -> IncidentQuerySet:
        """Incidents people see: not folded into another by a merge."""
        return self.filter(merged_into__isnull=True)

    def open(self) -> IncidentQuerySet:
        return self.visible().exclude(status=Incident.Status.RESOLVED)

    def for_key(self, key: str) -> IncidentQuerySet:
        return self.filter(correlation_key=key)


class Incident(models.Model):
    """Alerts the engine folded together, with the chain and root it found and what people did.

    Its alerts, edges and root candidates are rewritten by each correlation run; its identity,
    its human state (acknowledged, assigned, severity set by hand, degradation level) and its
    actions are kept."""

    class Status(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        MITIGATED = "mitigated"
        RESOLVED = "resolved"

    class Severity(models.TextChoices):
        CRITICAL = "critical"
        WARNING = "warning"
        INFO = "info"

    class Degradation(models.TextChoices):
        NONE = "none"
        L1 = "L1"
        L2 = "L2"
        L3 = "L3"

    title = models.CharField(max_length=500, blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    severity_by_human = models.BooleanField(default=False)
    correlation_key = models.CharField(max_length=255, blank=True, default="", db_index=True)
    started_at = models.DateTimeField()
    last_alert_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    mitigated_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by_human = models.BooleanField(default=False)
    reopened_by_human = models.BooleanField(
        default=False, help_text="reopened by a person: alerts alone no longer resolve it"
    )
    assignee = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    degradation = models.CharField(max_length=5, choices=Degradation.choices, default=Degradation.NONE)
    scope = models.JSONField(default=dict, blank=True)
    layers = models.JSONField(default=list, blank=True)
    failure_modes = models.JSONField(default=list, blank=True)
    root_alert = models.ForeignKey(
        "Alert", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    root_confidence = models.FloatField(null=True, blank=True)
    root_explanation = models.TextField(blank=True, default="")
    chain = models.JSONField(default=list, blank=True, help_text="alert ids, cause before effect")
    ranking_held = models.BooleanField(
        default=False,
        help_text="its alerts are current but its chain, root and edges wait for the next ranking "
        "(a big incident is ranked every few seconds during a storm)",
    )
    merged_into = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="merged"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = IncidentQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["status", "started_at"], name="incident_status_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(root_confidence__isnull=True) | Q(root_confidence__gte=0, root_confidence__lte=1),
                name="root_confidence_in_unit_range",
            ),
            models.CheckConstraint(
                condition=~Q(merged_into=models.F("id")), name="incident_not_merged_into_itself"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    def derived_status(self) -> str:
        """The status follows the moments people and alerts set: resolved, else mitigated, else
        acknowledged, else open."""
        if self.resolved_at is not None:
            return self.Status.RESOLVED
        if self.mitigated_at is not None:
            return self.Status.MITIGATED
        if self.acknowledged_at is not None:
            return self.Status.ACKNOWLEDGED
        return self.Status.OPEN


class IncidentEdge(models.Model):
    # Kept by Django's deletion collector, not database constraints, as an alert's references
    # are: correlation writes edges from rows it has just read or written, and a storm's runs
    # inserted ~90,000 of them, each row checked by three key triggers (~300,000 lookups, about
    # a tenth of PostgreSQL's time in bench/correlate/end_to_end.py's storm).
    incident = models.ForeignKey(
        Incident, on_delete=models.CASCADE, related_name="edges", db_constraint=False
    )
    cause = models.ForeignKey("Alert", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    effect = models.ForeignKey("Alert", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    rule = models.CharField(max_length=200)
    lag_seconds = models.FloatField()
    relation = models.CharField(max_length=60, blank=True, default="")

    class Meta:
        ordering = ["cause_id", "effect_id", "rule"]


class RootCandidate(models.Model):
    # Written with the edges, kept the same way (see IncidentEdge).
    incident = models.ForeignKey(
        Incident, on_delete=models.CASCADE, related_name="root_candidates", db_constraint=False
    )
    alert = models.ForeignKey("Alert", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    rank = models.PositiveSmallIntegerField()
    confidence = models.FloatField()
    explanation = models.TextField()

    class Meta:
        ordering = ["rank"]


class IncidentAction(models.Model):
    """Every action a person took, with who and when: the audit trail and timeline entries."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="actions")
    action = models.CharField(max_length=30)
    by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    at = models.DateTimeField()
    body = models.JSONField(default=dict, blank=True)
    alert = models.ForeignKey("Alert", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    replay_key = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        unique=True,
        help_text="set by import_actions so that a second import changes nothing",
    )
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]


class PendingActionQuerySet(models.QuerySet):
    def waiting(self) -> PendingActionQuerySet:
        """Still tried: neither failed once its alerts were there nor expired waiting for them."""
        return self.filter(failed_at=None, expired_at=None)


class PendingAction(models.Model):
    """An imported action line whose alerts were not stored, or not correlated into an incident,
    yet (`import_actions` before `import_alerts`): kept until they are, then applied as the import
    would have (`incidents.replay.pending_actions_apply`). One that fails then keeps its error, for
    a person to see, and is not tried again; one whose alerts have not arrived
    `ROOTLINE_PENDING_ACTION_TTL_HOURS` after it was kept expires, naming them, and is not tried
    again either. Re-importing its line tries it once more, with a new time limit."""

    class State(models.TextChoices):
        WAITING = "waiting"
        FAILED = "failed"
        EXPIRED = "expired"

    line = models.JSONField()
    replay_key = models.CharField(
        max_length=64, unique=True, help_text="the line's key, as its IncidentAction will have"
    )
    at = models.DateTimeField()
    source = models.CharField(
        max_length=300, blank=True, default="", help_text="FILE:LINE it was imported from"
    )
    waiting_for = models.TextField(blank=True, default="")
    error = models.TextField(
        blank=True,
        default="",
        help_text="why it could not be applied once its alerts were there, or which alerts never arrived",
    )
    failed_at = models.DateTimeField(null=True, blank=True)
    kept_at = models.DateTimeField(
        default=timezone.now, help_text="when it was (last) imported; its time limit runs from here"
    )
    expired_at = models.DateTimeField(
        null=True, blank=True, help_text="when it was given up on, its alerts still missing"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PendingActionQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.line.get('action')} at {self.at.isoformat()} ({self.source})"

    @property
    def state(self) -> str:
        if self.expired_at:
            return self.State.EXPIRED
        return self.State.FAILED if self.failed_at else self.State.WAITING


class Decision(models.Model):
    """A human decision about grouping; every correlation run takes them in and never undoes one."""

    class Kind(models.TextChoices):
        MERGE = "merge"
        SPLIT = "split"
        EXCLUDE = "exclude"
        FALSE_POSITIVE = "false_positive"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    alert_keys = models.JSONField(help_text="occurrence keys (fingerprint@startsAt) the decision names")
    correlation_key = models.CharField(max_length=255, blank=True, default="", db_index=True)
    by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    at = models.DateTimeField()
    action = models.ForeignKey(
        IncidentAction, on_delete=models.SET_NULL, null=True, blank=True, related_name="decisions"
    )

    class Meta:
        ordering = ["at", "id"]


class CorrelationLock(models.Model):
    """One row per correlation key, locked while that key is correlated (the SQLite stand-in
    for PostgreSQL's advisory lock; PostgreSQL locks the row too, harmlessly). Each run writes a
    fresh `run_token`: a worker that kept the key's state from its own last run knows that state
    is still current when it finds its own token there (see `incidents.services.correlation.state`)."""

    key = models.CharField(max_length=255, unique=True)
    run_token = models.CharField(max_length=32, blank=True, default="")


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


class EvidenceGap(models.Model):
    """What evidence is missing for an incident, and since when (Prometheus unset or down)."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="evidence_gaps")
    signal = models.CharField(max_length=100)
    error = models.TextField()
    since = models.DateTimeField()
    last_tried = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["incident", "signal"], name="evidence_gap_unique")]


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
