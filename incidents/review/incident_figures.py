"""The week's incidents: counts by severity, root cause, cluster and model; how long detecting,
acknowledging, mitigating and resolving took; which came back and which root causes recur.

An incident belongs to the week it started in (UTC). It counts once in each breakdown: under its
root's failure mode and layer (its first failure mode and layer when it has no root). Durations
are the incidents' own (`durations` of the incident API): from the onset (the first red crossing
of its evidence or its first alert, whichever came first) to its first alert, acknowledgement,
mitigation and resolution.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Min, Q
from django.db.models.fields.json import KT

from incidents.models import Alert, Incident
from incidents.review.stats import counted, summary
from incidents.signatures import signature_words

UNKNOWN = "unknown"
EARLIER_SHOWN = 5  # a repeat links its newest earlier incidents; the count says how many there were
DURATIONS = (
    ("detect_s", "detected_at"),
    ("acknowledge_s", "acknowledged_at"),
    ("mitigate_s", "mitigated_at"),
    ("resolve_s", "resolved_at"),
)


@dataclass
class WeekIncident:
    id: int
    title: str
    severity: str
    status: str
    started_at: datetime
    detected_at: datetime | None
    acknowledged_at: datetime | None
    mitigated_at: datetime | None
    resolved_at: datetime | None
    first_red_at: datetime | None
    scope: dict[str, str]
    layer: str
    failure_mode: str
    root_alertname: str
    signature: str

    @property
    def onset(self) -> datetime | None:
        known = [moment for moment in (self.detected_at, self.first_red_at) if moment is not None]
        return min(known) if known else None

    def seconds_to(self, moment: datetime | None) -> float | None:
        onset = self.onset
        return round((moment - onset).total_seconds(), 3) if moment and onset else None

    @property
    def cluster(self) -> str:
        return self.scope.get("cluster") or UNKNOWN

    @property
    def model(self) -> str:
        return self.scope.get("model") or UNKNOWN

    @property
    def place(self) -> str:
        """The deployment, else the model: where 'the same trouble again' is judged."""
        return self.scope.get("deployment") or self.scope.get("model") or ""

    def link(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "severity": self.severity, "started_at": self.started_at}


def week_incidents(start: datetime, end: datetime) -> list[WeekIncident]:
    """Visible incidents started in [start, end), oldest first, each with its first alert's time."""
    rows = list(
        Incident.objects.visible()
        .filter(started_at__gte=start, started_at__lt=end)
        .order_by("started_at", "id")
        .values(
            "id", "title", "severity", "status", "started_at", "acknowledged_at", "mitigated_at",
            "resolved_at", "first_red_at", "scope", "layers", "failure_modes", "chain_signature",
            "root_alert__layer", "root_alert__failure_mode", "root_alert__alertname",
        )
    )  # fmt: skip
    first_alert = first_alerts([row["id"] for row in rows])
    return [
        WeekIncident(
            id=row["id"],
            title=row["title"],
            severity=row["severity"],
            status=row["status"],
            started_at=row["started_at"],
            detected_at=first_alert.get(row["id"]),
            acknowledged_at=row["acknowledged_at"],
            mitigated_at=row["mitigated_at"],
            resolved_at=row["resolved_at"],
            first_red_at=row["first_red_at"],
            scope={k: v for k, v in (row["scope"] or {}).items() if isinstance(v, str)},
            layer=row["root_alert__layer"] or next(iter(row["layers"] or []), None) or UNKNOWN,
            failure_mode=row["root_alert__failure_mode"]
            or next(iter(row["failure_modes"] or []), None)
            or UNKNOWN,
            root_alertname=row["root_alert__alertname"] or "",
            signature=row["chain_signature"] or "",
        )
        for row in rows
    ]


def first_alerts(incident_ids: list[int]) -> dict[int, datetime]:
    """Each incident's first alert (changes are not detections), as its durations count it."""
    if not incident_ids:
        return {}
    rows = (
        Alert.objects.filter(incident_id__in=incident_ids)
        .exclude(kind=Alert.Kind.CHANGE)
        .values("incident_id")
        .annotate(first=Min("starts_at"))
    )
    return {row["incident_id"]: row["first"] for row in rows}


def incident_counts(incidents: list[WeekIncident]) -> dict[str, Any]:
    return {
        "count": len(incidents),
        "by_severity": counted(i.severity for i in incidents),
        "by_failure_mode": counted(i.failure_mode for i in incidents),
        "by_layer": counted(i.layer for i in incidents),
        "by_cluster": counted(i.cluster for i in incidents),
        "by_model": counted(i.model for i in incidents),
        "by_root_cause": counted(root_cause(i) for i in incidents),
        "durations": durations(incidents),
    }


def durations(incidents: list[WeekIncident]) -> dict[str, dict[str, float | int | None]]:
    return {key: summary(i.seconds_to(getattr(i, moment)) for i in incidents) for key, moment in DURATIONS}


def repeats(incidents: list[WeekIncident]) -> list[dict[str, Any]]:
    """The week's incidents whose chain signature an earlier incident had on the same deployment
    or model, each with its newest earlier ones."""
    signed = [i for i in incidents if i.signature and i.place]
    if not signed:
        return []
    earlier: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    places = {i.place for i in signed} | {i.scope.get("model", "") for i in signed} - {""}
    rows = (
        Incident.objects.visible()
        .filter(
            Q(scope__deployment__in=places) | Q(scope__model__in=places),
            chain_signature__in={i.signature for i in signed},
            started_at__lt=max(i.started_at for i in signed),
        )
        .order_by("-started_at", "-id")
        .values(
            "id",
            "title",
            "started_at",
            "chain_signature",
            deployment=KT("scope__deployment"),
            model=KT("scope__model"),
        )
    )
    for row in rows:
        for place in {row["deployment"], row["model"]} - {None, ""}:
            earlier[(row["chain_signature"], str(place))].append(row)
    found = []
    for incident in signed:
        before = [
            row
            for place in dict.fromkeys((incident.scope.get("deployment"), incident.scope.get("model")))
            if place
            for row in earlier.get((incident.signature, place), [])
            if (row["started_at"], row["id"]) < (incident.started_at, incident.id)
        ]
        before = sorted({row["id"]: row for row in before}.values(), key=lambda r: (r["started_at"], r["id"]))
        if before:
            found.append(
                {
                    **incident.link(),
                    "signature": incident.signature,
                    "signature_words": signature_words(incident.signature),
                    "place": incident.place,
                    "seen_before": len(before),
                    "first_seen": before[0]["started_at"],
                    "earlier": [
                        {"id": row["id"], "title": row["title"], "started_at": row["started_at"]}
                        for row in reversed(before[-EARLIER_SHOWN:])
                    ],
                }
            )
    return found


def repeat_count(incidents: list[WeekIncident], week_start: datetime) -> int:
    """How many of `repeats` there are, for the trend: the (signature, place) pairs seen before
    the week read as distinct pairs, not as every earlier incident."""
    signed = sorted((i for i in incidents if i.signature and i.place), key=lambda i: (i.started_at, i.id))
    if not signed:
        return 0
    seen: set[tuple[str, str]] = set()
    for signature, deployment, model in (
        Incident.objects.visible()
        .filter(chain_signature__in={i.signature for i in signed}, started_at__lt=week_start)
        .values_list("chain_signature", KT("scope__deployment"), KT("scope__model"))
        .distinct()
    ):
        seen.update((signature, place) for place in (deployment, model) if place)
    count = 0
    for incident in signed:
        mine = {
            (incident.signature, place)
            for place in (incident.scope.get("deployment"), incident.scope.get("model"))
            if place
        }
        count += bool(mine & seen)
        seen |= mine
    return count


def root_cause(incident: WeekIncident) -> str:
    return f"{incident.layer}:{incident.failure_mode}"


def recurring_roots(incidents: list[WeekIncident], trend: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Root causes by (layer, failure mode), most frequent this week first, with how many of the
    trend's weeks had them too and the root alerts that named them."""
    this_week = counted(root_cause(i) for i in incidents)
    names: dict[str, dict[str, int]] = defaultdict(dict)
    for i in incidents:
        if i.root_alertname:
            bucket = names[root_cause(i)]
            bucket[i.root_alertname] = bucket.get(i.root_alertname, 0) + 1
    return [
        {
            "layer": key.partition(":")[0],
            "failure_mode": key.partition(":")[2],
            "count": count,
            "weeks_seen_before": sum(1 for row in trend if row["incidents"]["by_root_cause"].get(key)),
            "root_alerts": dict(sorted(names[key].items(), key=lambda item: (-item[1], item[0]))),
        }
        for key, count in this_week.items()
    ]
