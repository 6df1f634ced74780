"""The incident's timeline and root-cause matrix as JSON: rebuilt from stored evidence on read."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from correlate.forecast import SOURCES
from incidents.api.errors import ApiErrors, body_text_check
from incidents.models import AuditRecord, Incident
from incidents.services.errors import RootlineError
from incidents.services.matrix import matrix_edit
from incidents.services.roles import acting_user
from incidents.timeline import incident_matrix, incident_timeline


class PredictedSerializer(serializers.Serializer):
    lead_s = serializers.IntegerField(help_text="how long before it came it had been predicted")
    # A field named like DRF's Field.source attribute: the serializer's metaclass takes it as a field.
    source = serializers.ChoiceField(list(SOURCES))  # type: ignore[assignment]
    similar = serializers.IntegerField(help_text="past incidents like this one when it came")


class TimelineItemSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.ChoiceField(["alert_fired", "alert_resolved", "threshold", "action", "note", "change"])
    layer = serializers.CharField()
    title = serializers.CharField()
    detail = serializers.CharField()
    # A field named like DRF's Field.source attribute: the serializer's metaclass takes it as a field.
    source = serializers.CharField()  # type: ignore[assignment]
    signal = serializers.CharField(required=False, help_text="threshold items: the catalog band")
    band = serializers.ChoiceField(
        ["green", "yellow", "red"], required=False, help_text="threshold items: the band entered"
    )
    value = serializers.FloatField(required=False, help_text="threshold items: the value at the crossing")
    action = serializers.CharField(required=False, help_text="action and note items")
    by = serializers.CharField(required=False, allow_null=True)
    alert_id = serializers.IntegerField(required=False, allow_null=True)
    predicted = PredictedSerializer(
        required=False, help_text="alert_fired items: among the top 3 predictions when it came"
    )


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "integer"}]})
class EvidenceRefId(serializers.Field):
    """An alert's or action's id is a number, a threshold's or catalog entry's a name."""

    def to_representation(self, value):
        return value


class EvidenceRefSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(["alert", "threshold", "action", "change", "catalog"])
    id = EvidenceRefId()


class MatrixCellSerializer(serializers.Serializer):
    text = serializers.CharField()
    evidence = EvidenceRefSerializer(many=True)
    edited_by = serializers.CharField(allow_null=True)


class MatrixRowSerializer(serializers.Serializer):
    layer = serializers.CharField()
    direct_cause = MatrixCellSerializer()
    system_defect = MatrixCellSerializer()
    process_gap = MatrixCellSerializer()


def incident_or_404(incident_id: int) -> Incident:
    incident = Incident.objects.filter(pk=incident_id).first()
    if incident is None:
        raise NotFound(f"no incident {incident_id}")
    return incident


def as_rfc3339(items: list[dict]) -> list[dict]:
    field = serializers.DateTimeField()
    return [{**item, "at": field.to_representation(item["at"])} for item in items]


class IncidentTimeline(ApiErrors, APIView):
    """Alerts fired and resolved, threshold crossings, human actions and changes, in time order."""

    @extend_schema(responses=TimelineItemSerializer(many=True))
    def get(self, request: Request, incident_id: int) -> Response:
        return Response(as_rfc3339(incident_timeline(incident_or_404(incident_id))))


class IncidentMatrix(ApiErrors, APIView):
    """The root-cause matrix: suggested from the evidence, cells replaced by human edits (PATCH,
    author role; every edit is kept as history)."""

    @extend_schema(responses=MatrixRowSerializer(many=True))
    def get(self, request: Request, incident_id: int) -> Response:
        return Response(incident_matrix(incident_or_404(incident_id)))

    @extend_schema(request=MatrixRowSerializer(many=True), responses=MatrixRowSerializer(many=True))
    def patch(self, request: Request, incident_id: int) -> Response:
        incident = incident_or_404(incident_id)
        body_text_check(request.data)
        try:
            return Response(
                matrix_edit(
                    incident=incident,
                    user=acting_user(request.user),
                    via=AuditRecord.Via.API,
                    body=request.data,
                )
            )
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
