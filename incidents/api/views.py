from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.exceptions import ValidationError

from incidents.api.serializers import AlertSerializer
from incidents.models import Alert


@extend_schema(
    parameters=[
        OpenApiParameter("status", OpenApiTypes.STR, enum=["firing", "resolved"]),
        OpenApiParameter("fingerprint", OpenApiTypes.STR),
        OpenApiParameter("label", OpenApiTypes.STR, many=True, description="KEY:VALUE; repeat to require several"),
        OpenApiParameter("page_size", OpenApiTypes.INT, description="up to 500"),
    ]
)
class AlertList(generics.ListAPIView):
    """What arrived, stored and deduplicated: one row per alert occurrence, newest first."""

    serializer_class = AlertSerializer

    def get_queryset(self) -> QuerySet[Alert]:
        params = self.request.query_params
        alerts = Alert.objects.order_by("-starts_at", "-id")
        status = params.get("status")
        if status:
            if status not in Alert.Status.values:
                raise ValidationError({"status": f"expected firing or resolved, got {status!r}"})
            alerts = alerts.filter(status=status)
        if params.get("fingerprint"):
            alerts = alerts.filter(fingerprint=params["fingerprint"])
        for label in params.getlist("label"):
            key, sep, value = label.partition(":")
            if not sep or not key:
                raise ValidationError({"label": f"expected KEY:VALUE, got {label!r}"})
            alerts = alerts.with_label(key, value)
        return alerts
