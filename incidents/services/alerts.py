"""Alert occurrences: upserted by (fingerprint, startsAt); Events API events by what is firing."""
from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from incidents.correlation import correlation_key_of
from incidents.ingest import ParsedAlert
from incidents.models import Alert, Delivery, Integration

UPSERT_BATCH = 1000


def alerts_upsert(*, integration: Integration, delivery: Delivery, parsed: list[ParsedAlert]) -> None:
    firing, resolved, events = split_by_handling(parsed)
    now = timezone.now()
    upsert_occurrences(integration, delivery, firing, now, update_fields=FIRING_UPDATE_FIELDS)
    upsert_occurrences(integration, delivery, resolved, now, update_fields=RESOLVED_UPDATE_FIELDS)
    for event in events:
        event_apply(integration=integration, delivery=delivery, event=event, now=now)


# A firing view never overwrites status or ends_at (see `upsert_occurrences`).
FIRING_UPDATE_FIELDS = ["labels", "annotations", "alertname", "generator_url"]
RESOLVED_UPDATE_FIELDS = ["labels", "annotations", "alertname", "generator_url", "status", "ends_at", "correlated"]


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
    upsert_rows([alert_row(integration, delivery, alert, now) for alert in alerts], update_fields=update_fields)


def upsert_rows(rows: list[Alert], *, update_fields: list[str]) -> None:
    # Key order: concurrent drains upserting overlapping occurrences lock rows in the same order.
    rows = sorted(rows, key=lambda row: (row.fingerprint, row.starts_at))
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
