"""Request checks every page shares."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest


class NulQueryMiddleware:
    """A query string holding a NUL byte is a 400 on every page. PostgreSQL refuses NUL in text,
    so a page that filters on a parameter (the admin's list filters: `?status=%00`) would
    otherwise answer a 500. The API checks its own parameters, after authentication and in its
    JSON error shape (`incidents.api.errors.query_check`); the webhooks take none."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(("/api/", "/hooks/")) and any(
            "\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists()
        ):
            return HttpResponseBadRequest(
                "query string: contains a NUL byte", content_type="text/plain; charset=utf-8"
            )
        return self.get_response(request)
