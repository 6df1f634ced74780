"""Grafana unified alerting's webhook body (grafana/alerting receivers/webhook/v1: "version": "1",
with orgId, state, title, message), its Alertmanager-compatible variant (version "4"), and the
legacy alerting webhook of Grafana before unified alerting (one rule per body: ruleId, ruleName,
state, evalMatches, tags; no `alerts`, no times).

Each alert has the Alertmanager shape plus dashboard/panel/silence URLs and `values`, which
are kept as annotations so the incident page can show what Grafana saw.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from correlate.ingest import alertmanager
from correlate.ingest.common import (
    MAX_ANNOTATION_VALUE,
    MAX_LABEL_VALUE,
    FieldError,
    ParsedAlert,
    ParseResult,
    PayloadError,
    Rejection,
    arrival,
    clean_text,
    decode_json,
    optional_text,
    truncated_alerts,
    type_name,
)

URL_FIELDS = ("dashboardURL", "panelURL", "silenceURL")


def parse(body: bytes, received_at: datetime | None) -> ParseResult:
    return parse_document(decode_json(body), received_at)


def parse_document(document: Any, received_at: datetime | None) -> ParseResult:
    """`parse` of a body already decoded (the engine's file reader decodes it once, to tell its source)."""
    if not isinstance(document, dict):
        raise PayloadError(f"body: expected a JSON object, got {type_name(document)}")
    if is_legacy(document):
        return parse_legacy(document, received_at)
    version = document.get("version")
    if version not in (None, "1", "4"):
        raise PayloadError(
            f'version: expected "1" (Grafana) or "4" (Alertmanager-compatible), got {str(version)[:20]!r}'
        )
    alerts = alertmanager.alerts_array({**document, "version": None})
    result = ParseResult(truncated=truncated_alerts(document))
    for index, item in enumerate(alerts):
        path = f"alerts[{index}]"
        try:
            result.alerts.append(
                with_grafana_context(alertmanager.parse_alert(item, path, received_at), item)
            )
        except FieldError as exc:
            result.reject(exc)
    return result.require_something_usable("alert")


def with_grafana_context(alert: ParsedAlert, item: dict[str, Any]) -> ParsedAlert:
    extra: dict[str, str] = {}
    for key in URL_FIELDS:
        try:
            value = clean_text(item.get(key) or "", key, limit=MAX_ANNOTATION_VALUE, truncate=True)
        except FieldError:
            continue  # a broken link is not worth rejecting the alert for
        if value:
            extra[key] = value
    values = item.get("values")
    if isinstance(values, dict) and values:
        extra["values"] = json.dumps(values, sort_keys=True, default=str)[:MAX_ANNOTATION_VALUE]
    if not extra:
        return alert
    annotations = {**extra, **alert.annotations}
    return ParsedAlert(**{**alert.__dict__, "annotations": annotations})


LEGACY_FIRING = ("alerting", "no_data")
LEGACY_RESOLVED = ("ok",)
LEGACY_QUIET = ("pending", "paused")
LEGACY_FIELDS = ("ruleId", "ruleName", "evalMatches")


def is_legacy(document: dict) -> bool:
    """Grafana's legacy alerting webhook (Grafana 4-8, and 9-10 with unified alerting off):
    one rule per body, no `alerts` array."""
    return "alerts" not in document and any(key in document for key in LEGACY_FIELDS)


def parse_legacy(document: dict, received_at: datetime | None) -> ParseResult:
    """A legacy notification as one alert: its rule is the alert (named by `ruleName`, keyed
    by organisation, dashboard, panel and rule id), `tags` are labels, `alerting` and `no_data`
    fire, `ok` resolves; `pending` and `paused` say nothing to page on (202, nothing stored).
    It carries no times: like an Events API event it updates the firing occurrence of its
    rule, if any, and is otherwise timed by its arrival."""
    state = document.get("state")
    if state in LEGACY_QUIET:
        return ParseResult()
    if state not in LEGACY_FIRING + LEGACY_RESOLVED:
        raise PayloadError(
            "state: expected alerting, ok, no_data, pending or paused (Grafana legacy alerting), "
            f"got {str(state)[:40]!r}"
        )
    try:
        labels = legacy_labels(document)
    except FieldError as exc:
        raise PayloadError(f"{exc.path}: {exc.error}") from None
    firing = state in LEGACY_FIRING
    try:
        received_at = arrival(received_at, "body")  # a legacy notification carries no time
    except FieldError as exc:
        return ParseResult(rejected=[Rejection(exc.path, exc.error)]).require_something_usable("alert")
    return ParseResult(
        alerts=[
            ParsedAlert(
                fingerprint="grafana-legacy:"
                + ":".join(
                    str(document.get(key, "")) for key in ("orgId", "dashboardId", "panelId", "ruleId")
                ),
                status="firing" if firing else "resolved",
                starts_at=received_at,
                ends_at=None if firing else received_at,
                labels=labels,
                annotations=legacy_annotations(document),
                generator_url=optional_text(document.get("ruleUrl"), limit=MAX_ANNOTATION_VALUE),
                event_action="trigger" if firing else "resolve",
            )
        ]
    )


def legacy_labels(document: dict) -> dict[str, str]:
    name = document.get("ruleName")
    if name in (None, ""):
        name = document.get("title") or f"grafana rule {document.get('ruleId', '')}".strip()
    labels = {"alertname": clean_text(name, "ruleName", limit=255, truncate=True)}
    tags = document.get("tags")
    if isinstance(tags, dict):
        for key, value in tags.items():
            if value is None or isinstance(value, (dict, list)):
                continue
            text = value if isinstance(value, str) else json.dumps(value)
            labels.setdefault(
                clean_text(key, "tags", limit=1024), clean_text(text, f"tags.{key}", limit=MAX_LABEL_VALUE)
            )
    if document.get("state") == "no_data":
        labels.setdefault("grafana_state", "no_data")
    return labels


def legacy_annotations(document: dict) -> dict[str, str]:
    annotations = {
        "summary": optional_text(document.get("title"), limit=MAX_ANNOTATION_VALUE),
        "description": optional_text(document.get("message"), limit=MAX_ANNOTATION_VALUE),
        "imageURL": optional_text(document.get("imageUrl"), limit=MAX_ANNOTATION_VALUE),
    }
    matches = document.get("evalMatches")
    if isinstance(matches, list) and matches:
        annotations["values"] = json.dumps(matches, sort_keys=True, default=str)[:MAX_ANNOTATION_VALUE]
    return {key: value for key, value in annotations.items() if value}
