"""Grafana unified alerting's webhook body (grafana/alerting receivers/webhook/v1: "version": "1",
with orgId, state, title, message) and its Alertmanager-compatible variant (version "4").

Each alert has the Alertmanager shape plus dashboard/panel/silence URLs and `values`, which
are kept as annotations so the incident page can show what Grafana saw.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from incidents.ingest import alertmanager
from incidents.ingest.common import (
    MAX_ANNOTATION_VALUE,
    FieldError,
    ParsedAlert,
    ParseResult,
    PayloadError,
    clean_text,
    decode_json,
    type_name,
)

URL_FIELDS = ("dashboardURL", "panelURL", "silenceURL")


def parse(body: bytes, received_at: datetime) -> ParseResult:
    document = decode_json(body)
    if not isinstance(document, dict):
        raise PayloadError(f"body: expected a JSON object, got {type_name(document)}")
    version = document.get("version")
    if version not in (None, "1", "4"):
        raise PayloadError(f"version: expected \"1\" (Grafana) or \"4\" (Alertmanager-compatible), got {str(version)[:20]!r}")
    alerts = alertmanager.alerts_array({**document, "version": None})
    result = ParseResult()
    for index, item in enumerate(alerts):
        path = f"alerts[{index}]"
        try:
            result.alerts.append(with_grafana_context(alertmanager.parse_alert(item, path, received_at), item))
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
