"""A tolerant reader of webhook bodies (Alertmanager v4, Grafana, PagerDuty events) into Alerts.

The Django app has strict per-source parsers; this one serves the command line and benchmarks,
so it skips what it cannot read instead of reporting it, and never needs Django.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from correlate.events import FIRING, RESOLVED, Alert, event_fingerprint

_FRACTION = re.compile(r"(\.\d{1,6})\d*")
_OFFSET_NO_COLON = re.compile(r"([+-]\d{2})(\d{2})$")


def parse_time(value: str | None) -> datetime | None:
    """RFC 3339 with up to 9 fractional digits (Go), `Z`, or PagerDuty's `+0000` offsets."""
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00").replace("z", "+00:00")
    text = _FRACTION.sub(lambda m: m.group(1), text, count=1)
    text = _OFFSET_NO_COLON.sub(r"\1:\2", text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    return None if moment.year <= 1 else moment


def iter_json_lines(path: str | Path) -> Iterator[Any]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def alerts_from_body(body: Mapping[str, Any]) -> list[Alert]:
    """Alerts of one webhook body, whatever the sender; [] for anything unreadable."""
    if not isinstance(body, Mapping):
        return []
    if isinstance(body.get("alerts"), list):
        return [a for a in (_alert_from_alertmanager(raw) for raw in body["alerts"]) if a is not None]
    if isinstance(body.get("payload"), Mapping):
        event = change_from_event(body)
        return [event] if event is not None else []
    return []


def _labels(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in raw.items() if v is not None}


def _alert_from_alertmanager(raw: Any) -> Alert | None:
    if not isinstance(raw, Mapping):
        return None
    starts_at = parse_time(raw.get("startsAt"))
    fingerprint = str(raw.get("fingerprint") or "")
    labels = _labels(raw.get("labels"))
    if starts_at is None or not labels:
        return None
    if not fingerprint:
        fingerprint = event_fingerprint(source=json.dumps(labels, sort_keys=True), summary="", component="")
    status = RESOLVED if raw.get("status") == RESOLVED else FIRING
    return Alert(
        fingerprint=fingerprint,
        starts_at=starts_at,
        labels=labels,
        annotations=_labels(raw.get("annotations")),
        ends_at=parse_time(raw.get("endsAt")) if status == RESOLVED else None,
        status=status,
        generator_url=str(raw.get("generatorURL") or ""),
    )


def change_from_event(body: Mapping[str, Any]) -> Alert | None:
    """A PagerDuty (Change) Events body as a resolved process/change occurrence at its timestamp."""
    payload = body.get("payload")
    if not isinstance(payload, Mapping):
        return None
    summary = str(payload.get("summary") or "")
    source = str(payload.get("source") or "")
    component = str(payload.get("component") or "")
    when = parse_time(payload.get("timestamp"))
    if when is None or not (summary or source):
        return None
    details = payload.get("custom_details")
    labels: dict[str, str] = {}
    if isinstance(details, Mapping):
        labels.update({str(k): v if isinstance(v, str) else json.dumps(v) for k, v in details.items()
                       if v is not None and not isinstance(v, (dict, list))})
    for key in ("source", "component", "group", "class"):
        if payload.get(key):
            labels[key] = str(payload[key])
    labels["alertname"] = labels.get("alertname") or str(payload.get("class") or "") or summary
    labels["failure_mode"] = "change"
    labels["layer"] = "process"
    return Alert(
        fingerprint=event_fingerprint(source=source, summary=summary, component=component),
        starts_at=when,
        labels=labels,
        annotations={"summary": summary},
        ends_at=when,
        status=RESOLVED,
    )


def read_alerts(paths: Iterable[str | Path]) -> list[Alert]:
    """Every occurrence in delivery order, deduplicated by fingerprint+startsAt.

    A later resolved notification of an occurrence keeps its first labels but takes its end.
    """
    seen: dict[str, Alert] = {}
    for path in paths:
        for body in iter_json_lines(path):
            for alert in alerts_from_body(body):
                known = seen.get(alert.key)
                if known is None:
                    seen[alert.key] = alert
                elif alert.status == RESOLVED and known.status != RESOLVED:
                    seen[alert.key] = Alert(known.fingerprint, known.starts_at, known.labels, known.annotations,
                                            alert.ends_at, RESOLVED, known.generator_url or alert.generator_url)
    return list(seen.values())
