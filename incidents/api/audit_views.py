"""`GET /api/v1/audit/` (admins): every change a person made, oldest first, filtered by `since`,
`user` and `object` (KIND:ID)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from incidents.api.errors import ApiErrors
from incidents.api.views import since_param
from incidents.models import AuditRecord
from incidents.services.roles import has_role


class IsAdmin(BasePermission):
    message = "this needs the admin role"

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and has_role(request.user, "admin"))


class AuditRecordSerializer(serializers.ModelSerializer):
    by = serializers.SerializerMethodField()
    object = serializers.CharField(source="object_label")

    class Meta:
        model = AuditRecord
        fields = ["id", "at", "by", "via", "object", "action", "field", "old", "new", "detail"]

    def get_by(self, record: AuditRecord) -> str | None:
        return record.by_name or None


@extend_schema(
    parameters=[
        OpenApiParameter("since", OpenApiTypes.DATETIME, description="RFC 3339: records at or after"),
        OpenApiParameter("user", OpenApiTypes.STR, description="the username who made the change"),
        OpenApiParameter("object", OpenApiTypes.STR, description="KIND:ID, e.g. incident:12"),
        OpenApiParameter("page_size", OpenApiTypes.INT, description="up to 500"),
    ]
)
class AuditList(ApiErrors, generics.ListAPIView):
    """Who changed what, when and from where (page, api, import, admin, system), with old and new."""

    serializer_class = AuditRecordSerializer
    permission_classes = [IsAdmin]
    query_params = frozenset({"since", "user", "object", "page", "page_size"})

    def get_queryset(self) -> QuerySet[AuditRecord]:
        params = self.request.query_params
        records = AuditRecord.objects.order_by("at", "id")
        since = since_param(params)
        if since is not None:
            records = records.filter(at__gte=since)
        if "user" in params:
            records = records.filter(by_name=params["user"])
        if "object" in params:
            kind, sep, object_id = params["object"].partition(":")
            if not sep or not kind or not object_id:
                raise ValidationError({"object": f"expected KIND:ID, got {params['object'][:60]!r}"})
            records = records.for_object(kind, object_id)
        return records
