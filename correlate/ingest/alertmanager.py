"""Alertmanager's webhook body (version "4"), as sent by notify/webhook in Alertmanager 0.2x-0.3x.

Alertmanager delivers at least once and re-sends a group's alerts whenever the group changes
and every repeat_interval, so a body is a view of a group, not a list of news: the service
upserts each occurrence by (fingerprint, startsAt).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from correlate.events import labelset_fingerprint
from correlate.ingest.common import (
    MAX_ANNOTATION_VALUE,
    MAX_FINGERPRINT,
    MAX_LABEL_VALUE,
    FieldError,
    ParsedAlert,
    ParseResult,
    PayloadError,
    arrival,
    clean_text,
    decode_json,
    expect_object,
    parse_time,
    string_map,
    truncated_alerts,
    type_name,
)

STATUSES = ("firing", "resolved")


def parse(body: bytes, received_at: datetime | None) -> ParseResult:
    return parse_document(decode_json(body), received_at)


def parse_document(document: Any, received_at: datetime | None) -> ParseResult:
    """`parse` of a body already decoded (the engine's file reader decodes it once, to tell its source)."""
    alerts = alerts_array(document)
    result = ParseResult(truncated=truncated_alerts(document))
    for index, item in enumerate(alerts):
        try:
            result.alerts.append(parse_alert(item, f"alerts[{index}]", received_at))
        except FieldError as exc:
            result.reject(exc)
    return result.require_something_usable("alert")


def alerts_array(document: Any) -> list:
    if not isinstance(document, dict):
        raise PayloadError(f"body: expected a JSON object, got {type_name(document)}")
    version = document.get("version")
    if version is not None and version != "4":
        raise PayloadError(f'version: expected "4", got {str(version)[:20]!r}')
    if "alerts" not in document:
        raise PayloadError(
            f"alerts: missing; an Alertmanager webhook body has an 'alerts' array{other_format(document)}"
        )
    alerts = document["alerts"]
    if not isinstance(alerts, list):
        raise PayloadError(f"alerts: expected an array, got {type_name(alerts)}")
    return alerts


def other_format(document: dict) -> str:
    """What a body sent to the wrong kind of integration looks like, to say where it belongs."""
    if any(key in document for key in ("event_action", "routing_key", "service_key", "event_type")):
        return " (this is a PagerDuty Events API body: send it to an `events` integration's URL)"
    if any(key in document for key in ("ruleId", "ruleName", "evalMatches")):
        return " (this is Grafana's legacy alerting webhook: send it to a `grafana` integration's URL)"
    return ""


def parse_alert(item: Any, path: str, received_at: datetime | None) -> ParsedAlert:
    alert = expect_object(item, path)
    labels = string_map(alert.get("labels"), f"{path}.labels", value_limit=MAX_LABEL_VALUE)
    if not labels:
        raise FieldError(f"{path}.labels", "missing or empty; an alert is identified by its labels")
    annotations = string_map(
        alert.get("annotations"), f"{path}.annotations", value_limit=MAX_ANNOTATION_VALUE, truncate=True
    )
    if "startsAt" not in alert:
        raise FieldError(f"{path}.startsAt", "missing")
    # Go's zero time (Grafana's own tests send it) says "unknown": such an alert is handled like
    # an Events API event, updating the occurrence of its fingerprint that is firing, if any,
    # and otherwise timed by its arrival.
    known_start = parse_time(alert["startsAt"], f"{path}.startsAt")
    starts_at = known_start or arrival(received_at, f"{path}.startsAt")
    ends_at = parse_time(alert["endsAt"], f"{path}.endsAt") if alert.get("endsAt") not in (None, "") else None
    status = alert_status(alert, path, ends_at, received_at)
    if status == "firing":
        ends_at = None  # a firing alert's endsAt is only Prometheus's "valid until"
    elif ends_at is None or ends_at < starts_at:
        ends_at = max(starts_at, min(received_at or starts_at, ends_at or received_at or starts_at))
    return ParsedAlert(
        fingerprint=fingerprint_of(alert, path, labels),
        status=status,
        starts_at=starts_at,
        ends_at=ends_at,
        labels=labels,
        annotations=annotations,
        generator_url=generator_url_of(alert, path),
        event_action="" if known_start else ("resolve" if status == "resolved" else "trigger"),
    )


def alert_status(alert: dict, path: str, ends_at: datetime | None, received_at: datetime | None) -> str:
    status = alert.get("status")
    if status is None:
        return (
            "resolved"
            if ends_at is not None and (received_at is None or ends_at <= received_at)
            else "firing"
        )
    if status not in STATUSES:
        raise FieldError(f"{path}.status", f'expected "firing" or "resolved", got {str(status)[:40]!r}')
    return status


def fingerprint_of(alert: dict, path: str, labels: dict[str, str]) -> str:
    """The sender's fingerprint when it gives one; otherwise the one Alertmanager would compute."""
    value = alert.get("fingerprint")
    if value in (None, ""):
        return labelset_fingerprint(labels)
    return clean_text(value, f"{path}.fingerprint", limit=MAX_FINGERPRINT)


def generator_url_of(alert: dict, path: str) -> str:
    value = alert.get("generatorURL")
    if value is None:
        return ""
    return clean_text(value, f"{path}.generatorURL", limit=MAX_ANNOTATION_VALUE, truncate=True)
