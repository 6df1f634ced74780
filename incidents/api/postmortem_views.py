"""The postmortem API (docs/contract.md, Postmortems): the Markdown export, the draft on demand,
the list, one postmortem (GET, PATCH its sections), its revisions, and its actions."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from incidents.api.errors import ApiErrors
from incidents.api.serializers import ErrorSerializer
from incidents.models import AuditRecord, Incident, Postmortem, PostmortemRevision
from incidents.postmortems.export import postmortem_payload, revision_markdown, shown_revision
from incidents.services.errors import RootlineError
from incidents.services.postmortems import ACTIONS as POSTMORTEM_ACTIONS
from incidents.services.postmortems import postmortem_act, postmortem_of, postmortem_save
from incidents.services.remediation import postmortem_draft_suggesting
from incidents.services.roles import acting_user


class RangeSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step = serializers.FloatField()


# `label` and `source` are attributes of every DRF field, so the figure's shape is declared by name.
FIGURE_FIELDS: dict[str, serializers.Field] = {
    "key": serializers.CharField(),
    "label": serializers.CharField(),
    "value": serializers.JSONField(allow_null=True, help_text="a number, or text for affected_interfaces"),
    "unit": serializers.CharField(),
    "query": serializers.CharField(help_text="the PromQL the value came from ('' for incident figures)"),
    "range": RangeSerializer(allow_null=True),
    "source": serializers.ChoiceField(choices=["incident", "prometheus", "evidence", "import"]),
    "available": serializers.BooleanField(),
    "reason": serializers.CharField(help_text="why not available"),
    "how": serializers.CharField(help_text="what was done with the query's result"),
    "approximate": serializers.BooleanField(),
}


class SectionSerializer(serializers.Serializer):
    key = serializers.CharField()
    title = serializers.CharField()
    markdown = serializers.CharField()
    stale = serializers.BooleanField()
    edited_by = serializers.CharField(allow_null=True)
    edited_at = serializers.DateTimeField(allow_null=True)


class PostmortemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    incidents = serializers.ListField(child=serializers.IntegerField())
    status = serializers.ChoiceField(choices=Postmortem.Status.values)
    title = serializers.CharField()
    sections = SectionSerializer(many=True)
    figures = inline_serializer("Figure", FIGURE_FIELDS, many=True)
    revision = serializers.IntegerField()
    submitted_by = serializers.CharField(allow_null=True)
    approved_by = serializers.CharField(allow_null=True)
    published_at = serializers.DateTimeField(allow_null=True)
    published_by = serializers.CharField(allow_null=True)
    due_at = serializers.DateTimeField(allow_null=True)


class RevisionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    by = serializers.CharField(allow_null=True)
    at = serializers.DateTimeField()
    note = serializers.CharField()
    published = serializers.BooleanField()


def postmortem_or_404(postmortem_id: int) -> Postmortem:
    found = Postmortem.objects.filter(pk=postmortem_id).first()
    if found is None:
        raise NotFound(f"no postmortem {postmortem_id}")
    return found


def incident_or_404(incident_id: int) -> Incident:
    found = Incident.objects.filter(pk=incident_id).first()
    if found is None:
        raise NotFound(f"no incident {incident_id}")
    return found


class IncidentPostmortemMarkdown(ApiErrors, APIView):
    """The incident's postmortem as Markdown: its latest published revision, else the draft."""

    @extend_schema(responses={(200, "text/markdown"): OpenApiTypes.STR, 404: ErrorSerializer})
    def get(self, request: Request, incident_id: int) -> HttpResponse:
        postmortem = postmortem_of(incident_or_404(incident_id))
        if postmortem is None:
            raise NotFound(f"incident {incident_id} has no postmortem")
        return HttpResponse(
            revision_markdown(shown_revision(postmortem)), content_type="text/markdown; charset=utf-8"
        )


class IncidentPostmortem(ApiErrors, APIView):
    """POST: the incident's postmortem drafted from facts (200 with the existing one if it has one)."""

    @extend_schema(request=None, responses={200: PostmortemSerializer, 201: PostmortemSerializer})
    def post(self, request: Request, incident_id: int) -> Response:
        incident = incident_or_404(incident_id)
        try:
            postmortem, created = postmortem_draft_suggesting(
                incident=incident, user=acting_user(request.user), via=AuditRecord.Via.API
            )
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
        return Response(postmortem_payload(postmortem), status=201 if created else 200)


@extend_schema(
    parameters=[
        OpenApiParameter("incident", OpenApiTypes.INT, description="postmortems covering this incident"),
        OpenApiParameter("status", OpenApiTypes.STR, enum=Postmortem.Status.values),
    ],
    responses={200: PostmortemSerializer(many=True)},
)
class PostmortemList(ApiErrors, generics.ListAPIView):
    """Postmortems, newest first."""

    query_params = frozenset({"incident", "status", "page", "page_size"})
    serializer_class = PostmortemSerializer

    def get_queryset(self) -> QuerySet[Postmortem]:
        params = self.request.query_params
        found = Postmortem.objects.order_by("-created_at", "-id")
        if "status" in params:
            if params["status"] not in Postmortem.Status.values:
                raise ValidationError({"status": f"expected one of {', '.join(Postmortem.Status.values)}"})
            found = found.filter(status=params["status"])
        if "incident" in params:
            value = params["incident"]
            if not (value.isascii() and value.isdigit() and len(value) < 19):
                raise ValidationError({"incident": "expected an incident id"})
            found = found.filter(incidents=int(value))
        return found

    def list(self, request: Request, *args, **kwargs) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        return self.get_paginated_response([postmortem_payload(p) for p in page])


class PostmortemDetail(ApiErrors, APIView):
    @extend_schema(responses={200: PostmortemSerializer, 404: ErrorSerializer})
    def get(self, request: Request, postmortem_id: int) -> Response:
        return Response(postmortem_payload(postmortem_or_404(postmortem_id)))

    @extend_schema(
        request=inline_serializer(
            "PostmortemSections",
            {
                "sections": serializers.ListField(
                    child=inline_serializer(
                        "SectionEdit", {"key": serializers.CharField(), "markdown": serializers.CharField()}
                    )
                )
            },
        ),  # fmt: skip
        responses={200: PostmortemSerializer, 400: ErrorSerializer, 409: ErrorSerializer},
        description="Saves a new revision with these sections replaced; 409 once published.",
    )
    def patch(self, request: Request, postmortem_id: int) -> Response:
        postmortem = postmortem_or_404(postmortem_id)
        try:
            saved = postmortem_save(
                postmortem=postmortem,
                user=acting_user(request.user),
                via=AuditRecord.Via.API,
                body=request.data,
            )
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
        return Response(postmortem_payload(saved))


class PostmortemRevisions(ApiErrors, APIView):
    @extend_schema(responses={200: RevisionSerializer(many=True)})
    def get(self, request: Request, postmortem_id: int) -> Response:
        postmortem = postmortem_or_404(postmortem_id)
        return Response(
            [_revision_row(r) for r in postmortem.revisions.select_related("by").order_by("number")]
        )


class PostmortemRevisionDetail(ApiErrors, APIView):
    @extend_schema(responses={200: PostmortemSerializer, 404: ErrorSerializer})
    def get(self, request: Request, postmortem_id: int, number: int) -> Response:
        postmortem = postmortem_or_404(postmortem_id)
        revision = PostmortemRevision.objects.filter(postmortem=postmortem, number=number).first()
        if revision is None:
            raise NotFound(f"postmortem {postmortem_id} has no revision {number}")
        return Response(postmortem_payload(postmortem, revision))


class PostmortemActions(ApiErrors, APIView):
    @extend_schema(
        request=inline_serializer(
            "PostmortemAction",
            {
                "action": serializers.ChoiceField(choices=sorted(POSTMORTEM_ACTIONS)),
                "section": serializers.CharField(required=False),
                "incident": serializers.IntegerField(required=False),
            },
        ),
        responses={
            200: PostmortemSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def post(self, request: Request, postmortem_id: int) -> Response:
        postmortem = postmortem_or_404(postmortem_id)
        try:
            done = postmortem_act(
                postmortem=postmortem,
                user=acting_user(request.user),
                via=AuditRecord.Via.API,
                body=request.data,
            )
        except RootlineError as exc:
            return Response({"error": exc.message}, status=exc.http_status)
        return Response(postmortem_payload(done))


def _revision_row(revision: PostmortemRevision) -> dict:
    return {
        "number": revision.number,
        "by": revision.by.get_username() if revision.by else None,
        "at": revision.at.isoformat().replace("+00:00", "Z"),
        "note": revision.note,
        "published": revision.published,
    }
