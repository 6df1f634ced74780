"""`/api/v1/remediations/` (docs/contract.md, Remediation): the list with its filters, creating an
item, one item (GET, PATCH) and checking it now."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from correlate.ingest.common import FieldError, parse_time
from incidents.api.errors import ApiErrors
from incidents.api.serializers import ErrorSerializer
from incidents.models import AuditRecord, Incident, RemediationItem
from incidents.services.errors import RootlineError
from incidents.services.remediation import (
    is_overdue,
    remediation_check,
    remediation_create,
    remediation_update,
)
from incidents.services.roles import acting_user, has_role

ITEM_FIELDS: dict[str, serializers.Field] = {
    "id": serializers.IntegerField(),
    "incident": serializers.IntegerField(),
    "incidents": serializers.ListField(child=serializers.IntegerField()),
    "title": serializers.CharField(),
    "owner": serializers.CharField(allow_null=True),
    "horizon": serializers.ChoiceField(choices=RemediationItem.Horizon.values),
    "due_at": serializers.DateTimeField(),
    "verification": serializers.CharField(),
    "check": serializers.CharField(help_text="PromQL; holds when its result is non-empty"),
    "check_for": serializers.CharField(help_text="how long it must hold before verified (30m, 7d)"),
    "status": serializers.ChoiceField(choices=RemediationItem.Status.values),
    "overdue": serializers.BooleanField(),
    "done_at": serializers.DateTimeField(allow_null=True),
    "verified_at": serializers.DateTimeField(allow_null=True),
    "last_check": serializers.JSONField(allow_null=True, help_text="{at, query, range, result, ok, reason}"),
    "history": serializers.ListField(child=serializers.JSONField(), help_text="[{at, by, field, old, new}]"),
    "suggested": serializers.BooleanField(),
    "source": serializers.JSONField(help_text="{postmortem, layer, column, mode}"),
    "recurred": serializers.ListField(child=serializers.IntegerField()),
}
ItemSerializer = inline_serializer("RemediationItem", ITEM_FIELDS)


def item_payload(item: RemediationItem, *, history: bool = True) -> dict[str, Any]:
    records = (
        AuditRecord.objects.filter(object_kind="remediationitem", object_id=str(item.pk)).order_by("at", "id")
        if history
        else []
    )
    return {
        "id": item.pk,
        "incident": item.incident_id,
        "incidents": sorted(item.incidents.values_list("pk", flat=True)) if item.pk else [],
        "title": item.title,
        "owner": item.owner.get_username() if item.owner else None,
        "horizon": item.horizon,
        "due_at": _iso(item.due_at),
        "verification": item.verification,
        "check": item.check_expr,
        "check_for": item.check_for,
        "status": item.status,
        "overdue": is_overdue(item),
        "done_at": _iso(item.done_at),
        "verified_at": _iso(item.verified_at),
        "last_check": item.last_check,
        "history": [
            {"at": _iso(r.at), "by": r.by_name or None, "field": r.field, "old": r.old, "new": r.new}
            for r in records
        ],
        "suggested": item.suggested,
        "source": item.source,
        "recurred": list(item.recurred),
    }


def _iso(moment) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def filtered_items(params) -> QuerySet[RemediationItem]:
    """The list's filters: owner, status, overdue, incident, due_before, suggested."""
    items = RemediationItem.objects.select_related("owner").order_by("due_at", "id")
    if "owner" in params:
        items = items.filter(owner__username=params["owner"])
    if "status" in params:
        if params["status"] not in RemediationItem.Status.values:
            raise ValidationError({"status": f"expected one of {', '.join(RemediationItem.Status.values)}"})
        items = items.filter(status=params["status"])
    if "incident" in params:
        value = params["incident"]
        if not (value.isascii() and value.isdigit() and len(value) < 19):
            raise ValidationError({"incident": "expected an incident id"})
        items = items.filter(incidents=int(value))
    if "due_before" in params:
        try:
            items = items.filter(due_at__lt=parse_time(params["due_before"], "due_before"))
        except FieldError as exc:
            raise ValidationError({"due_before": str(exc)}) from None
    suggested = _flag(params, "suggested")
    items = items.filter(suggested=bool(suggested))
    overdue = _flag(params, "overdue")
    if overdue is not None:
        late = items.filter(due_at__lt=timezone.now()).exclude(status__in=("done", "verified", "wont_do"))
        items = late if overdue else items.exclude(pk__in=late.values("pk"))
    return items


def _flag(params, name: str) -> bool | None:
    if name not in params:
        return None
    value = params[name].lower()
    if value not in ("true", "false", "1", "0"):
        raise ValidationError({name: "expected true or false"})
    return value in ("true", "1")


@extend_schema(
    parameters=[
        OpenApiParameter("owner", OpenApiTypes.STR),
        OpenApiParameter("status", OpenApiTypes.STR, enum=RemediationItem.Status.values),
        OpenApiParameter("overdue", OpenApiTypes.BOOL),
        OpenApiParameter("incident", OpenApiTypes.INT),
        OpenApiParameter("due_before", OpenApiTypes.DATETIME),
        OpenApiParameter("suggested", OpenApiTypes.BOOL, description="suggestions instead of accepted items"),
    ]
)
class RemediationList(ApiErrors, generics.ListAPIView):
    """Remediation items, soonest due first; suggestions only with ?suggested=true."""

    query_params = frozenset(
        {"owner", "status", "overdue", "incident", "due_before", "suggested", "page", "page_size"}
    )
    serializer_class = ItemSerializer.__class__

    def get_queryset(self) -> QuerySet[RemediationItem]:
        return filtered_items(self.request.query_params)

    @extend_schema(responses={200: ItemSerializer})
    def list(self, request: Request, *args, **kwargs) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        return self.get_paginated_response([item_payload(item) for item in page])

    @extend_schema(
        request=inline_serializer(
            "RemediationCreate",
            {
                "incident": serializers.IntegerField(),
                "title": serializers.CharField(),
                "owner": serializers.CharField(required=False),
                "horizon": serializers.CharField(required=False),
                "due_at": serializers.DateTimeField(required=False),
                "verification": serializers.CharField(required=False),
                "check": serializers.CharField(required=False),
                "check_for": serializers.CharField(required=False),
            },
        ),
        responses={201: ItemSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def post(self, request: Request, *args, **kwargs) -> Response:
        body = request.data if isinstance(request.data, dict) else None
        incident_id = body.get("incident") if body else None
        if not isinstance(incident_id, int) or isinstance(incident_id, bool):
            return Response({"error": "incident: the id of the incident the item answers"}, status=400)
        incident = Incident.objects.filter(pk=incident_id).first()
        if incident is None:
            return Response({"error": f"incident: no incident {incident_id}"}, status=404)
        try:
            fields = {k: v for k, v in body.items() if k != "incident"}
            user = acting_user(request.user)
            item = remediation_create(incident=incident, user=user, via=AuditRecord.Via.API, body=fields)
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
        return Response(item_payload(item), status=201)


def item_or_404(item_id: int) -> RemediationItem:
    found = RemediationItem.objects.select_related("owner").filter(pk=item_id).first()
    if found is None:
        raise NotFound(f"no remediation item {item_id}")
    return found


class RemediationDetail(ApiErrors, APIView):
    @extend_schema(responses={200: ItemSerializer, 404: ErrorSerializer})
    def get(self, request: Request, item_id: int) -> Response:
        return Response(item_payload(item_or_404(item_id)))

    @extend_schema(
        request=inline_serializer("RemediationPatch", {"status": serializers.CharField(required=False)}),
        responses={200: ItemSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
        description="Any of title, owner, horizon, due_at, verification, check, check_for, status, "
        "suggested (false accepts a suggestion; status wont_do rejects it). A token's user is recorded.",
    )
    def patch(self, request: Request, item_id: int) -> Response:
        item = item_or_404(item_id)
        try:
            changed = remediation_update(item=item, user=acting_user(request.user), via=AuditRecord.Via.API,
                                         body=request.data)  # fmt: skip
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
        return Response(item_payload(changed))


class RemediationCheck(ApiErrors, APIView):
    @extend_schema(request=None, responses={202: ItemSerializer, 403: ErrorSerializer})
    def post(self, request: Request, item_id: int) -> Response:
        """Evaluate the item's check at once (202 with the item and its `last_check`)."""
        item = item_or_404(item_id)
        user = acting_user(request.user)
        if not has_role(user, "responder"):
            return Response(
                {"error": f"this needs the responder role; {user.get_username()} is a viewer"}, 403
            )
        if not item.check_expr:
            return Response({"error": "check: this item has no check to run"}, status=400)
        return Response(item_payload(remediation_check(item=item)), status=202)
