"""Alert occurrences: upserted by (fingerprint, startsAt); Events API events by what is firing."""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connections, router, transaction
from django.utils import timezone

from correlate.ingest import ParsedAlert
from incidents.models import Alert, Delivery, Integration
from incidents.services.correlation import correlation_key_of
from incidents.sql import copy_upsert

try:  # labels and annotations go to PostgreSQL as JSON text: json.dumps is the cost, orjson is faster
    import orjson

    def json_text(value: dict) -> str:
        return orjson.dumps(value).decode()
except ImportError:  # pragma: no cover - optional speed-up

    def json_text(value: dict) -> str:
        return json.dumps(value, ensure_ascii=False)


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
RESOLVED_UPDATE_FIELDS = [
    "labels",
    "annotations",
    "alertname",
    "generator_url",
    "status",
    "ends_at",
    "correlated",
]


def split_by_handling(
    parsed: list[ParsedAlert],
) -> tuple[list[ParsedAlert], list[ParsedAlert], list[ParsedAlert]]:
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


def upsert_occurrences(
    integration: Integration,
    delivery: Delivery,
    alerts: list[ParsedAlert],
    now: datetime,
    *,
    update_fields: list[str],
) -> None:
    """One INSERT ... ON CONFLICT per batch. A firing view never overwrites status or ends_at,
    so a late or re-sent firing notification cannot reopen a resolved occurrence."""
    upsert_rows(
        [alert_row(integration, delivery, alert, now) for alert in alerts], update_fields=update_fields
    )


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


# A view of an occurrence to upsert: (integration, delivery, parsed alert).
View = tuple[Integration, Delivery, ParsedAlert]


def upsert_views(rounds: list[tuple[list[View], list[View]]], now: datetime) -> None:
    """Upsert rounds of (firing, resolved) views in order, as `upsert_rows` would round by
    round. On PostgreSQL: one COPY of every row into a temporary table, then one
    `INSERT ... SELECT ... ON CONFLICT` per round and status, with no per-row work in Django
    (model instances, field preparation and parameter lists cost worker CPU for every alert)."""
    alias = router.db_for_write(Alert)
    if connections[alias].vendor != "postgresql":
        for firing, resolved in rounds:
            upsert_rows([alert_row(*view, now) for view in firing], update_fields=FIRING_UPDATE_FIELDS)
            upsert_rows([alert_row(*view, now) for view in resolved], update_fields=RESOLVED_UPDATE_FIELDS)
        return
    batches = []
    for firing, resolved in rounds:
        for views, update_fields in ((firing, FIRING_UPDATE_FIELDS), (resolved, RESOLVED_UPDATE_FIELDS)):
            if views:
                batches.append(([occurrence_values(*view, now) for view in views], update_fields))
    with transaction.atomic(using=alias, savepoint=False):  # the temporary rows live until the commit
        copy_upsert(
            connections[alias],
            Alert,
            OCCURRENCE_VIEW_FIELDS,
            ("fingerprint", "starts_at"),
            batches,
            not_compared=("correlated",),
        )


def occurrence_values(
    integration: Integration, delivery: Delivery, alert: ParsedAlert, now: datetime
) -> tuple:
    """A view's row for `copy_upsert`, in `OCCURRENCE_VIEW_FIELDS` order."""
    change = alert.kind == Alert.Kind.CHANGE
    return (
        alert.fingerprint,
        alert.starts_at,
        alert.ends_at,
        alert.status,
        alert.kind,
        alert.alertname[:255],
        json_text(alert.labels),
        json_text(alert.annotations),
        alert.generator_url,
        integration.pk,
        delivery.pk,
        now,
        correlation_key_of(alert.labels),
        "process" if change else None,
        "change" if change else None,
    )


# Filled per view; every other column of incidents_alert gets its field's default.
OCCURRENCE_VIEW_FIELDS = (
    "fingerprint",
    "starts_at",
    "ends_at",
    "status",
    "kind",
    "alertname",
    "labels",
    "annotations",
    "generator_url",
    "integration",
    "first_delivery",
    "received_at",
    "correlation_key",
    "layer",
    "failure_mode",
)


def event_apply(*, integration: Integration, delivery: Delivery, event: ParsedAlert, now: datetime) -> None:
    """PagerDuty semantics: a trigger for a key already firing updates that occurrence; a
    trigger after its resolve opens a new one; resolve and acknowledge need an open one."""
    current = (
        Alert.objects.select_for_update()
        .filter(fingerprint=event.fingerprint, status=Alert.Status.FIRING)
        .order_by("-starts_at")
        .first()
    )
    if event.event_action == "trigger":
        if current is not None:
            relabelled = current.labels != event.labels
            alertname = event.alertname[:255]
            if not relabelled and current.annotations == event.annotations and current.alertname == alertname:
                # a sender triggering again what it triggered (many do, every evaluation): nothing to write
                return
            current.labels, current.annotations, current.alertname = (
                event.labels,
                event.annotations,
                alertname,
            )
            if relabelled:  # its layer, failure mode or scope may differ now: correlate it again
                current.correlated = False
            current.save(
                update_fields=["labels", "annotations", "alertname"] + (["correlated"] if relabelled else [])
            )
            return
        if Alert.objects.filter(fingerprint=event.fingerprint, starts_at=event.starts_at).exists():
            return  # the same trigger again, after its resolve: a replay, not a new occurrence
        alert_row(integration, delivery, event, now).save()
    elif event.event_action == "resolve" and current is not None:
        current.status = Alert.Status.RESOLVED
        current.ends_at = max(event.ends_at or event.starts_at, current.starts_at)
        current.correlated = False
        current.save(update_fields=["status", "ends_at", "correlated"])
