"""Rootline's rows: integrations that send alerts, the deliveries they made, the alerts those held."""
from __future__ import annotations

import hashlib
import hmac

from django.db import connections, models
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.db.models import Q


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
            models.CheckConstraint(condition=Q(rate_limit__isnull=True) | Q(rate_limit__gt=0), name="rate_limit_positive"),
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
    rejected = models.JSONField(default=list, blank=True, help_text="[{path, error}] of alerts that could not be read")
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            # A re-sent body answers as the first one did instead of being stored twice.
            models.UniqueConstraint(fields=["integration", "body_digest"], condition=~Q(body_digest=""), name="delivery_body_once"),
        ]
        indexes = [models.Index(fields=["status", "received_at"], name="delivery_status_idx")]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.status})"


class AlertQuerySet(models.QuerySet):
    def firing(self) -> "AlertQuerySet":
        return self.filter(status=Alert.Status.FIRING)

    def with_label(self, key: str, value: str) -> "AlertQuerySet":
        if connections[self.db].vendor == "postgresql":
            return self.filter(labels__contains={key: value})
        return self.alias(_label_value=Cast(KeyTextTransform(key, "labels"), models.TextField())).filter(_label_value=value)


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
    alertname = models.CharField(max_length=255, blank=True, default="", db_index=True)
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict, blank=True)
    generator_url = models.TextField(blank=True, default="")
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="alerts")
    first_delivery = models.ForeignKey(Delivery, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    received_at = models.DateTimeField()
    layer = models.CharField(max_length=20, null=True, blank=True)
    failure_mode = models.CharField(max_length=30, null=True, blank=True)
    false_positive = models.BooleanField(default=False)

    objects = AlertQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="alert_occurrence_unique"),
        ]
        indexes = [
            models.Index(fields=["starts_at"], name="alert_starts_idx"),
            models.Index(fields=["fingerprint", "status"], name="alert_fp_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.alertname or self.fingerprint} @ {self.starts_at:%Y-%m-%d %H:%M:%S}"
