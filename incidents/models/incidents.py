"""Incidents and what made them: the engine's edges and root candidates, the actions people took,
the grouping decisions they made, the imported actions still waiting for their alerts."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.utils import timezone


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
    chain_signature = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="its chain's distinct layer:failure_mode pairs in causal order (incidents/signatures.py)",
    )
    cascade = models.JSONField(
        default=list,
        blank=True,
        help_text="its distinct steps [layer, failure_mode, place, seconds after its start, alert id] in "
        "firing order (correlate/forecast.py): what comes next is read from the resolved ones",
    )
    first_red_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="its evidence's first crossing into red, kept by evidence collection: with its first "
        "alert, the onset its durations (and the weekly review's) are timed from",
    )
    evidence_collected_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when its last evidence collection that finished had started: changed since and no "
        "collection pending, beat's `incidents.requeue_evidence` asks for one (its worker may have died)",
    )
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
        indexes = [
            models.Index(fields=["status", "started_at"], name="incident_status_idx"),
            # The queue's tabs, newest first, over a year of incidents: all visible ones, and the
            # few still open (a scan of every incident cost the page most of its time).
            models.Index(
                F("started_at").desc(), F("id").desc(), condition=Q(merged_into__isnull=True),
                name="incident_visible_recent_idx",
            ),
            models.Index(
                F("started_at").desc(), F("id").desc(),
                condition=Q(merged_into__isnull=True) & ~Q(status="resolved"),
                name="incident_open_recent_idx",
            ),
            # "Seen before": the newest earlier incidents of one signature.
            models.Index(F("chain_signature"), F("started_at").desc(), name="incident_signature_recent_idx"),
        ]  # fmt: skip
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
    # insert tens of thousands of them, each row checked by three key triggers (a lookup each, a
    # real share of PostgreSQL's time in bench/correlate/end_to_end.py's storm).
    incident = models.ForeignKey(
        Incident, on_delete=models.CASCADE, related_name="edges", db_constraint=False, db_index=False
    )
    cause = models.ForeignKey("Alert", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    effect = models.ForeignKey("Alert", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    rule = models.CharField(max_length=200)
    lag_seconds = models.FloatField()
    relation = models.CharField(max_length=60, blank=True, default="")

    class Meta:
        ordering = ["cause_id", "effect_id", "rule"]
        # In place of the key's own index (no more index to write): the incident page reads a
        # storm's first edges by id, which the key alone made a walk of every edge in the table.
        indexes = [models.Index(fields=["incident", "id"], name="incident_edge_incident_id_idx")]

    def __str__(self) -> str:
        return f"incident {self.incident_id}: {self.cause_id} -> {self.effect_id}"


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

    def __str__(self) -> str:
        return f"incident {self.incident_id}: candidate alert {self.alert_id}"


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

    def __str__(self) -> str:
        return f"{self.action} on incident {self.incident_id} at {self.at:%Y-%m-%d %H:%M:%S}"


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

    def __str__(self) -> str:
        return f"{self.kind} in {self.correlation_key or '-'} at {self.at:%Y-%m-%d %H:%M:%S}"


class CorrelationLock(models.Model):
    """One row per correlation key, locked while that key is correlated (the SQLite stand-in
    for PostgreSQL's advisory lock; PostgreSQL locks the row too, harmlessly). Each run writes a
    fresh `run_token`: a worker that kept the key's state from its own last run knows that state
    is still current when it finds its own token there (see `incidents.services.correlation.state`)."""

    key = models.CharField(max_length=255, unique=True)
    run_token = models.CharField(max_length=32, blank=True, default="")

    def __str__(self) -> str:
        return self.key
