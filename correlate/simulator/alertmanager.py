"""Alertmanager's dispatcher and dedup stage, replayed offline, producing v4 webhook bodies.

Mirrors prometheus/alertmanager 0.25: an aggregation group per route and group labels, first
flush after group_wait (at once when a late alert's startsAt + group_wait has already passed),
then a flush every group_interval; a flush notifies when new alerts fire, when alerts resolved
(send_resolved), or when repeat_interval elapsed; resolved alerts leave the group after a flush;
alerts in a body sorted by job, instance, then labels; JSON with Go's HTML escaping.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from .core import NS, ZERO_TIME, go_time

if TYPE_CHECKING:
    from .world import Deployment, Node


@dataclass(frozen=True)
class Route:
    receiver: str
    group_by: tuple[str, ...]  # ("...",) groups by all labels
    group_wait_s: int
    group_interval_s: int
    repeat_interval_s: int
    matchers: tuple[tuple[str, str], ...] = ()

    def key(self) -> str:
        if not self.matchers:
            return "{}"
        inner = ", ".join(f'{k}="{v}"' for k, v in self.matchers)
        return "{}/{" + inner + "}"

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.matchers)


@dataclass(frozen=True)
class AlertmanagerConfig:
    name: str
    external_url: str
    routes: tuple[Route, ...]  # children in order, the last one is the root (matches everything)

    def route_for(self, labels: dict[str, str]) -> Route:
        for route in self.routes:
            if route.matches(labels):
                return route
        return self.routes[-1]


@dataclass
class Occurrence:
    labels: dict[str, str]
    annotations: dict[str, str]
    starts: int
    ends: int | None
    generator_url: str
    fingerprint: str
    arrival: int
    am: str
    kind: str = ""
    signal: tuple[str, list[str], float, str] | None = None  # (signal, series keys, threshold, direction)
    seq: int = 0
    # The story's deployment / node behind the alert, for metric windows and tests.
    dep: Deployment | None = None
    node: Node | None = None

    @property
    def starts_at(self) -> str:
        return go_time(self.starts)

    @property
    def key(self) -> tuple[str, str]:
        return (self.fingerprint, self.starts_at)


@dataclass
class _Group:
    route: Route
    labels: dict[str, str]
    key: str
    created: int
    order: int
    alerts: dict[str, Occurrence] = field(default_factory=dict)
    flushed: bool = False
    last_firing: frozenset[str] | None = None
    last_resolved: frozenset[str] = frozenset()
    last_sent: int | None = None
    next_tick: int | None = None


class _BodyAlert(TypedDict):
    """One alert of a v4 webhook body, as `_flush` writes it."""

    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    startsAt: str
    endsAt: str
    generatorURL: str
    fingerprint: str


@dataclass
class Delivery:
    at: int
    body: dict


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _label_string(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={_quote(labels[k])}" for k in sorted(labels)) + "}"


def _sort_key(occ: Occurrence) -> tuple:
    parts = []
    for name in ("job", "instance"):
        v = occ.labels.get(name)
        parts.append((0, v) if v is not None else (1, ""))
    flat: list[str] = []
    for k in sorted(occ.labels):
        flat.extend((k, occ.labels[k]))
    return (parts[0], parts[1], flat)


def _common(dicts: list[dict[str, str]]) -> dict[str, str]:
    if not dicts:
        return {}
    first = dicts[0]
    out = {}
    for k in sorted(first):
        if all(d.get(k) == first[k] for d in dicts[1:]):
            out[k] = first[k]
    return out


def simulate(
    configs: dict[str, AlertmanagerConfig], occurrences: list[Occurrence], end: int
) -> list[Delivery]:
    """Replays arrivals through each Alertmanager's routes; returns deliveries in time order."""
    arrivals = sorted(occurrences, key=lambda o: (o.arrival, o.seq))
    groups: dict[tuple[str, str], _Group] = {}
    heap: list[tuple[int, int, tuple[str, str]]] = []
    deliveries: list[Delivery] = []
    order = 0
    i = 0
    while i < len(arrivals) or heap:
        next_arrival = arrivals[i].arrival if i < len(arrivals) else None
        next_flush = heap[0][0] if heap else None
        if next_arrival is not None and (next_flush is None or next_arrival <= next_flush):
            occ = arrivals[i]
            i += 1
            cfg = configs[occ.am]
            route = cfg.route_for(occ.labels)
            if route.group_by == ("...",):
                glabels = dict(occ.labels)
            else:
                glabels = {k: occ.labels[k] for k in route.group_by if k in occ.labels}
            gkey = f"{route.key()}:{_label_string(glabels)}"
            ident = (occ.am, gkey)
            group = groups.get(ident)
            if group is None:
                order += 1
                group = _Group(route=route, labels=glabels, key=gkey, created=occ.arrival, order=order)
                groups[ident] = group
                first = occ.arrival + route.group_wait_s * NS
                heapq.heappush(heap, (first, order, ident))
            if not group.flushed and occ.starts + route.group_wait_s * NS < occ.arrival:
                heapq.heappush(heap, (occ.arrival, group.order, ident))
            group.alerts[occ.fingerprint] = occ
            continue
        t, gorder, ident = heapq.heappop(heap)
        group = groups.get(ident)
        if group is None or group.order != gorder or t > end:
            continue
        if group.next_tick is not None and t < group.next_tick:
            continue  # the early flush of a late alert already happened; this was the old timer
        group.flushed = True
        group.next_tick = t + group.route.group_interval_s * NS
        _flush(configs[ident[0]], group, t, deliveries)
        for fp in [fp for fp, o in group.alerts.items() if o.ends is not None and o.ends <= t]:
            del group.alerts[fp]
        if not group.alerts:
            del groups[ident]
            continue
        heapq.heappush(heap, (group.next_tick, group.order, ident))
    deliveries.sort(key=lambda d: d.at)
    return deliveries


def _flush(cfg: AlertmanagerConfig, group: _Group, t: int, deliveries: list[Delivery]) -> None:
    firing = frozenset(fp for fp, o in group.alerts.items() if o.ends is None or o.ends > t)
    resolved = frozenset(fp for fp, o in group.alerts.items() if o.ends is not None and o.ends <= t)
    if group.last_firing is None:
        send = bool(firing)
    elif not firing <= group.last_firing:
        send = True
    elif not firing:
        send = bool(group.last_firing)
    elif not resolved <= group.last_resolved:
        send = True
    else:
        send = group.last_sent is not None and group.last_sent + group.route.repeat_interval_s * NS <= t
    if not send:
        return
    group.last_firing = firing
    group.last_resolved = resolved
    group.last_sent = t
    alerts = sorted(group.alerts.values(), key=_sort_key)
    body_alerts: list[_BodyAlert] = []
    for o in alerts:
        is_firing = o.fingerprint in firing
        body_alerts.append(
            {
                "status": "firing" if is_firing else "resolved",
                "labels": {k: o.labels[k] for k in sorted(o.labels)},
                "annotations": {k: o.annotations[k] for k in sorted(o.annotations)},
                "startsAt": go_time(o.starts),
                "endsAt": ZERO_TIME if is_firing or o.ends is None else go_time(o.ends),  # resolved: ended
                "generatorURL": o.generator_url,
                "fingerprint": o.fingerprint,
            }
        )
    body = {
        "receiver": group.route.receiver,
        "status": "firing" if firing else "resolved",
        "alerts": body_alerts,
        "groupLabels": {k: group.labels[k] for k in sorted(group.labels)},
        "commonLabels": _common([a["labels"] for a in body_alerts]),
        "commonAnnotations": _common([a["annotations"] for a in body_alerts]),
        "externalURL": cfg.external_url,
        "version": "4",
        "groupKey": group.key,
        "truncatedAlerts": 0,
    }
    deliveries.append(Delivery(at=t, body=body))


def dumps_go(obj: object) -> str:
    """json.Marshal's output: compact, HTML characters escaped as \\u003c \\u003e \\u0026."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
