"""How well a grouping matches a truth: pairwise F1 over alert occurrences and root top-1.

Two anchors give the figures meaning: Alertmanager-style grouping by alertname+cluster and a
Keep-style 15-minute window per cluster, each naming its earliest alert as root. Anything the
engine claims is only worth what it adds over those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from correlate.events import Alert
from correlate.io import parse_time
from correlate.results import Incident

Occurrence = tuple[str, str]


@dataclass(frozen=True)
class Grouping:
    groups: tuple[frozenset[Occurrence], ...]
    roots: tuple[Occurrence | None, ...]


@dataclass(frozen=True)
class Score:
    method: str
    precision: float
    recall: float
    f1: float
    root_top1: float
    incidents: int


def occurrence(fingerprint: str, starts_at: str | datetime) -> Occurrence:
    """Times are compared as instants, so '...Z' and '+00:00' or extra digits still match."""
    moment = starts_at if isinstance(starts_at, datetime) else parse_time(starts_at)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.%f") if moment else str(starts_at)
    return (fingerprint, stamp)


def _occ(raw: Mapping[str, Any]) -> Occurrence:
    return occurrence(str(raw["fingerprint"]), raw["starts_at"])


def grouping_from_document(doc: Mapping[str, Any]) -> Grouping:
    """truth.json's shape (also what `python -m correlate` prints); noise becomes singletons."""
    groups: list[frozenset[Occurrence]] = []
    roots: list[Occurrence | None] = []
    for incident in doc.get("incidents", []):
        groups.append(frozenset(_occ(a) for a in incident.get("alerts", [])))
        roots.append(_occ(incident["root"]) if incident.get("root") else None)
    for raw in doc.get("noise", []):
        groups.append(frozenset({_occ(raw)}))
        roots.append(None)
    return Grouping(tuple(groups), tuple(roots))


def grouping_from_incidents(incidents: Iterable[Incident]) -> Grouping:
    groups: list[frozenset[Occurrence]] = []
    roots: list[Occurrence | None] = []
    for incident in incidents:
        by_key = {m.key: m for m in incident.members}
        groups.append(frozenset(occurrence(m.fingerprint, m.starts_at) for m in incident.members))
        root = by_key[incident.root.alert_key] if incident.root else None
        roots.append(occurrence(root.fingerprint, root.starts_at) if root else None)
    return Grouping(tuple(groups), tuple(roots))


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def pairwise(truth: Grouping, predicted: Grouping) -> tuple[float, float, float]:
    """Precision, recall, F1 over pairs of distinct occurrences the truth knows."""
    universe = set().union(*truth.groups) if truth.groups else set()
    true_of = {o: i for i, g in enumerate(truth.groups) for o in g}
    pred_of: dict[Occurrence, int] = {}
    for j, group in enumerate(predicted.groups):
        for o in group:
            if o in universe:
                pred_of[o] = j
    next_id = len(predicted.groups)
    for o in sorted(universe - set(pred_of)):
        pred_of[o] = next_id
        next_id += 1
    cells: dict[tuple[int, int], int] = {}
    pred_sizes: dict[int, int] = {}
    for o in universe:
        cell = (true_of[o], pred_of[o])
        cells[cell] = cells.get(cell, 0) + 1
        pred_sizes[pred_of[o]] = pred_sizes.get(pred_of[o], 0) + 1
    together = sum(_pairs(n) for n in cells.values())
    true_pairs = sum(_pairs(len(g)) for g in truth.groups)
    pred_pairs = sum(_pairs(n) for n in pred_sizes.values())
    precision = together / pred_pairs if pred_pairs else 1.0
    recall = together / true_pairs if true_pairs else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def root_top1(truth_doc: Mapping[str, Any], predicted: Grouping) -> float:
    """Share of true incidents whose best-overlapping predicted incident names the true root."""
    incidents = [i for i in truth_doc.get("incidents", []) if i.get("root")]
    if not incidents:
        return 1.0
    hits = 0
    for incident in incidents:
        members = frozenset(_occ(a) for a in incident.get("alerts", []))
        best = max(
            range(len(predicted.groups)),
            default=None,
            key=lambda j: (len(members & predicted.groups[j]), -len(predicted.groups[j])),
        )
        if (
            best is not None
            and members & predicted.groups[best]
            and predicted.roots[best] == _occ(incident["root"])
        ):
            hits += 1
    return hits / len(incidents)


def _earliest(alerts: Sequence[Alert]) -> Occurrence:
    first = min(alerts, key=lambda a: (a.starts_at, a.fingerprint))
    return occurrence(first.fingerprint, first.starts_at)


def _cluster(alert: Alert) -> str:
    return alert.labels.get("cluster", "")


def alertmanager_anchor(alerts: Iterable[Alert]) -> Grouping:
    """Alertmanager's `group_by: [alertname, cluster]`: one group per name and cluster."""
    buckets: dict[tuple[str, str], list[Alert]] = {}
    for alert in alerts:
        buckets.setdefault((alert.alertname, _cluster(alert)), []).append(alert)
    groups = tuple(frozenset(occurrence(a.fingerprint, a.starts_at) for a in b) for b in buckets.values())
    return Grouping(groups, tuple(_earliest(b) for b in buckets.values()))


def keep_anchor(alerts: Iterable[Alert], window: timedelta = timedelta(minutes=15)) -> Grouping:
    """Keep's time-window correlation: per cluster, alerts within `window` of a group's first one."""
    per_cluster: dict[str, list[Alert]] = {}
    for alert in alerts:
        per_cluster.setdefault(_cluster(alert), []).append(alert)
    buckets: list[list[Alert]] = []
    for cluster_alerts in per_cluster.values():
        cluster_alerts.sort(key=lambda a: (a.starts_at, a.fingerprint))
        current: list[Alert] = []
        for alert in cluster_alerts:
            if current and alert.starts_at - current[0].starts_at > window:
                buckets.append(current)
                current = []
            current.append(alert)
        if current:
            buckets.append(current)
    groups = tuple(frozenset(occurrence(a.fingerprint, a.starts_at) for a in b) for b in buckets)
    return Grouping(groups, tuple(_earliest(b) for b in buckets))


def score(method: str, truth_doc: Mapping[str, Any], predicted: Grouping) -> Score:
    truth = grouping_from_document(truth_doc)
    precision, recall, f1 = pairwise(truth, predicted)
    return Score(
        method, precision, recall, f1, root_top1(truth_doc, predicted), len(truth_doc.get("incidents", []))
    )


def format_table(scores: Sequence[Score]) -> str:
    lines = ["method              precision  recall  pairwise_f1  root_top1  true_incidents"]
    for s in scores:
        lines.append(
            f"{s.method:<19} {s.precision:9.3f} {s.recall:7.3f} {s.f1:12.3f} "
            f"{s.root_top1:10.3f} {s.incidents:15d}"
        )
    return "\n".join(lines)
