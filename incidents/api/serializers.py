"""JSON shapes of the contract. Incident shapes are built from rows a selector loaded in bulk."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from incidents.action_bodies import ACTION_FIELDS
from incidents.models import Alert, Incident
from incidents.selectors import fired_before_a_cause
from incidents.timeline import incident_durations


class AlertSerializer(serializers.ModelSerializer):
    incident = serializers.IntegerField(source="incident_id", allow_null=True, read_only=True)

    class Meta:
        model = Alert
        fields = [
            "id",
            "fingerprint",
            "alertname",
            "status",
            "labels",
            "annotations",
            "starts_at",
            "ends_at",
            "layer",
            "failure_mode",
            "incident",
            "false_positive",
            "kind",
        ]


class RootCauseSerializer(serializers.Serializer):
    alert_id = serializers.IntegerField()
    alertname = serializers.CharField()
    layer = serializers.CharField(allow_null=True)
    failure_mode = serializers.CharField(allow_null=True)
    confidence = serializers.FloatField()
    explanation = serializers.CharField()


class ChainLinkSerializer(serializers.Serializer):
    alert_id = serializers.IntegerField()
    alertname = serializers.CharField()
    layer = serializers.CharField(allow_null=True)
    failure_mode = serializers.CharField(allow_null=True)
    started_at = serializers.DateTimeField()
    onset_at = serializers.DateTimeField(
        allow_null=True,
        help_text="when its condition began, estimated from its rule's window (the chain is in this "
        "order; started_at is when it fired)",
    )
    fired_before_cause = serializers.BooleanField(
        help_text="it fired before a step listed ahead of it: the causal and firing orders differ here"
    )


class IncidentSerializer(serializers.ModelSerializer):
    alert_count = serializers.IntegerField(read_only=True)
    root_cause = serializers.SerializerMethodField()
    chain = serializers.SerializerMethodField()
    assignee = serializers.CharField(
        source="assignee.username", default=None, read_only=True, allow_null=True
    )
    merged_into = serializers.IntegerField(
        source="merged_into_id",
        allow_null=True,
        read_only=True,
        help_text="the incident this one was merged into (its alerts and actions go on there); "
        "null if not merged",
    )

    class Meta:
        model = Incident
        fields = [
            "id",
            "title",
            "status",
            "severity",
            "started_at",
            "acknowledged_at",
            "mitigated_at",
            "resolved_at",
            "alert_count",
            "failure_modes",
            "layers",
            "scope",
            "root_cause",
            "chain",
            "chain_signature",
            "assignee",
            "degradation",
            "ranking_held",
            "merged_into",
        ]

    @extend_schema_field(RootCauseSerializer(allow_null=True))
    def get_root_cause(self, incident: Incident) -> dict | None:
        root = incident.root_alert
        if root is None:
            return None
        return {
            "alert_id": root.pk,
            "alertname": root.alertname,
            "layer": root.layer,
            "failure_mode": root.failure_mode,
            "confidence": incident.root_confidence,
            "explanation": incident.root_explanation,
        }

    @extend_schema_field(ChainLinkSerializer(many=True))
    def get_chain(self, incident: Incident) -> list[dict]:
        alerts = self.context["chain_alerts"]
        chain = [alerts[alert_id] for alert_id in incident.chain if alert_id in alerts]
        return [
            {
                "alert_id": alert.pk,
                "alertname": alert.alertname,
                "layer": alert.layer,
                "failure_mode": alert.failure_mode,
                "started_at": serializers.DateTimeField().to_representation(alert.starts_at),
                "onset_at": serializers.DateTimeField().to_representation(alert.onset)
                if alert.onset
                else None,
                "fired_before_cause": early,
            }
            for alert, early in zip(chain, fired_before_a_cause(chain), strict=True)
        ]


class EdgeSerializer(serializers.Serializer):
    cause_alert_id = serializers.IntegerField(source="cause_id")
    effect_alert_id = serializers.IntegerField(source="effect_id")
    rule = serializers.CharField()
    lag_seconds = serializers.FloatField()


class CandidateSerializer(serializers.Serializer):
    alert_id = serializers.IntegerField()
    confidence = serializers.FloatField()
    explanation = serializers.CharField()


class DurationsSerializer(serializers.Serializer):
    detect_s = serializers.FloatField(allow_null=True)
    acknowledge_s = serializers.FloatField(allow_null=True)
    mitigate_s = serializers.FloatField(allow_null=True)
    resolve_s = serializers.FloatField(allow_null=True)


class IncidentDetailSerializer(IncidentSerializer):
    alerts = AlertSerializer(many=True, read_only=True)
    edges = EdgeSerializer(many=True, read_only=True)
    root_candidates = CandidateSerializer(many=True, read_only=True)
    durations = serializers.SerializerMethodField()

    class Meta(IncidentSerializer.Meta):
        fields = IncidentSerializer.Meta.fields + ["alerts", "edges", "root_candidates", "durations"]

    @extend_schema_field(DurationsSerializer)
    def get_durations(self, incident: Incident) -> dict:
        """Detection from the first red crossing or first alert, whichever came first; the other
        durations from that same onset (incidents.timeline)."""
        return incident_durations(incident)


class ActionBodySerializer(serializers.Serializer):
    """The actions endpoint's body, for the schema (incidents/action_bodies.py checks it): `action`, an
    optional `at`, and the one field its action takes; any other field is a 400."""

    action = serializers.ChoiceField(list(ACTION_FIELDS))
    at = serializers.DateTimeField(required=False, help_text="when it happened (RFC 3339); default: now")
    username = serializers.CharField(required=False, max_length=150, help_text="assign: the assignee")
    text = serializers.CharField(required=False, max_length=20_000, help_text="note")
    level = serializers.CharField(
        required=False, help_text="severity: critical|warning|info; degrade: none|L1|L2|L3"
    )
    into = serializers.IntegerField(
        required=False, help_text="merge: the incident that survives (same cluster)"
    )
    alert_ids = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="split: the alerts split off"
    )
    alert_id = serializers.IntegerField(
        required=False, help_text="exclude_alert, false_positive: one of the incident's alerts"
    )


class SplitResultSerializer(serializers.Serializer):
    incidents = IncidentDetailSerializer(
        many=True, help_text="the incident acted on first, then the ones split off"
    )


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="what is wrong, and where")
