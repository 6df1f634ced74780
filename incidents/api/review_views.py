"""The weekly review API (docs/contract.md, Weekly review): its JSON, its Markdown, its CSV tables."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from incidents.api.errors import ApiErrors
from incidents.api.serializers import ErrorSerializer
from incidents.review.export import TABLES, review_markdown, table_csv, tables_zip
from incidents.review.report import review
from incidents.review.weeks import BadWeek, Week

WEEK = OpenApiParameter(
    "week", str, description="ISO week in UTC, e.g. 2026-W49; default: the last complete week"
)


def asked_week(request: Request) -> Week:
    raw = request.query_params.get("week")
    if raw is None or raw == "":
        return Week.last_complete(timezone.now())
    try:
        return Week.parse(raw)
    except BadWeek as exc:
        raise ValidationError({"week": [str(exc).removeprefix("week: ")]}) from exc


class ReviewJson(ApiErrors, APIView):
    """The review of an ISO week with the eight weeks before it as trend."""

    query_params = frozenset({"week"})

    @extend_schema(parameters=[WEEK], responses={200: OpenApiTypes.OBJECT, 400: ErrorSerializer})
    def get(self, request: Request) -> Response:
        return Response(review(asked_week(request), timezone.now()))


class ReviewMarkdown(ApiErrors, APIView):
    """The review as Markdown; its first heading names the ISO week."""

    query_params = frozenset({"week"})

    @extend_schema(
        parameters=[WEEK], responses={(200, "text/markdown"): OpenApiTypes.STR, 400: ErrorSerializer}
    )
    def get(self, request: Request) -> HttpResponse:
        week = asked_week(request)
        response = HttpResponse(
            review_markdown(review(week, timezone.now())), content_type="text/markdown; charset=utf-8"
        )
        response["Content-Disposition"] = f'inline; filename="review-{week}.md"'
        return response


class ReviewCsv(ApiErrors, APIView):
    """One table of the review as CSV (`table=`), or a zip of every table."""

    query_params = frozenset({"week", "table"})

    @extend_schema(
        parameters=[
            WEEK,
            OpenApiParameter("table", str, enum=list(TABLES), description="default: a zip of every table"),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/zip"): OpenApiTypes.BINARY,
            400: ErrorSerializer,
        },
    )
    def get(self, request: Request) -> HttpResponse:
        week = asked_week(request)
        name = request.query_params.get("table") or ""
        if name and name not in TABLES:
            raise ValidationError({"table": [f"unknown table {name[:80]!r}; known: {', '.join(TABLES)}"]})
        figures = review(week, timezone.now())
        if name:
            response = HttpResponse(table_csv(figures, name), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="review-{week}-{name}.csv"'
        else:
            response = HttpResponse(tables_zip(figures), content_type="application/zip")
            response["Content-Disposition"] = f'attachment; filename="review-{week}.zip"'
        return response
