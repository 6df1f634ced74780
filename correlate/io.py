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

from correlate import pagerduty
from correlate.events import FIRING, RESOLVED, Alert, change_labels, event_fingerprint, is_zero_time

_LABEL_LIMIT = 16 * 1024  # the webhook's limit on a label value (incidents/ingest/common.py)

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
    if is_zero_time(moment):  # before converting: Go's zero time with an offset east of UTC is year 0
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


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


OCCURRENCE, TRIGGER, ACKNOWLEDGE, END = "occurrence", "trigger", "acknowledge", "end"
_EVENT_KINDS = {"trigger": TRIGGER, "acknowledge": ACKNOWLEDGE, "resolve": END}  # by event_action


def alerts_from_body(body: Mapping[str, Any] | list) -> list[Alert]:
    """Alerts of one webhook body, whatever the sender; [] for anything unreadable. (An Events API
    acknowledge or resolve names no occurrence of its own: `read_alerts` applies a resolve to the
    one it ends.)"""
    return [alert for kind, alert in _read_body(body) if kind in (OCCURRENCE, TRIGGER)]


def _read_body(body: Mapping[str, Any] | list) -> list[tuple[str, Alert]]:
    """(kind, alert) pairs of one body: an Alertmanager or Grafana alert or a change is an
    OCCURRENCE; an Events API event is a TRIGGER, an ACKNOWLEDGE or an END (ended at its time).

    PagerDuty bodies are read as the app reads them (incidents/ingest/events.py): an Events API
    v2 event (`event_action` trigger, acknowledge or resolve) is an alert named by its
    `dedup_key`; a body without `event_action` is a Change Event unless it looks like an alert
    event that lost it (a `dedup_key` or a `severity`), which is skipped. A list holds events."""
    if isinstance(body, list):
        return [pair for item in body if isinstance(item, Mapping) and isinstance(item.get("payload"), Mapping)
                for pair in _read_body(item)]
    if not isinstance(body, Mapping):
        return []
    if isinstance(body.get("alerts"), list):
        return [(OCCURRENCE, a) for a in (_alert_from_alertmanager(raw) for raw in body["alerts"]) if a is not None]
    payload = body.get("payload")
    if not isinstance(payload, Mapping):
        return []
    action = body.get("event_action")
    kind = _EVENT_KINDS.get(action) if isinstance(action, str) else None
    if kind is not None:
        event = alert_from_event(body)
        return [(kind, event)] if event is not None else []
    if "event_action" in body or "dedup_key" in body or "severity" in payload:
        return []
    change = change_from_event(body)
    return [(OCCURRENCE, change)] if change is not None else []


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


def alert_from_event(body: Mapping[str, Any]) -> Alert | None:
    """A PagerDuty Events API v2 event as an occurrence of its dedup_key at its timestamp: a
    trigger or acknowledge fires, a resolve ends (`read_alerts` applies it to the firing one)."""
    payload = body["payload"]
    summary = str(payload.get("summary") or "")
    when = parse_time(payload.get("timestamp"))
    action = body.get("event_action")
    dedup_key = str(body.get("dedup_key") or "")
    if when is None or not (dedup_key or summary):
        return None
    fingerprint = dedup_key or event_fingerprint(source=str(payload.get("source") or ""), summary=summary,
                                                 component=str(payload.get("component") or ""))
    labels = _event_labels(payload, summary)
    severity = payload.get("severity")
    if isinstance(severity, str) and severity:
        labels.setdefault("severity", severity)
    resolved = action == "resolve"
    return Alert(
        fingerprint=fingerprint,
        starts_at=when,
        labels=labels,
        annotations={"summary": summary} if summary else {},
        ends_at=when if resolved else None,
        status=RESOLVED if resolved else FIRING,
        generator_url=_first_link(body),
    )


def _event_labels(payload: Mapping[str, Any], summary: str) -> dict[str, str]:
    """custom_details (scalars, one level deep, without the group's alert lists and counts) plus
    the group's common labels, source, component, group and class; named as the app names it
    (`correlate.pagerduty.event_alertname`)."""
    details = payload.get("custom_details")
    labels: dict[str, str] = {}
    if isinstance(details, Mapping):
        scalars = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in details.items()
                   if v is not None and not isinstance(v, (dict, list))}
        labels.update({k: v for k, v in scalars.items() if not pagerduty.is_group_detail(k, v, _LABEL_LIMIT)})
    explicit = dict(labels)
    group = pagerduty.group_labels(details)
    for key, value in group.items():
        labels.setdefault(key, value)
    for key in ("source", "component", "group", "class"):
        if payload.get(key):
            labels.setdefault(key, str(payload[key]))
    labels["alertname"] = pagerduty.event_alertname(
        details=explicit, group=group, klass=labels.get("class", ""), summary=summary
    )
    return labels


def _first_link(body: Mapping[str, Any]) -> str:
    links = body.get("links")
    hrefs = [link.get("href") for link in links if isinstance(link, Mapping)] if isinstance(links, list) else []
    for candidate in (body.get("client_url"), *hrefs):
        if isinstance(candidate, str) and candidate.startswith(("http://", "https://")):
            return candidate
    return ""


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
    labels = change_labels(_event_labels(payload, summary))
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
    Events API events follow PagerDuty, as the app does (incidents/services/alerts.py
    `event_apply`): a trigger for a dedup key already firing updates that occurrence's labels, a
    trigger after its resolve opens a new one, an acknowledge changes nothing here, and a resolve
    (sent at its own time) ends the occurrence still firing, or is dropped when there is none.
    """
    seen: dict[str, Alert] = {}
    firing: dict[str, str] = {}  # fingerprint -> key of its latest occurrence still firing
    for path in paths:
        for body in iter_json_lines(path):
            for kind, alert in _read_body(body):
                if kind == ACKNOWLEDGE:
                    continue
                if kind == END:
                    opened = firing.pop(alert.fingerprint, None)
                    if opened is not None:
                        seen[opened] = alert_ended(seen[opened], alert.ends_at)
                    continue
                if kind == TRIGGER and alert.fingerprint in firing:
                    opened = seen[firing[alert.fingerprint]]
                    seen[opened.key] = Alert(opened.fingerprint, opened.starts_at, alert.labels, alert.annotations,
                                             None, FIRING, alert.generator_url or opened.generator_url)
                    continue
                known = seen.get(alert.key)
                if known is None:
                    seen[alert.key] = alert
                elif alert.status == RESOLVED and known.status != RESOLVED:
                    seen[alert.key] = alert_ended(known, alert.ends_at, alert.generator_url)
                if seen[alert.key].status == RESOLVED:
                    if firing.get(alert.fingerprint) == alert.key:
                        del firing[alert.fingerprint]
                else:
                    firing[alert.fingerprint] = alert.key
    return list(seen.values())


def alert_ended(known: Alert, ends_at: datetime | None, generator_url: str = "") -> Alert:
    """`known` resolved at `ends_at`, its first labels kept."""
    return Alert(known.fingerprint, known.starts_at, known.labels, known.annotations, ends_at, RESOLVED,
                 known.generator_url or generator_url)
