"""An incident's timeline rebuilt from its evidence: alerts firing and resolving, threshold
crossings, what people did, and changes, in time order, each naming its source; and the
durations (detect, acknowledge, mitigate, resolve) read off it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from correlate.catalog import Band
from correlate.series import RED, Crossing

# Which layer a band's signal belongs to (the catalog's bands carry no layer).
BAND_LAYERS = {
    "kv_pool_usage": "engine",
    "framebuffer_headroom": "hardware",
    "framebuffer_ratio": "hardware",
    "kv_fragmentation": "engine",
    "queue_wait": "engine",
    "batch_fill": "engine",
    "spec_acceptance": "engine",
    "ttft_p99": "serving",
    "tpot_p99": "serving",
    "itl_jitter": "serving",
}
# Kinds in the contract; `note` is an action of its own kind.
KIND_ORDER = {"change": 0, "threshold": 1, "alert_fired": 2, "action": 3, "note": 3, "alert_resolved": 4}
PAST = {"acknowledge": "acknowledged", "mitigate": "mitigated", "resolve": "resolved", "reopen": "reopened"}
DEGRADE_WORDS = {
    "L1": "L1: speculative decoding disabled",
    "L2": "L2: very long requests (> 16K) rejected",
    "L3": "L3: switched to a small-model replica",
    "none": "degradation lifted",
}


@dataclass(frozen=True)
class AlertFact:
    id: int
    alertname: str
    starts_at: datetime
    ends_at: datetime | None = None
    status: str = "firing"
    kind: str = "alert"
    layer: str | None = None
    failure_mode: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    false_positive: bool = False
    source: str = "alertmanager"
    severity: str = ""

    @property
    def summary(self) -> str:
        return str(self.annotations.get("summary") or self.annotations.get("description") or "")

    @property
    def where(self) -> str:
        for key in (
            "exported_pod",
            "pod",
            "node",
            "Hostname",
            "hostname",
            "instance",
            "model_name",
            "model",
            "service",
            "namespace",
        ):
            if self.labels.get(key):
                return str(self.labels[key])
        return ""

    @property
    def has_runbook(self) -> bool:
        return any(self.annotations.get(key) for key in ("runbook_url", "runbook", "runbook_URL", "playbook"))


@dataclass(frozen=True)
class ActionFact:
    id: int
    action: str
    at: datetime
    by: str | None = None
    body: Mapping[str, Any] = field(default_factory=dict)
    alert_id: int | None = None


@dataclass(frozen=True)
class Item:
    at: datetime
    kind: str
    layer: str
    title: str
    detail: str
    source: str
    ref: tuple[str, Any]
    signal: str | None = None
    band: str | None = None
    value: float | None = None
    action: str | None = None
    by: str | None = None
    alert_id: int | None = None
    # alert_fired items of an effect that was among the top predictions when it came
    # (correlate/forecast.py): {"lead_s": how long before, "source": history | rules}
    predicted: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "at": self.at,
            "kind": self.kind,
            "layer": self.layer,
            "title": self.title,
            "detail": self.detail,
            "source": self.source,
        }
        if self.kind == "threshold":
            item.update(signal=self.signal, band=self.band, value=self.value)
        if self.kind in ("action", "note"):
            item.update(action=self.action, by=self.by, alert_id=self.alert_id)
        if self.predicted is not None:
            item["predicted"] = dict(self.predicted)
        return item


@dataclass(frozen=True)
class Durations:
    onset: datetime | None
    detected_at: datetime | None
    detect_s: float | None
    acknowledge_s: float | None
    mitigate_s: float | None
    resolve_s: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {
            "detect_s": self.detect_s,
            "acknowledge_s": self.acknowledge_s,
            "mitigate_s": self.mitigate_s,
            "resolve_s": self.resolve_s,
        }


def _fmt(value: float, unit: str) -> str:
    if unit == "ratio":
        return f"{value * 100:.1f}%"
    if unit == "seconds":
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"
    return f"{value:g} {unit}".strip()


def threshold_item(crossing: Crossing, band: Band | None) -> Item:
    title_of = band.title.split(" (")[0] if band else crossing.signal
    unit = band.unit if band else ""
    where = next(
        (
            crossing.labels[k]
            for k in ("exported_pod", "pod", "Hostname", "hostname", "node", "gpu")
            if crossing.labels.get(k)
        ),
        "",
    )
    verb = "entered" if crossing.worse else "back to"
    title = f"{title_of} {verb} {crossing.to} ({_fmt(crossing.value, unit)})"
    line = "crossed" if crossing.worse else "left"
    detail = (
        f"{line} the {_fmt(crossing.line, unit)} line"
        + (f" on {where}" if where else "")
        + f"; was {crossing.previous}"
    )
    return Item(
        crossing.at,
        "threshold",
        BAND_LAYERS.get(crossing.signal, "unknown"),
        title,
        detail,
        "metrics",
        ("threshold", crossing.id),
        signal=crossing.signal,
        band=crossing.to,
        value=crossing.value,
    )


def alert_items(alert: AlertFact) -> list[Item]:
    layer = alert.layer or ("process" if alert.kind == "change" else "unknown")
    if alert.kind == "change":
        return [
            Item(
                alert.starts_at,
                "change",
                "process",
                alert.summary or alert.alertname,
                _change_detail(alert),
                alert.source,
                ("change", alert.id),
            )
        ]
    where = f" on {alert.where}" if alert.where else ""
    detail = alert.summary + (" (judged false positive)" if alert.false_positive else "")
    items = [
        Item(
            alert.starts_at,
            "alert_fired",
            layer,
            f"{alert.alertname} fired{where}",
            detail,
            alert.source,
            ("alert", alert.id),
            alert_id=alert.id,
        )
    ]
    if alert.status == "resolved" and alert.ends_at is not None:
        items.append(
            Item(
                alert.ends_at,
                "alert_resolved",
                layer,
                f"{alert.alertname} resolved{where}",
                "",
                alert.source,
                ("alert", alert.id),
                alert_id=alert.id,
            )
        )
    return items


def _change_detail(alert: AlertFact) -> str:
    skip = {"alertname", "cluster", "namespace", "source", "component", "group", "class"}
    facts = [f"{k}={v}" for k, v in sorted(alert.labels.items()) if k not in skip and v]
    return ", ".join(facts)[:500]


def action_item(action: ActionFact, alerts: Mapping[int, AlertFact]) -> Item:
    body = action.body or {}
    alert = alerts.get(action.alert_id) if action.alert_id else None
    who = action.by or "system"
    if action.action == "note":
        title, detail, kind = f"{who} noted", str(body.get("text", "")), "note"
    else:
        kind = "action"
        verb = action.action.replace("_", " ")
        if action.action == "false_positive":
            title = f"{who} judged {alert.alertname if alert else 'an alert'} a false positive"
        elif action.action == "degrade":
            title = f"{who} set degradation {DEGRADE_WORDS.get(str(body.get('level')), body.get('level'))}"
        elif action.action == "assign":
            title = f"{who} assigned {body.get('username', '')}"
        elif action.action == "severity":
            title = f"{who} set severity {body.get('level', '')}"
        elif action.action == "merge":
            title = f"{who} merged" + (
                f" into #{body['into']}"
                if body.get("into")
                else f" #{body['from']} into this"
                if body.get("from")
                else ""
            )
        elif action.action == "split":
            title = f"{who} split off {len(body.get('alert_ids') or [])} alert(s)"
        elif action.action == "exclude_alert":
            title = f"{who} excluded {alert.alertname if alert else 'an alert'} from the incident"
        else:
            title = f"{who} {PAST.get(action.action, verb)}"
        detail = (
            f"{alert.alertname} on {alert.where}"
            if alert and alert.where
            else (alert.alertname if alert else "")
        )
    return Item(
        action.at,
        kind,
        "process",
        title,
        detail,
        "people",
        ("action", action.id),
        action=action.action,
        by=action.by,
        alert_id=action.alert_id,
    )


def build_timeline(
    *,
    alerts: Iterable[AlertFact],
    crossings: Iterable[Crossing],
    actions: Iterable[ActionFact],
    bands: Mapping[str, Band],
) -> list[Item]:
    alerts = list(alerts)
    by_id = {alert.id: alert for alert in alerts}
    items = [item for alert in alerts for item in alert_items(alert)]
    items += [threshold_item(c, bands.get(c.signal)) for c in crossings]
    items += [action_item(a, by_id) for a in actions if a.action != "refresh_evidence"]
    return sorted(items, key=lambda i: (i.at, KIND_ORDER.get(i.kind, 9), str(i.ref[1])))


def durations(
    *,
    alerts: Sequence[AlertFact],
    crossings: Sequence[Crossing],
    acknowledged_at: datetime | None,
    mitigated_at: datetime | None,
    resolved_at: datetime | None,
) -> Durations:
    """Detection runs from the first red crossing or the first alert, whichever came first, to
    the first alert (changes are not detections). Acknowledge, mitigate and resolve are timed
    from the same onset, so a late alert shows in all of them."""
    fired = [a.starts_at for a in alerts if a.kind != "change"]
    reds = [c.at for c in crossings if c.to == RED and c.worse]
    first_alert = min(fired) if fired else None
    onset = min(fired + reds) if fired or reds else None

    def since(moment: datetime | None) -> float | None:
        return round((moment - onset).total_seconds(), 3) if moment and onset else None

    return Durations(
        onset,
        first_alert,
        since(first_alert),
        since(acknowledged_at),
        since(mitigated_at),
        since(resolved_at),
    )
