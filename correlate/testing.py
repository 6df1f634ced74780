"""Small builders of alerts for tests, notebooks and benchmarks (no fixtures, no Django)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import quote_plus

from correlate.events import FIRING, RESOLVED, Alert, change_labels, event_fingerprint

BASE_DAY = datetime(2026, 3, 14, tzinfo=UTC)


def clock(hhmm: str, day: datetime = BASE_DAY) -> datetime:
    """'01:45' on the base day (UTC); '25:10' rolls into the next day."""
    hours, minutes = (int(p) for p in hhmm.split(":"))
    return day + timedelta(hours=hours, minutes=minutes)


def label_fingerprint(labels: Mapping[str, str]) -> str:
    """Like Alertmanager's: a hash of the label set, so one label set keeps one fingerprint."""
    raw = "\x1f".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def make_alert(
    alertname: str,
    starts_at: datetime | str,
    *,
    ends_at: datetime | str | None = None,
    expr: str = "",
    annotations: Mapping[str, str] | None = None,
    **labels: str,
) -> Alert:
    start = clock(starts_at) if isinstance(starts_at, str) else starts_at
    end = clock(ends_at) if isinstance(ends_at, str) else ends_at
    all_labels = {"alertname": alertname, **labels}
    return Alert(
        fingerprint=label_fingerprint(all_labels),
        starts_at=start,
        labels=all_labels,
        annotations=dict(annotations or {}),
        ends_at=end,
        status=RESOLVED if end else FIRING,
        generator_url=f"http://prometheus:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1" if expr else "",
    )


def make_change(
    summary: str, at: datetime | str, *, source: str = "argocd", component: str = "", **details: str
) -> Alert:
    """A change event as the app stores it: a resolved process/change occurrence at its time."""
    when = clock(at) if isinstance(at, str) else at
    labels = change_labels({**details, "source": source, "alertname": details.get("alertname", summary)})
    if component:
        labels["component"] = component
    return Alert(
        fingerprint=event_fingerprint(source=source, summary=summary, component=component),
        starts_at=when,
        labels=labels,
        annotations={"summary": summary},
        ends_at=when,
        status=RESOLVED,
    )
