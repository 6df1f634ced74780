"""HTTP interfaces: the webhook, health, metrics and pages. They only call services and render."""

from __future__ import annotations

import hmac
import logging
import time

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db import DatabaseError, DataError, IntegrityError, InterfaceError, OperationalError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from prometheus_client import CONTENT_TYPE_LATEST

from correlate.ingest.events import routing_key_of
from incidents import selectors, services
from incidents.action_bodies import incident_act_on_body
from incidents.metrics import metrics_text
from incidents.models import AuditRecord, Delivery, Incident, Integration
from incidents.queue import QueueFilters
from incidents.services.errors import RootlineError
from incidents.services.roles import acting_user, has_role

logger = logging.getLogger(__name__)

RETRY_AFTER_STORAGE_S = 5
MAX_RECORDED_SIZE = 2**63 - 1  # a sender may claim any Content-Length; the size column is a bigint


def json_error(status: int, message: str, **extra: object) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def bearer_token(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@csrf_exempt
@never_cache
def webhook(request: HttpRequest, kind: str, integration_id: int) -> HttpResponse:
    """Authenticate, bound the size, store the raw body durably, enqueue, answer.

    Alertmanager retries only 5xx, so a 4xx here is final for the sender: only bodies that are
    truly unusable get one, and they are kept as rejected deliveries for replay. Under gunicorn,
    `rootline.wsgi` calls `webhook_answer` directly, without the middleware a webhook does not
    need, and adds never_cache's headers itself."""
    return webhook_answer(request, kind, integration_id)


def webhook_answer(request: HttpRequest, kind: str, integration_id: int) -> HttpResponse:
    """The webhook view without its decorators (see `webhook`)."""
    if kind not in Integration.Kind.values:
        return json_error(404, f"unknown webhook kind {kind!r}")
    if request.method != "POST":
        return json_error(405, "webhooks take POST")
    headers = services.safe_headers(request.headers.items())
    declared = declared_length(request)
    body = ReadOnce(request)
    reused = db_connection_reused()
    try:
        try:
            return webhook_receive(request, kind, integration_id, headers, declared, body)
        except (OperationalError, InterfaceError):
            # A persistent connection the server dropped since its last use (a restart, an idle
            # timeout): once, on a fresh connection. Storing is idempotent (the body digest).
            if not reused or connection.in_atomic_block:
                raise
            logger.warning("webhook: database connection lost; retrying once on a new one", exc_info=True)
            connection.close()
            return webhook_receive(request, kind, integration_id, headers, declared, body)
    except (DataError, IntegrityError) as exc:
        # A value the parsers let through but the database refuses: retrying cannot help.
        services.delivery_count_unstored(reason="unstorable")
        return json_error(
            400, f"body: a value could not be stored ({exc.__class__.__name__}); nothing was stored"
        )
    except DatabaseError:
        response = json_error(503, "storage unavailable; nothing was stored, send again")
        response["Retry-After"] = str(RETRY_AFTER_STORAGE_S)
        return response


def webhook_receive(
    request: HttpRequest,
    kind: str,
    integration_id: int,
    headers: dict[str, str],
    declared: int,
    body: ReadOnce,
) -> HttpResponse:
    integration = services.integration_authenticate(
        integration_id=integration_id, kind=kind, token=bearer_token(request)
    )
    if integration is None and kind == Integration.Kind.EVENTS and declared <= settings.MAX_BODY:
        integration = services.integration_authenticate(
            integration_id=integration_id, kind=kind, token=routing_key_of(body.read()) or ""
        )
    if integration is None:
        services.delivery_count_unstored(reason="unauthenticated")
        return json_error(
            401, "missing or wrong token: send 'Authorization: Bearer <token>' of this integration"
        )
    if declared > settings.MAX_BODY:
        return too_large(integration, declared, headers)
    data = body.read()
    if len(data) > settings.MAX_BODY:
        return too_large(integration, len(data), headers)
    receipt = services.delivery_receive(
        integration=integration, body=data, headers=headers, admit=rate_limiter(integration)
    )
    status = receipt.status_code
    if receipt.throttled and kind != Integration.Kind.EVENTS:
        status = 503  # Alertmanager and Grafana retry only 5xx: a 429 would lose the body for good
    response = JsonResponse(receipt.body, status=status)
    if receipt.retry_after:
        response["Retry-After"] = str(receipt.retry_after)
    return response


class ReadOnce:
    """The request body, read at most once (at most the limit + 1 bytes) however often asked."""

    def __init__(self, request: HttpRequest) -> None:
        self.request = request
        self.data: bytes | None = None

    def read(self) -> bytes:
        if self.data is None:
            self.data = self.request.read(settings.MAX_BODY + 1)
        return self.data


def db_connection_reused() -> bool:
    return connection.connection is not None


def declared_length(request: HttpRequest) -> int:
    try:
        return min(max(0, int(request.META.get("CONTENT_LENGTH") or 0)), MAX_RECORDED_SIZE)
    except ValueError:
        return 0


def too_large(integration: Integration, size: int, headers: dict[str, str]) -> JsonResponse:
    limit = settings.MAX_BODY
    message = f"body of {size} bytes is over the limit of {limit} bytes (ROOTLINE_MAX_BODY)"
    delivery = services.delivery_record_refusal(
        integration=integration, status=Delivery.Status.TOO_LARGE, size=size, headers=headers, error=message
    )
    return json_error(413, message, delivery=delivery.pk)


def rate_limiter(integration: Integration):
    """Admit n alerts under the integration's alerts-per-second limit; a one-second window
    shared by all web processes through the cache. The first body of a window always passes,
    so a body larger than the limit is not refused forever."""
    if integration.rate_limit is None:
        return None

    def admit(count: int) -> bool:
        key = f"rootline:rate:{integration.pk}:{int(time.time())}"
        try:
            cache.add(key, 0, timeout=5)
            used = cache.incr(key, count)
            if integration.rate_limit is not None and used - count > 0 and used > integration.rate_limit:
                cache.decr(key, count)
                return False
        except Exception:  # noqa: BLE001 - no cache to count in (Redis down): a page is worth more than the limit
            logger.warning("rate limit of integration %s not counted: cache unavailable", integration.pk)
        return True

    return admit


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": "ok", "broker": "eager" if settings.CELERY_TASK_ALWAYS_EAGER else "ok"}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        checks["database"] = f"error: {exc.__class__.__name__}"
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        checks["broker"] = selectors.broker_status()
    healthy = all(value in ("ok", "eager") for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unhealthy", **checks}, status=200 if healthy else 503
    )


@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """Open to any scraper unless ROOTLINE_METRICS_TOKEN is set; then only with that bearer token."""
    expected = settings.METRICS_TOKEN
    if expected and not hmac.compare_digest(bearer_token(request).encode(), expected.encode()):
        return JsonResponse(
            {"error": "this needs Authorization: Bearer <ROOTLINE_METRICS_TOKEN>"}, status=401
        )
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The triage queue (incidents/queue.py): open incidents by severity then recency, filtered by
    the URL, root cause and chain at a glance."""
    filters = QueueFilters.from_query(request.GET)
    raw = request.GET.get("page", "1")
    number = int(raw) if raw.isascii() and raw.isdigit() and 0 < len(raw) < 5 else 1
    page = selectors.triage_page(filters=filters, user=acting_user(request.user), page=max(number, 1))
    page["can_act"] = has_role(request.user, "responder")
    if request.headers.get("HX-Request") == "true":
        # The page's poll every few seconds: the queue alone, so new incidents show without a reload.
        return render(request, "incidents/_queue.html", page)
    return render(request, "incidents/triage.html", page)


@login_required
def alerts_page(request: HttpRequest) -> HttpResponse:
    return render(request, "incidents/home.html", selectors.home_page())


@login_required
def incident_page(request: HttpRequest, incident_id: int) -> HttpResponse:
    page = selectors.incident_page(incident_id)
    if page is None:
        raise Http404(f"no incident {incident_id}")
    page["can_act"] = has_role(request.user, "responder")
    if page["can_act"]:
        page["assignable"] = selectors.assignable_users()
        page["merge_targets"] = selectors.merge_targets(page["incident"])
    return render(request, "incidents/incident.html", page)


@login_required
@require_POST
def incident_act_form(request: HttpRequest, incident_id: int) -> HttpResponse:
    """The incident page's buttons and forms: the same service as the API."""
    incident = get_object_or_404(Incident, pk=incident_id)
    body: dict[str, str | int | list[int | str]] = {
        key: str(value)
        for key, value in request.POST.items()
        if key not in ("csrfmiddlewaretoken", "next", "alert_ids") and value != ""
    }
    for key in ("alert_id", "into"):
        value = body.get(key)
        if isinstance(value, str):
            body[key] = form_id(value)
    if "alert_ids" in request.POST:
        body["alert_ids"] = [form_id(value) for value in request.POST.getlist("alert_ids")]
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = ""
    try:
        outcome = incident_act_on_body(
            incident=incident, user=acting_user(request.user), via=AuditRecord.Via.PAGE, body=body
        )
    except RootlineError as exc:
        messages.error(request, exc.message)
        return redirect(back or reverse("incident", kwargs={"incident_id": incident.pk}))
    messages.success(request, f"{str(body.get('action', '')).replace('_', ' ')} recorded")
    return redirect(back or reverse("incident", kwargs={"incident_id": outcome.incidents[0].pk}))


def form_id(value: str) -> int | str:
    """A form's id field as a number; ASCII digits only: "²" and "٣" are digits to str.isdigit, and
    int() refuses the first and any number over 4,300 digits; what stays text is refused by the
    action as not an id."""
    if value.isascii() and value.isdigit() and len(value) <= 30:
        return int(value)
    return value
