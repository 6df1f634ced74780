"""Where alerts come from: integrations that send them, the deliveries they made, the alerts
those held."""

from __future__ import annotations

import hashlib
import hmac
from functools import cached_property

from django.db import connections, models
from django.db.models import Q, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, NullIf

from correlate.events import occurrence_key
from incidents.fields import StringMapField


def storable_id(value: int) -> bool:
    """Whether an id a client sent can name a row: ids are 64-bit. A bigger one names nothing
    (PostgreSQL compares it and finds no row; SQLite's driver raised OverflowError, a 500)."""
    return 0 < value < 2**63


def token_digest(token: str) -> str:
    """SHA-256, not a password hash: tokens are long random strings, and a password hash is slow
    by design, a cost every webhook request would pay."""
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
    delivery, good or bad, can be replayed after a fix, until retention empties it
    (`body_pruned_at`, docs/retention.md)."""

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
    body_pruned_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when retention emptied its body (ROOTLINE_RETAIN_BODIES_DAYS); row and digest stay",
    )

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


PLACE_LABELS = (
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
)


def place_named(labels: dict) -> str:
    """The narrowest place a label map names (an alert's `where`), "" when it names none."""
    for name in PLACE_LABELS:
        if labels.get(name):
            return labels[name]
    return ""


def place_expression() -> models.Func:
    """`place_named` of the stored labels, computed by the database: a storm's chain is told by
    name and place over thousands of alerts, and decoding each one's labels in Python cost more
    than the page's every query."""
    values = [
        NullIf(Cast(KeyTextTransform(name, "labels"), models.TextField()), Value("")) for name in PLACE_LABELS
    ]
    return Coalesce(*values, Value(""), output_field=models.TextField())


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
    # reference changed, and alerts arrive by the thousand a second in a storm (its INSERTs and the
    # correlation's UPDATEs are faster without them). Only Rootline's own
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
    # NULL is "not classified", which the engine and the filters tell apart from an empty label.
    layer = models.CharField(max_length=20, null=True, blank=True)  # noqa: DJ001
    failure_mode = models.CharField(max_length=30, null=True, blank=True)  # noqa: DJ001
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
            # year of alerts"). It costs each firing alert's insert and correlation update a little.
            models.Index(fields=["starts_at", "id"], condition=Q(status="firing"), name="alert_firing_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.alertname or self.fingerprint} @ {self.starts_at:%Y-%m-%d %H:%M:%S}"

    @property
    def where(self) -> str:
        """The narrowest place the labels name, for pages."""
        return place_named(self.labels)

    @cached_property
    def key(self) -> str:
        """The occurrence key the engine and human decisions use (an occurrence's fingerprint
        and start never change, so it is computed once per instance)."""
        return occurrence_key(self.fingerprint, self.starts_at)
