"""One error shape for the whole API, `{"error": "<what is wrong, where>"}`, as the contract's
actions answer it, and the query-parameter checks every endpoint makes before it reads anything:
a client's mistake is a 4xx that names the parameter, never a 500 (PostgreSQL refuses NUL bytes
in text) and never a silently ignored filter."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import QueryDict
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

ALWAYS_ALLOWED = frozenset({"format"})  # DRF's format override (`?format=json`)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, RequestDataTooBig):  # else Django's bare HTML 400
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response({"error": f"body: over the limit of {limit} bytes (ROOTLINE_MAX_BODY)"}, status=413)
    response = exception_handler(exc, context)
    if response is not None:
        response.data = {"error": message_of(response.data)}
    return response


def message_of(detail: Any) -> str:
    if isinstance(detail, dict):
        if set(detail) == {"detail"}:
            return message_of(detail["detail"])
        return "; ".join(f"{key}: {message_of(value)}" for key, value in detail.items())
    if isinstance(detail, (list, tuple)):
        return "; ".join(message_of(item) for item in detail)
    return str(detail)


def query_check(params: QueryDict, allowed: frozenset[str]) -> None:
    for key, values in params.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            raise ValidationError({shown(key): "contains a NUL byte"})
        if key not in allowed and key not in ALWAYS_ALLOWED:
            takes = ", ".join(sorted(allowed)) or "no query parameters"
            raise ValidationError({shown(key): f"unknown query parameter; this endpoint takes {takes}"})


def body_text_check(data: Any, path: str = "") -> None:
    """Every text in a JSON body, keys included, must be storable: PostgreSQL takes neither NUL
    nor the lone surrogates JSON can carry (`\\ud800`). Raises a 400 naming the first one."""
    if isinstance(data, str):
        problem = "contains a NUL byte" if "\x00" in data else None
        if problem is None:
            try:
                data.encode("utf-8")
            except UnicodeEncodeError:
                problem = "contains an unpaired surrogate (not valid Unicode)"
        if problem:
            raise ValidationError({path or "body": problem})
    elif isinstance(data, dict):
        for key, value in data.items():
            body_text_check(key, path or "body")
            body_text_check(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            body_text_check(value, f"{path}[{index}]")


def shown(text: str) -> str:
    return repr(text[:60]) if len(text) > 60 or not text.isprintable() else text


class ApiErrors(APIView):
    """Mixed into every API view: the contract's error shape, and `query_params` (the parameters
    the view reads) checked after authentication, so that an anonymous client gets its 401 first."""

    query_params: frozenset[str] = frozenset()

    def get_exception_handler(self):
        return api_exception_handler

    def initial(self, request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        query_check(request.query_params, self.query_params)
