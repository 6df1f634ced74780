"""Rootline's writes. Views, tasks, admin actions and management commands all call these.

Ingestion has two halves: `delivery_receive` runs inside the webhook request (parse to answer
the sender precisely, store the raw body, enqueue), and `delivery_process` runs in a worker
(upsert the alerts). Both are idempotent: Alertmanager delivers at least once, re-sends groups
when they change and every repeat_interval, and retries 5xx.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from incidents.correlation import correlation_enqueue, correlation_key_of
from incidents.ingest import ParsedAlert, PayloadError, parser_for
from incidents.models import Alert, Delivery, Integration, token_digest

logger = logging.getLogger(__name__)

ROLES = ("viewer", "responder", "author", "admin")
REDACTED_HEADERS = {"authorization", "cookie", "proxy-authorization", "x-api-key"}
UPSERT_BATCH = 1000


class RootlineError(Exception):
    """A request the domain refuses; the message is meant for the person who made it."""


@dataclass(frozen=True)
class Receipt:
    """What the webhook answers: the contract's 202 or 400 body, tied to the stored delivery."""

    status_code: int
    body: dict
    retry_after: int | None = None


# Integrations and tokens -------------------------------------------------------------------


def integration_add(*, kind: str, name: str, token: str | None = None, rate_limit: float | None = None) -> tuple[Integration, str]:
    if kind not in Integration.Kind.values:
        raise RootlineError(f"unknown kind {kind!r}; expected one of {', '.join(Integration.Kind.values)}")
    if not name.strip():
        raise RootlineError("an integration needs a name")
    if rate_limit is not None and rate_limit <= 0:
        raise RootlineError("--rate-limit must be a positive number of alerts per second")
    if Integration.objects.filter(name=name).exists():
        raise RootlineError(f"an integration named {name!r} exists already")
    token = token or secrets.token_urlsafe(32)
    try:
        integration = Integration.objects.create(kind=kind, name=name, token_digest=token_digest(token), rate_limit=rate_limit)
    except IntegrityError:
        raise RootlineError("that token is in use by another integration; choose another") from None
    return integration, token


def integration_authenticate(*, integration_id: int, kind: str, token: str) -> Integration | None:
    integration = Integration.objects.filter(pk=integration_id, kind=kind, is_active=True).first()
    if integration is None or not token or not integration.token_matches(token):
        return None
    return integration


def roles_ensure() -> None:
    for role in ROLES:
        Group.objects.get_or_create(name=role)


def api_token_issue(*, username: str, create_user: bool = False) -> str:
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        if not create_user:
            raise RootlineError(f"no user {username!r}; pass --create-user to create a responder")
        user = User.objects.create_user(username=username)
        roles_ensure()
        user.groups.add(Group.objects.get(name="responder"))
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


# Deliveries --------------------------------------------------------------------------------


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers worth keeping for replay and debugging; credentials never reach the database."""
    kept = {}
    for name, value in headers:
        lower = name.lower()
        kept[lower] = "[redacted]" if lower in REDACTED_HEADERS else value[:1024]
    return kept


def delivery_receive(
    *,
    integration: Integration,
    body: bytes,
    headers: dict[str, str],
    received_at: datetime | None = None,
    admit: Callable[[int], bool] | None = None,
) -> Receipt:
    """Store the body durably, then answer; a body seen before answers as it did, storing nothing.

    `admit(n)` is the integration's rate limit: over it, the body is not kept (only its size and
    headers) and the sender is told when to retry: 503 for Alertmanager and Grafana, which
    retry only 5xx, and 429 for Events API senders, which back off on it."""
    received_at = received_at or timezone.now()
    digest = hashlib.sha256(body).hexdigest()
    earlier = delivery_with_digest(integration, digest)
    if earlier is not None:
        return receipt_for(earlier)
    delivery = Delivery(integration=integration, received_at=received_at, body=body, body_digest=digest, size=len(body), headers=headers)
    try:
        result = parser_for(integration.kind)(body, received_at)
    except PayloadError as exc:
        delivery.status = Delivery.Status.REJECTED
        delivery.error = exc.message
        delivery.rejected = [rejection.as_dict() for rejection in exc.rejected[:1000]]
    else:
        delivery.accepted = len(result.alerts)
        delivery.rejected = [rejection.as_dict() for rejection in result.rejected[:1000]]
        if not result.alerts:
            delivery.status = Delivery.Status.PROCESSED
            delivery.processed_at = received_at
        elif admit is not None and not admit(len(result.alerts)):
            return throttled(integration, delivery)
    try:
        with transaction.atomic():
            delivery.save()
    except IntegrityError:
        earlier = delivery_with_digest(integration, digest)
        if earlier is None:
            raise
        return receipt_for(earlier)
    if delivery.status == Delivery.Status.PENDING:
        from incidents.tasks import process_delivery

        process_delivery.delay_on_commit(delivery.pk)
    return receipt_for(delivery)


def delivery_with_digest(integration: Integration, digest: str) -> Delivery | None:
    return (
        Delivery.objects.filter(integration=integration, body_digest=digest)
        .only("id", "status", "accepted", "rejected", "error")
        .first()
    )


def throttled(integration: Integration, delivery: Delivery) -> Receipt:
    message = f"over this integration's rate limit of {integration.rate_limit:g} alerts/s; retry later"
    refused = delivery_record_refusal(
        integration=integration, status=Delivery.Status.THROTTLED, size=delivery.size, headers=delivery.headers, error=message
    )
    status = 429 if integration.kind == Integration.Kind.EVENTS else 503
    return Receipt(status, {"error": message, "delivery": refused.pk}, retry_after=1)


def receipt_for(delivery: Delivery) -> Receipt:
    if delivery.status == Delivery.Status.REJECTED:
        body = {"error": delivery.error, "delivery": delivery.pk}
        if delivery.rejected:
            body["rejected"] = delivery.rejected
        return Receipt(400, body)
    return Receipt(202, {"accepted": delivery.accepted, "rejected": delivery.rejected, "delivery": delivery.pk})


def delivery_record_refusal(*, integration: Integration, status: str, size: int, headers: dict[str, str], error: str) -> Delivery:
    """A body we did not keep (too large, over the rate limit): its size and headers are kept."""
    return Delivery.objects.create(
        integration=integration, received_at=timezone.now(), status=status, size=size, headers=headers, error=error
    )


def delivery_process(*, delivery_id: int) -> None:
    """Upsert the delivery's alerts. Safe to run twice: the row lock and the status re-check
    make a second run return at once, and upserts are keyed by (fingerprint, startsAt)."""
    with transaction.atomic():
        delivery = Delivery.objects.select_for_update().select_related("integration").filter(pk=delivery_id).first()
        if delivery is None or delivery.status not in (Delivery.Status.PENDING, Delivery.Status.FAILED):
            return
        delivery.attempts += 1
        try:
            result = parser_for(delivery.integration.kind)(bytes(delivery.body), delivery.received_at)
        except PayloadError as exc:
            delivery.status = Delivery.Status.REJECTED
            delivery.error = exc.message
            delivery.save(update_fields=["status", "error", "attempts"])
            return
        alerts_upsert(integration=delivery.integration, delivery=delivery, parsed=result.alerts)
        correlation_enqueue({correlation_key_of(alert.labels) for alert in result.alerts})
        delivery.status = Delivery.Status.PROCESSED
        delivery.accepted = len(result.alerts)
        delivery.rejected = [rejection.as_dict() for rejection in result.rejected[:1000]]
        delivery.processed_at = timezone.now()
        delivery.error = ""
        delivery.save(update_fields=["status", "accepted", "rejected", "processed_at", "attempts", "error"])


def delivery_replay(*, delivery_id: int) -> Delivery:
    """Process a stored body again, e.g. a rejected one after a parser fix."""
    delivery = Delivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        raise RootlineError(f"no delivery {delivery_id}")
    if delivery.status in (Delivery.Status.TOO_LARGE, Delivery.Status.THROTTLED):
        raise RootlineError(f"delivery {delivery_id} has no stored body ({delivery.status}); the sender must send it again")
    Delivery.objects.filter(pk=delivery_id).update(status=Delivery.Status.PENDING, error="")
    delivery_process(delivery_id=delivery_id)
    delivery.refresh_from_db()
    return delivery


def stale_delivery_ids(*, older_than: timedelta = timedelta(minutes=2), limit: int = 1000) -> list[int]:
    cutoff = timezone.now() - older_than
    return list(
        Delivery.objects.filter(status__in=[Delivery.Status.PENDING, Delivery.Status.FAILED], received_at__lt=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


# Alerts ------------------------------------------------------------------------------------


def alerts_upsert(*, integration: Integration, delivery: Delivery, parsed: list[ParsedAlert]) -> None:
    firing, resolved, events = split_by_handling(parsed)
    now = timezone.now()
    upsert_occurrences(integration, delivery, firing, now, update_fields=["labels", "annotations", "alertname", "generator_url"])
    upsert_occurrences(
        integration, delivery, resolved, now,
        update_fields=["labels", "annotations", "alertname", "generator_url", "status", "ends_at", "correlated"],
    )
    for event in events:
        event_apply(integration=integration, delivery=delivery, event=event, now=now)


def split_by_handling(parsed: list[ParsedAlert]) -> tuple[list[ParsedAlert], list[ParsedAlert], list[ParsedAlert]]:
    """Alertmanager-style alerts are keyed by (fingerprint, startsAt); within one body the
    resolved view of an occurrence wins. Events API events depend on what is already firing."""
    latest: dict[tuple[str, datetime], ParsedAlert] = {}
    events = []
    for alert in parsed:
        if alert.event_action and alert.kind != "change":
            events.append(alert)
            continue
        key = (alert.fingerprint, alert.starts_at)
        if key not in latest or alert.status == "resolved":
            latest[key] = alert
    firing = [alert for alert in latest.values() if alert.status == "firing"]
    resolved = [alert for alert in latest.values() if alert.status == "resolved"]
    return firing, resolved, events


def alert_row(integration: Integration, delivery: Delivery, alert: ParsedAlert, now: datetime) -> Alert:
    change = alert.kind == Alert.Kind.CHANGE
    return Alert(
        fingerprint=alert.fingerprint,
        starts_at=alert.starts_at,
        ends_at=alert.ends_at,
        status=alert.status,
        kind=alert.kind,
        alertname=alert.alertname[:255],
        labels=alert.labels,
        annotations=alert.annotations,
        generator_url=alert.generator_url,
        integration=integration,
        first_delivery=delivery,
        received_at=now,
        correlation_key=correlation_key_of(alert.labels),
        layer="process" if change else None,
        failure_mode="change" if change else None,
    )


def upsert_occurrences(integration: Integration, delivery: Delivery, alerts: list[ParsedAlert], now: datetime, *, update_fields: list[str]) -> None:
    """One INSERT ... ON CONFLICT per batch. A firing view never overwrites status or ends_at,
    so a late or re-sent firing notification cannot reopen a resolved occurrence."""
    rows = [alert_row(integration, delivery, alert, now) for alert in alerts]
    for start in range(0, len(rows), UPSERT_BATCH):
        Alert.objects.bulk_create(
            rows[start : start + UPSERT_BATCH],
            update_conflicts=True,
            unique_fields=["fingerprint", "starts_at"],
            update_fields=update_fields,
        )


def event_apply(*, integration: Integration, delivery: Delivery, event: ParsedAlert, now: datetime) -> None:
    """PagerDuty semantics: a trigger for a key already firing updates that occurrence; a
    trigger after its resolve opens a new one; resolve and acknowledge need an open one."""
    current = Alert.objects.select_for_update().filter(fingerprint=event.fingerprint, status=Alert.Status.FIRING).order_by("-starts_at").first()
    if event.event_action == "trigger":
        if current is not None:
            current.labels, current.annotations = event.labels, event.annotations
            current.alertname = event.alertname[:255]
            current.save(update_fields=["labels", "annotations", "alertname"])
            return
        if Alert.objects.filter(fingerprint=event.fingerprint, starts_at=event.starts_at).exists():
            return  # the same trigger again, after its resolve: a replay, not a new occurrence
        alert_row(integration, delivery, event, now).save()
    elif event.event_action == "resolve" and current is not None:
        current.status = Alert.Status.RESOLVED
        current.ends_at = max(event.ends_at or event.starts_at, current.starts_at)
        current.correlated = False
        current.save(update_fields=["status", "ends_at", "correlated"])
