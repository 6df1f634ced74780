"""WSGI entry point for gunicorn (`make serve`) and `manage.py runserver` (`make run`, through
WSGI_APPLICATION).

Webhook POSTs (`/hooks/<kind>/<id>/`) take a short path to the same view: no URL resolution,
and only the middleware whose effect a webhook answer has (SecurityMiddleware's headers, the
host check of CommonMiddleware, X-Frame-Options); sessions, CSRF (the view is exempt), users
and messages are skipped. Its database connection is handled as Django's request signals
would, without the per-request `SELECT 1` health check: a connection the server dropped is
retried once by the view. Anything else, or a host Django would refuse, goes the full way.
What it skips was a large share of a webhook request's web CPU (`bench/ingest`).
"""

import gc
import os
import re

import django
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest

from rootline.sender_safe import SenderSafeContentType


class SenderSafeRequest(SenderSafeContentType, WSGIRequest):
    pass


class RootlineWSGIHandler(WSGIHandler):
    request_class = SenderSafeRequest


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
django.setup(set_prefix=False)  # as get_wsgi_application() does, with the request class above
django_application = RootlineWSGIHandler()

from csp.middleware import CSPMiddleware  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.exceptions import DisallowedHost  # noqa: E402
from django.core.handlers.exception import response_for_exception  # noqa: E402
from django.core.handlers.wsgi import get_script_name  # noqa: E402
from django.db import DEFAULT_DB_ALIAS, connections  # noqa: E402
from django.middleware.clickjacking import XFrameOptionsMiddleware  # noqa: E402
from django.middleware.security import SecurityMiddleware  # noqa: E402
from django.urls import set_script_prefix  # noqa: E402
from django.utils.cache import add_never_cache_headers  # noqa: E402
from django.utils.http import http_date  # noqa: E402
from django.utils.log import log_response  # noqa: E402

from incidents import views  # noqa: E402
from incidents.models import Integration  # noqa: E402

HOOK_PATH = re.compile(r"/hooks/([a-z]+)/([0-9]+)/")
KINDS = frozenset(Integration.Kind.values)


def _unused(request):  # the middleware below are only asked for their process_response
    raise AssertionError("not called")


security = SecurityMiddleware(_unused)
frame_options = XFrameOptionsMiddleware(_unused)
content_security = CSPMiddleware(_unused)
good_hosts: set[tuple[str | None, str | None]] = set()


def lean_enabled() -> bool:
    """Only while the middleware are the ones this path was written against: a middleware added
    to the settings sends webhooks the full way until this path is revisited."""
    known = {
        "django.middleware.security.SecurityMiddleware",  # applied below
        "rootline.middleware.NulQueryMiddleware",  # pages only: it lets /hooks/ through
        "whitenoise.middleware.WhiteNoiseMiddleware",  # static files only
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",  # the host check below; the path ends in "/"
        "django.middleware.csrf.CsrfViewMiddleware",  # the webhook view is csrf_exempt
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",  # applied below
        "rootline.middleware.TimeZoneMiddleware",  # pages only: hooks answer in UTC, the default
        "csp.middleware.CSPMiddleware",  # applied below
        "axes.middleware.AxesMiddleware",  # sign-in lockout: a webhook's token is not a sign-in
    }
    return set(settings.MIDDLEWARE) <= known and not settings.DISALLOWED_USER_AGENTS


LEAN = lean_enabled()


def application(environ, start_response):
    if LEAN and environ.get("REQUEST_METHOD") == "POST":
        match = HOOK_PATH.fullmatch(environ.get("PATH_INFO", ""))
        if match and match.group(1) in KINDS:
            return webhook_application(environ, start_response, match.group(1), int(match.group(2)))
    return django_application(environ, start_response)


def webhook_application(environ, start_response, kind: str, integration_id: int):
    set_script_prefix(get_script_name(environ))
    request = SenderSafeRequest(environ)
    host = (environ.get("HTTP_HOST"), environ.get("HTTP_X_FORWARDED_HOST"))
    if host not in good_hosts:
        try:
            request.get_host()  # CommonMiddleware's check
        except DisallowedHost:
            return django_application(environ, start_response)  # the full way answers with Django's 400
        if len(good_hosts) < 64:
            good_hosts.add(host)
    connection = connections[DEFAULT_DB_ALIAS]
    connection.close_if_unusable_or_obsolete()  # what close_old_connections does per request
    # No SELECT 1: the view retries a dropped connection once. Django's own flag, set as
    # close_old_connections' health check would.
    connection.health_check_done = True  # type: ignore[attr-defined]
    try:
        content_security.process_request(request)
        response = security.process_request(request) or never_cached(
            views.webhook_answer(request, kind, integration_id)
        )
    except Exception as exc:  # noqa: BLE001 - as Django's handler: a 500 page, logged
        response = response_for_exception(request, exc)
    content_security.process_response(request, response)  # sets its header on this response
    response = security.process_response(request, frame_options.process_response(request, response))
    if not response.has_header("Content-Length"):
        response.headers["Content-Length"] = str(len(response.content))
    if response.status_code >= 400:
        log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
    start_response(f"{response.status_code} {response.reason_phrase}", list(response.items()))
    connection.close_if_unusable_or_obsolete()  # as request_finished would (max age, errors)
    return [response.content]


def never_cached(response):
    """The headers `never_cache` adds to the view's answer (`add_never_cache_headers`), set
    directly: its general header merging cost a webhook more than the rest of the answer."""
    if not response.has_header("Expires"):
        response.headers["Expires"] = http_date()
    if not response.has_header("Cache-Control"):
        response.headers["Cache-Control"] = NEVER_CACHE
    else:
        add_never_cache_headers(response)
    return response


NEVER_CACHE = "max-age=0, no-cache, no-store, must-revalidate, private"


# The loaded app's objects go to the permanent generation: a full collection in a web process
# walked them all while every thread's request waited for it (it set a bodies-of-100 storm's p99),
# and now walks only what requests made since.
gc.freeze()
