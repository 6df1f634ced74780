from datetime import datetime

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from correlate.ingest.common import FieldError, parse_time
from incidents import selectors
from incidents.action_bodies import incident_act_on_body
from incidents.api.errors import ApiErrors, shown
from incidents.api.serializers import (
    ActionBodySerializer,
    AlertSerializer,
    ErrorSerializer,
    IncidentDetailSerializer,
    IncidentSerializer,
    SplitResultSerializer,
)
from incidents.models import Alert, AuditRecord, Incident
from incidents.services.errors import RootlineError
from incidents.services.roles import acting_user


@extend_schema(
    parameters=[
        OpenApiParameter("status", OpenApiTypes.STR, enum=["firing", "resolved"]),
        OpenApiParameter("fingerprint", OpenApiTypes.STR),
        OpenApiParameter(
            "label", OpenApiTypes.STR, many=True, description="KEY:VALUE; repeat to require several"
        ),
        OpenApiParameter(
            "since", OpenApiTypes.DATETIME, description="RFC 3339: alerts that started then or later"
        ),
        OpenApiParameter("page_size", OpenApiTypes.INT, description="up to 500"),
    ]
)
class AlertList(ApiErrors, generics.ListAPIView):
    """What arrived, stored and deduplicated: one row per alert occurrence, newest first."""

    serializer_class = AlertSerializer
    query_params = frozenset({"status", "fingerprint", "label", "since", "page", "page_size"})

    def get_queryset(self) -> QuerySet[Alert]:
        params = self.request.query_params
        alerts = Alert.objects.order_by("-starts_at", "-id")
        status = params.get("status")
        if status:
            if status not in Alert.Status.values:
                raise ValidationError({"status": f"expected firing or resolved, got {status[:60]!r}"})
            alerts = alerts.filter(status=status)
        if params.get("fingerprint"):
            alerts = alerts.filter(fingerprint=params["fingerprint"])
        for label in params.getlist("label"):
            key, sep, value = label.partition(":")
            if not sep or not key:
                raise ValidationError({"label": f"expected KEY:VALUE, got {label[:60]!r}"})
            alerts = alerts.with_label(key, value)
        since = since_param(params)
        if since is not None:
            alerts = alerts.filter(starts_at__gte=since)
        return alerts


def since_param(params) -> datetime | None:
    if "since" not in params:
        return None
    try:
        moment = parse_time(params["since"], "since")
    except FieldError as exc:
        raise ValidationError(str(exc)) from None
    if moment is None:
        raise ValidationError({"since": "Go's zero time is no time"})
    return moment


@extend_schema(
    parameters=[
        OpenApiParameter(
            "status",
            OpenApiTypes.STR,
            enum=["open", "resolved", "all"],
            description="default open: everything not resolved",
        ),
        OpenApiParameter(
            "since", OpenApiTypes.DATETIME, description="RFC 3339: incidents that started then or later"
        ),
        OpenApiParameter("page_size", OpenApiTypes.INT, description="up to 500"),
    ]
)
class IncidentList(ApiErrors, generics.ListAPIView):
    """Incidents, newest first, each with its root cause and its chain (cause before effect)."""

    serializer_class = IncidentSerializer
    query_params = frozenset({"status", "since", "page", "page_size"})

    def get_queryset(self):
        status = self.request.query_params.get("status", "open")
        if status not in ("open", "resolved", "all"):
            raise ValidationError({"status": f"expected open, resolved or all, got {status[:60]!r}"})
        return selectors.incidents_list(status=status, since=since_param(self.request.query_params))

    def list(self, request: Request, *args, **kwargs) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        context = {**self.get_serializer_context(), "chain_alerts": selectors.chain_alerts(page)}
        return self.get_paginated_response(IncidentSerializer(page, many=True, context=context).data)


def incident_or_404(incident_id: int):
    incident = selectors.incident_detail(incident_id)
    if incident is None:
        raise NotFound(f"no incident {incident_id}")
    return incident


def incident_payload(request: Request, incident_id: int) -> dict:
    incident = incident_or_404(incident_id)
    context = {"request": request, "chain_alerts": {alert.pk: alert for alert in incident.alerts.all()}}
    return IncidentDetailSerializer(incident, context=context).data


class IncidentDetail(ApiErrors, APIView):
    """One incident with its alerts, edges, ranked root candidates and durations."""

    @extend_schema(responses=IncidentDetailSerializer)
    def get(self, request: Request, incident_id: int) -> Response:
        return Response(incident_payload(request, incident_id))


class IncidentActions(ApiErrors, APIView):
    """Act on an incident: {"action": ..., "at"?: RFC 3339, ...}; every action is recorded with who
    and when."""

    @extend_schema(
        request=ActionBodySerializer,
        responses={
            200: PolymorphicProxySerializer(
                component_name="ActionResult",
                serializers=[IncidentDetailSerializer, SplitResultSerializer],
                resource_type_field_name=None,
                many=False,
            ),
            202: IncidentDetailSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        description='200 with the incident (merge: the surviving one; split: {"incidents": [...]}), 202 for '
        "refresh_evidence, 400 for a bad body, 403 below the responder role, 409 for a state that does "
        "not allow it.",
    )
    def post(self, request: Request, incident_id: int) -> Response:
        incident = Incident.objects.filter(pk=incident_id).first()
        if incident is None:
            raise NotFound(f"no incident {incident_id}")
        try:
            outcome = incident_act_on_body(
                incident=incident, user=acting_user(request.user), via=AuditRecord.Via.API, body=request.data
            )
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
        status = 202 if outcome.accepted else 200
        if outcome.split:
            return Response(
                {"incidents": [incident_payload(request, item.pk) for item in outcome.incidents]},
                status=status,
            )
        return Response(incident_payload(request, outcome.incidents[0].pk), status=status)


class SchemaView(ApiErrors, SpectacularAPIView):
    """The OpenAPI document, behind the same sign-in as the API it describes (drf-spectacular
    serves it to anyone by default). It takes what drf-spectacular reads (`?format=`, `?lang=`)
    and, like every other endpoint, refuses any other query parameter rather than ignore it."""

    permission_classes = [IsAuthenticated]
    query_params = frozenset({"lang"})

    def handle_exception(self, exc: Exception) -> Response:
        """Errors in the API's JSON shape, not rendered as an OpenAPI document (YAML by default)."""
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


@csrf_exempt
def no_such_route(request: HttpRequest) -> HttpResponse:
    """Every path under /api/ that no API route matches (`/api/v1/nope`, `/api/v1/incidents/abc/`):
    a 404 in the API's error shape rather than Django's HTML page, whatever the method, the
    credentials or DEBUG. Matching every path, this route would stop CommonMiddleware from sending
    a path missing its slash to the route it names, so it does that itself, as APPEND_SLASH would."""
    if not request.path_info.endswith("/") and names_an_api_route(request.path_info + "/"):
        return HttpResponsePermanentRedirect(request.get_full_path(force_append_slash=True))
    where = f"{request.method} {shown(request.path)}"
    return JsonResponse(
        {"error": f"{where}: no such API route (the routes are listed at /api/v1/schema/)"}, status=404
    )


def names_an_api_route(path: str) -> bool:
    try:
        return resolve(path).func is not no_such_route
    except Resolver404:
        return False
