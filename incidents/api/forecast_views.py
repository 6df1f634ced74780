"""What usually comes next (docs/contract.md, Incidents): an open incident's likely next effects."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from correlate.forecast import PLACES, SOURCES
from incidents.api.errors import ApiErrors
from incidents.api.evidence_views import incident_or_404
from incidents.api.serializers import ErrorSerializer
from incidents.forecast import next_effects


class LagSerializer(serializers.Serializer):
    p50 = serializers.IntegerField(help_text="seconds after the step it counts from")
    p90 = serializers.IntegerField()


class AfterSerializer(serializers.Serializer):
    failure_mode = serializers.CharField()
    scope = serializers.ChoiceField(list(PLACES))
    at = serializers.DateTimeField()


class NextEffectSerializer(serializers.Serializer):
    failure_mode = serializers.CharField()
    layer = serializers.CharField()
    scope = serializers.ChoiceField(
        list(PLACES), help_text="seen from the root: its pod, its node, its siblings, the model's route"
    )
    where = serializers.CharField(help_text="the place as words, named from the incident's scope")
    lag_s = LagSerializer()
    seen = serializers.IntegerField(help_text="how many of the `of` past incidents like this one had it")
    of = serializers.IntegerField(help_text="past incidents like this one (fewer than 3: the rules speak)")
    # A field named like DRF's Field.source attribute: the serializer's metaclass takes it as a field.
    source = serializers.ChoiceField(list(SOURCES))  # type: ignore[assignment]
    after = AfterSerializer(help_text="the step the lags count from")
    expected_at = serializers.DateTimeField(help_text="that step's time plus the p50 lag")
    expires_at = serializers.DateTimeField(help_text="dropped after this: its p90 lag has passed")


class IncidentNext(ApiErrors, APIView):
    """The likely next effects of an incident still going on, best first (none once resolved):
    from resolved incidents like it, or from the catalog's rules while fewer than 3 are."""

    @extend_schema(responses={200: NextEffectSerializer(many=True), 404: ErrorSerializer})
    def get(self, request: Request, incident_id: int) -> Response:
        found = next_effects(incident_or_404(incident_id))["effects"]
        return Response(NextEffectSerializer(found, many=True).data)
