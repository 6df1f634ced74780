"""Request checks every page shares."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils import timezone

from incidents.services.people import time_zone_names, time_zone_of


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


class TimeZoneMiddleware:
    """Pages show times in the signed-in person's time zone (UTC unless they set theirs): read
    from their profile once a session, kept in the session after that. The API, the webhooks and
    exports answer in UTC whoever asks."""

    SESSION_KEY = "rootline_time_zone"

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = "UTC"
        if (
            not request.path_info.startswith(("/api/", "/hooks/"))
            and request.user.is_authenticated
            and isinstance(request.user, User)
        ):
            name = request.session.get(self.SESSION_KEY) or ""
            if name not in time_zone_names():
                name = time_zone_of(request.user)
                request.session[self.SESSION_KEY] = name
        timezone.activate(zoneinfo.ZoneInfo(name))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def client_address(request: HttpRequest) -> str | None:
    """The address a request came from, as sign-in lockout counts it (django-axes). Behind the
    HTTPS proxy (ROOTLINE_HTTPS=1, which trusts its X-Forwarded-Proto already) every request
    arrives from the proxy, so the client is the last address the proxy appended to
    X-Forwarded-For; what a client wrote there itself comes before it and is not believed."""
    if settings.HTTPS:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if forwarded[-1]:
            return forwarded[-1][:100]
    return request.META.get("REMOTE_ADDR")
