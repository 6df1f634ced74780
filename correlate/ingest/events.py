"""PagerDuty Events API v2 bodies (trigger / acknowledge / resolve), PagerDuty Change Events, and
Events API v1 bodies (`service_key`, `event_type`, `incident_key`), read as v2.

An event's labels are its payload's custom_details (scalars as strings, one level deep) plus
source, component, group and class, plus the labels every alert of the group shares when the
details hold the senders' alert lists (Alertmanager's and Grafana's PagerDuty notifiers send one
event per group: `correlate.pagerduty`). Those lists, the counts beside them and any detail too
long for a label are annotations, not labels. The alert name: `correlate.pagerduty.event_alertname`.
A change event (no event_action) becomes an already-resolved occurrence of kind `change`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from correlate import pagerduty
from correlate.events import event_fingerprint
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
    optional_text,
    parse_time,
    type_name,
)

ACTIONS = ("trigger", "acknowledge", "resolve")
PAYLOAD_LABELS = ("source", "component", "group", "class")
SEVERITIES = ("critical", "error", "warning", "info")


def parse(body: bytes, received_at: datetime | None) -> ParseResult:
    return parse_document(decode_json(body), received_at)


def parse_document(document: Any, received_at: datetime | None) -> ParseResult:
    """`parse` of a body already decoded (the engine's file reader decodes it once, to tell its source)."""
    if isinstance(document, list):
        items = [(item, f"[{index}]") for index, item in enumerate(document)]
    elif isinstance(document, dict) and isinstance(document.get("alerts"), list):
        raise PayloadError(
            "body: an Alertmanager or Grafana webhook body (an 'alerts' array), not a PagerDuty event: "
            "send it to an `alertmanager` or `grafana` integration's URL"
        )
    elif isinstance(document, dict):
        items = [(document, "")]
    else:
        raise PayloadError(
            f"body: expected a JSON object (one event) or an array of events, got {type_name(document)}"
        )
    result = ParseResult()
    for item, path in items:
        try:
            result.alerts.append(parse_event(item, path, received_at))
        except FieldError as exc:
            result.reject(exc)
    if len(items) == 1 and result.rejected:
        only = result.rejected[0]
        raise PayloadError(f"{only.path}: {only.error}", result.rejected)
    return result.require_something_usable("event")


def routing_key_of(body: bytes) -> str | None:
    """The routing_key (v1: service_key) of a single event, for senders that authenticate with it
    instead of a header."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(document, list) and document:
        document = document[0]
    if not isinstance(document, dict):
        return None
    key = document.get("routing_key") or document.get("service_key")
    return key if isinstance(key, str) else None


V1_PATHS = {
    "payload.summary": "description",
    "payload.custom_details": "details",
    "payload": "body",
    "dedup_key": "incident_key",
    "event_action": "event_type",
}


def parse_event(item: Any, prefix: str, received_at: datetime | None) -> ParsedAlert:
    event = expect_object(item, prefix or "body")
    if not pagerduty.is_v1_event(event):
        return parse_v2_event(event, prefix, received_at)
    try:
        return parse_v2_event(pagerduty.v1_as_v2(event), prefix, received_at)
    except FieldError as exc:
        raise FieldError(v1_path(exc.path, prefix), exc.error.replace("dedup_key", "incident_key")) from None


def v1_path(path: str, prefix: str) -> str:
    """A v2 field's path as the v1 body the sender wrote names it."""
    head = f"{prefix}." if prefix else ""
    inner = path[len(head) :] if head and path.startswith(head) else path
    for v2_name, v1_name in V1_PATHS.items():
        if inner == v2_name or inner.startswith(f"{v2_name}."):
            return head + v1_name + inner[len(v2_name) :]
    return path


def parse_v2_event(event: dict, prefix: str, received_at: datetime | None) -> ParsedAlert:
    path = f"{prefix}." if prefix else ""
    payload = expect_object(event.get("payload"), f"{path}payload") if "payload" in event else {}
    action = event.get("event_action")
    if action is None and ("payload" not in event or looks_like_alert_event(event, payload)):
        raise FieldError(
            f"{path}event_action",
            "missing; expected trigger, acknowledge or resolve (or a change event's payload)",
        )
    if action is None:
        return parse_change(payload, f"{path}payload", received_at)
    if action not in ACTIONS:
        raise FieldError(
            f"{path}event_action", f"expected one of {', '.join(ACTIONS)}, got {str(action)[:40]!r}"
        )
    details = payload.get("custom_details")
    summary = text_field(payload, "summary", f"{path}payload", required=action == "trigger")
    source = text_field(payload, "source", f"{path}payload", required=False)
    component = text_field(payload, "component", f"{path}payload", required=False)
    dedup_key = event.get("dedup_key")
    if dedup_key in (None, ""):
        if action != "trigger":
            raise FieldError(
                f"{path}dedup_key", f"missing; an {action} event names the alert by its dedup_key"
            )
        fingerprint = event_fingerprint(source=source, summary=summary, component=component)
    else:
        fingerprint = clean_text(dedup_key, f"{path}dedup_key", limit=MAX_FINGERPRINT)
    at = event_time(payload, f"{path}payload", received_at)
    labels = event_labels(payload, f"{path}payload", summary)
    return ParsedAlert(
        fingerprint=fingerprint,
        status="resolved" if action == "resolve" else "firing",
        starts_at=at,
        ends_at=at if action == "resolve" else None,
        labels=labels,
        annotations={**group_details(details), **event_annotations(payload, event, summary)},
        generator_url=first_link(event),
        event_action=action,
    )


def looks_like_alert_event(event: dict, payload: dict) -> bool:
    """A change event has neither: an alert event that lost its event_action must not be
    stored as an already-resolved change."""
    return "dedup_key" in event or "severity" in payload


def parse_change(payload: dict, path: str, received_at: datetime | None) -> ParsedAlert:
    summary = text_field(payload, "summary", path, required=True)
    source = text_field(payload, "source", path, required=False)
    component = text_field(payload, "component", path, required=False)
    at = event_time(payload, path, received_at)
    return ParsedAlert(
        fingerprint=event_fingerprint(source=source, summary=summary, component=component),
        status="resolved",
        starts_at=at,
        ends_at=at,
        labels=event_labels(payload, path, summary),
        annotations={"summary": summary},
        kind="change",
        event_action="change",
    )


def text_field(payload: dict, key: str, path: str, *, required: bool) -> str:
    value = payload.get(key)
    if value in (None, ""):
        if required:
            raise FieldError(f"{path}.{key}", "missing")
        return ""
    return clean_text(
        value, f"{path}.{key}", limit=MAX_ANNOTATION_VALUE if key == "summary" else MAX_LABEL_VALUE
    )


def event_time(payload: dict, path: str, received_at: datetime | None) -> datetime:
    if payload.get("timestamp") in (None, ""):
        return arrival(received_at, f"{path}.timestamp")
    return parse_time(payload["timestamp"], f"{path}.timestamp") or arrival(received_at, f"{path}.timestamp")


def event_labels(payload: dict, path: str, summary: str) -> dict[str, str]:
    details = payload.get("custom_details")
    labels: dict[str, str] = {}
    for key, text in detail_scalars(details):
        key_text = clean_text(key, f"{path}.custom_details", limit=1024)
        if not pagerduty.is_group_detail(key_text, text, MAX_LABEL_VALUE):
            labels[key_text] = clean_text(text, f"{path}.custom_details.{key_text}", limit=MAX_LABEL_VALUE)
    explicit = dict(labels)
    group = group_labels(details)
    for key, value in group.items():
        labels.setdefault(key, value)
    for key in PAYLOAD_LABELS:
        given = payload.get(key)
        if given not in (None, ""):
            labels.setdefault(key, clean_text(given, f"{path}.{key}", limit=MAX_LABEL_VALUE))
    severity = payload.get("severity")
    if isinstance(severity, str) and severity in SEVERITIES:
        labels.setdefault("severity", severity)
    labels["alertname"] = pagerduty.event_alertname(
        details=explicit, group=group, klass=labels.get("class", ""), summary=summary
    )[:255]
    return labels


def detail_scalars(details: Any) -> list[tuple[Any, str]]:
    """custom_details' scalar values as text (one level deep: nested structures stay in the
    stored body)."""
    if not isinstance(details, dict):
        return []
    return [
        (key, value if isinstance(value, str) else json.dumps(value))
        for key, value in details.items()
        if value is not None and not isinstance(value, (dict, list))
    ]


def group_labels(details: Any) -> dict[str, str]:
    """The group's common labels from the senders' alert lists, those a label can hold."""
    try:
        return {
            clean_text(key, "", limit=1024): clean_text(value, "", limit=MAX_LABEL_VALUE)
            for key, value in pagerduty.group_labels(details).items()
        }
    except FieldError:
        return {}


def group_details(details: Any) -> dict[str, str]:
    """The details that describe the group (alert lists, counts, over-long texts), kept as
    annotations a person reads on the alert's page; over 64 KiB they are cut, saying so (the
    stored body keeps them whole)."""
    kept: dict[str, str] = {}
    for key, text in detail_scalars(details):
        if isinstance(key, str) and text and pagerduty.is_group_detail(key, text, MAX_LABEL_VALUE):
            kept[optional_text(key, limit=1024)] = optional_text(text, limit=MAX_ANNOTATION_VALUE)
    return {key: value for key, value in kept.items() if key and value}


def event_annotations(payload: dict, event: dict, summary: str) -> dict[str, str]:
    annotations = {"summary": summary} if summary else {}
    details = payload.get("custom_details")
    if isinstance(details, str):
        annotations["details"] = optional_text(details, limit=MAX_ANNOTATION_VALUE)
    client = event.get("client")
    if isinstance(client, str):
        annotations["client"] = optional_text(client, limit=1024)
    return {key: value for key, value in annotations.items() if value}


def first_link(event: dict) -> str:
    links = event.get("links")
    hrefs = [link.get("href") for link in links if isinstance(link, dict)] if isinstance(links, list) else []
    for candidate in (event.get("client_url"), *hrefs):
        if isinstance(candidate, str) and candidate.startswith(("http://", "https://")):
            return optional_text(candidate, limit=2048)
    return ""
