"""The engine's file reader: files of webhook bodies (Alertmanager v4, Grafana, PagerDuty events),
one a line, read into Alerts by the app's own per-source parsers (`correlate.ingest`), for the
command line, the scorers and the benchmarks. Tolerant where the webhook answers 400: it skips
what the parsers reject, and an alert with no time of its own (a file has no arrival time).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from correlate.events import FIRING, RESOLVED, Alert, change_labels, is_zero_time
from correlate.ingest import DOCUMENT_PARSERS, ParsedAlert, PayloadError, kind_of
from correlate.ingest.common import decode_json

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
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def iter_body_lines(path: str | Path) -> Iterator[bytes]:
    """The bodies of a file of webhook bodies, one a line (blank lines skipped)."""
    with open(path, "rb") as handle:
        for line in handle:
            line = line.strip()
            if line:
                yield line


OCCURRENCE, TRIGGER, ACKNOWLEDGE, END = "occurrence", "trigger", "acknowledge", "end"
_EVENT_KINDS = {"trigger": TRIGGER, "acknowledge": ACKNOWLEDGE, "resolve": END}  # by event_action


def alerts_from_body(body: Mapping[str, Any] | list) -> list[Alert]:
    """Alerts of one decoded webhook body, whatever the sender; [] for anything unreadable. (An
    Events API acknowledge or resolve names no occurrence of its own: `read_alerts` applies a
    resolve to the one it ends.)"""
    return [alert for kind, alert in _read_document(body) if kind in (OCCURRENCE, TRIGGER)]


def _read_body(raw: bytes) -> list[tuple[str, Alert]]:
    try:
        document = decode_json(raw)
    except PayloadError:
        return []
    return _read_document(document)


def _read_document(document: Any) -> list[tuple[str, Alert]]:
    """(kind, alert) pairs of one body, read by the app's own parser for its source
    (`correlate.ingest`), with no arrival time: an alert that carries no time of its own is
    skipped, as is anything the parser rejects. An Alertmanager or Grafana alert or a change is
    an OCCURRENCE; an Events API event is a TRIGGER, an ACKNOWLEDGE or an END (ended at its time)."""
    try:
        result = DOCUMENT_PARSERS[kind_of(document)](document, None)
    except PayloadError:
        return []
    return [_as_read(parsed) for parsed in result.alerts]


def _as_read(parsed: ParsedAlert) -> tuple[str, Alert]:
    labels = change_labels(parsed.labels) if parsed.kind == "change" else parsed.labels
    alert = Alert(
        fingerprint=parsed.fingerprint,
        starts_at=parsed.starts_at,
        labels=labels,
        annotations=parsed.annotations,
        ends_at=parsed.ends_at,
        status=RESOLVED if parsed.status == RESOLVED else FIRING,
        generator_url=parsed.generator_url,
    )
    if parsed.kind == "change":
        return OCCURRENCE, alert
    return _EVENT_KINDS.get(parsed.event_action, OCCURRENCE), alert


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
        for body in iter_body_lines(path):
            for kind, alert in _read_body(body):
                if kind == ACKNOWLEDGE:
                    continue
                if kind == END:
                    opened = firing.pop(alert.fingerprint, None)
                    if opened is not None:
                        seen[opened] = alert_ended(seen[opened], alert.ends_at)
                    continue
                if kind == TRIGGER and alert.fingerprint in firing:
                    held = seen[firing[alert.fingerprint]]
                    seen[held.key] = Alert(
                        held.fingerprint,
                        held.starts_at,
                        alert.labels,
                        alert.annotations,
                        None,
                        FIRING,
                        alert.generator_url or held.generator_url,
                    )
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
    return Alert(
        known.fingerprint,
        known.starts_at,
        known.labels,
        known.annotations,
        ends_at,
        RESOLVED,
        known.generator_url or generator_url,
    )
