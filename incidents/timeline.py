"""An incident's timeline and root-cause matrix, rebuilt from what is stored: its alerts, the
change events of its cluster around it, its evidence series and what people did. The pure
builders live in `correlate.series`, `correlate.timeline` and `correlate.matrix`; this module
turns rows into their inputs, and keeps human matrix edits (every edit a new row)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from correlate.catalog import Band
from correlate.matrix import COLUMNS, Row, suggest_matrix
from correlate.series import RED, Crossing, Hysteresis, Series, all_crossings, banded
from correlate.timeline import ActionFact, AlertFact, Durations, Item, build_timeline, durations
from incidents.catalog import catalog
from incidents.evidence.points import finite, unpack_points
from incidents.forecast import predicted_marks
from incidents.models import Alert, EvidenceGap, EvidenceSeries, Incident, IncidentAction, MatrixCell

CHANGE_LOOKBACK = timedelta(hours=1)
EVIDENCE_KINDS = ("alert", "threshold", "action", "change", "catalog")


@dataclass(frozen=True)
class Evidence:
    """Everything the timeline, the matrix and the evidence page read, loaded once."""

    incident: Incident
    alerts: list[AlertFact]
    series: list[Series]
    bands: dict[int | str, Band | None]
    crossings: list[Crossing]
    actions: list[ActionFact]
    gaps: list[EvidenceGap]

    def timeline(self) -> list[Item]:
        items = build_timeline(
            alerts=self.alerts, crossings=self.crossings, actions=self.actions, bands=catalog().bands
        )
        marks = predicted_marks(self.incident)
        return [
            replace(item, predicted=marks[item.alert_id])
            if item.kind == "alert_fired" and item.alert_id in marks
            else item
            for item in items
        ]

    def durations(self) -> Durations:
        i = self.incident
        return durations(
            alerts=self.alerts,
            crossings=self.crossings,
            acknowledged_at=i.acknowledged_at,
            mitigated_at=i.mitigated_at,
            resolved_at=i.resolved_at,
        )

    def suggested_matrix(self) -> list[Row]:
        return suggest_matrix(
            alerts=self.alerts,
            crossings=self.crossings,
            actions=self.actions,
            catalog=catalog(),
            root_alert_id=self.incident.root_alert_id,
        )


def alert_fact(alert: Alert) -> AlertFact:
    return AlertFact(
        id=alert.pk,
        alertname=alert.alertname,
        starts_at=alert.starts_at,
        ends_at=alert.ends_at,
        status=alert.status,
        kind=alert.kind,
        layer=alert.layer,
        failure_mode=alert.failure_mode,
        labels=alert.labels or {},
        annotations=alert.annotations or {},
        false_positive=alert.false_positive,
        source=alert.integration.kind if alert.integration_id else "",
        severity=str((alert.labels or {}).get("severity", "")),
    )


def incident_window_end(incident: Incident) -> datetime:
    return incident.resolved_at or incident.last_alert_at or timezone.now()


def scope_alerts(incident: Incident) -> list[Alert]:
    """The incident's alerts plus the change events of its cluster from an hour before it started
    to its end: a change just before trouble is a suspect even when correlation left it out."""
    changes = Q(
        kind=Alert.Kind.CHANGE,
        correlation_key=incident.correlation_key,
        starts_at__gte=incident.started_at - CHANGE_LOOKBACK,
        starts_at__lte=incident_window_end(incident),
    )
    rows = (
        Alert.objects.filter(Q(incident=incident) | changes)
        .select_related("integration")
        .order_by("starts_at", "id")
    )
    return list(rows)


def series_of(row: EvidenceSeries) -> Series:
    return Series(
        id=row.pk,
        signal=row.signal,
        labels=row.labels or {},
        points=finite(unpack_points(row.points)),
        query=row.query,
    )


DEFAULT_HYSTERESIS = Hysteresis()


def incident_evidence(incident: Incident, *, hysteresis: Hysteresis = DEFAULT_HYSTERESIS) -> Evidence:
    bands = catalog().bands
    series = [
        series_of(row) for row in EvidenceSeries.objects.filter(incident=incident).order_by("signal", "id")
    ]
    actions = [
        ActionFact(
            id=a.pk,
            action=a.action,
            at=a.at,
            by=a.by.username if a.by else None,
            body=a.body or {},
            alert_id=a.alert_id,
        )
        for a in IncidentAction.objects.filter(incident=incident).select_related("by").order_by("at", "id")
    ]
    return Evidence(
        incident=incident,
        alerts=[alert_fact(alert) for alert in scope_alerts(incident)],
        series=series,
        bands=banded(series, bands),
        crossings=all_crossings(series, bands, hysteresis),
        actions=actions,
        gaps=list(EvidenceGap.objects.filter(incident=incident).order_by("since", "signal")),
    )


def first_red_crossing(incident_id: int, *, hysteresis: Hysteresis = DEFAULT_HYSTERESIS) -> datetime | None:
    """When the incident's evidence first crossed into red (worsening), as its durations read it."""
    series = [series_of(row) for row in EvidenceSeries.objects.filter(incident_id=incident_id)]
    reds = [c.at for c in all_crossings(series, catalog().bands, hysteresis) if c.to == RED and c.worse]
    return min(reds, default=None)


def incident_timeline(incident: Incident) -> list[dict[str, Any]]:
    return [item.as_dict() for item in incident_evidence(incident).timeline()]


def incident_durations(incident: Incident) -> dict[str, float | None]:
    """`durations` of the incident API: detection from the first red crossing or first alert."""
    return incident_evidence(incident).durations().as_dict()


def incident_detect_s(incident: Incident) -> float | None:
    return incident_evidence(incident).durations().detect_s


# The matrix -----------------------------------------------------------------------------


def current_cells(incident: Incident) -> dict[tuple[str, str], MatrixCell]:
    """The newest human cell per (layer, column); older rows are its history."""
    cells: dict[tuple[str, str], MatrixCell] = {}
    for cell in (
        MatrixCell.objects.filter(incident=incident)
        .select_related("edited_by")
        .order_by("-created_at", "-id")
    ):
        cells.setdefault((cell.layer, cell.column), cell)
    return cells


def incident_matrix(incident: Incident, *, evidence: Evidence | None = None) -> list[dict[str, Any]]:
    """Suggested cells, each replaced by the newest human edit of that cell where one exists."""
    suggested = (evidence or incident_evidence(incident)).suggested_matrix()
    human = current_cells(incident)
    layers = [row.layer for row in suggested]
    order = {layer: i for i, layer in enumerate(catalog().layers)}
    layers += sorted(
        {layer for layer, _ in human} - set(layers), key=lambda name: (order.get(name, len(order)), name)
    )
    by_layer = {row.layer: row for row in suggested}
    result = []
    for layer in layers:
        row: dict[str, Any] = {"layer": layer}
        for column in COLUMNS:
            cell = human.get((layer, column))
            if cell is not None:
                row[column] = {
                    "text": cell.text,
                    "evidence": cell.evidence,
                    "edited_by": cell.edited_by.username if cell.edited_by else None,
                }
            else:
                base = (
                    by_layer[layer].cell(column).as_dict()
                    if layer in by_layer
                    else {"text": "", "evidence": []}
                )
                row[column] = {**base, "edited_by": None}
        result.append(row)
    return result
