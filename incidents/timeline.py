"""An incident's timeline and root-cause matrix, rebuilt from what is stored: its alerts, the
change events of its cluster around it, its evidence series and what people did. The pure
builders live in `correlate.series`, `correlate.timeline` and `correlate.matrix`; this module
turns rows into their inputs, and keeps human matrix edits (every edit a new row)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from correlate.catalog import Band
from correlate.matrix import COLUMNS, Row, suggest_matrix
from correlate.series import Crossing, Hysteresis, Series, all_crossings, banded
from correlate.timeline import ActionFact, AlertFact, Durations, Item, build_timeline, durations
from incidents.actions import ActionError, require_role
from incidents.catalog import catalog
from incidents.evidence.points import finite, unpack_points
from incidents.models import Alert, EvidenceGap, EvidenceSeries, Incident, IncidentAction, MatrixCell

CHANGE_LOOKBACK = timedelta(hours=1)
EVIDENCE_KINDS = ("alert", "threshold", "action", "change", "catalog")
MAX_CELL_TEXT = 5_000
MAX_EVIDENCE = 200


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
        return build_timeline(alerts=self.alerts, crossings=self.crossings, actions=self.actions, bands=catalog().bands)

    def durations(self) -> Durations:
        i = self.incident
        return durations(alerts=self.alerts, crossings=self.crossings, acknowledged_at=i.acknowledged_at,
                         mitigated_at=i.mitigated_at, resolved_at=i.resolved_at)

    def suggested_matrix(self) -> list[Row]:
        return suggest_matrix(alerts=self.alerts, crossings=self.crossings, actions=self.actions, catalog=catalog(),
                              root_alert_id=self.incident.root_alert_id)


def alert_fact(alert: Alert) -> AlertFact:
    return AlertFact(
        id=alert.pk, alertname=alert.alertname, starts_at=alert.starts_at, ends_at=alert.ends_at, status=alert.status,
        kind=alert.kind, layer=alert.layer, failure_mode=alert.failure_mode, labels=alert.labels or {},
        annotations=alert.annotations or {}, false_positive=alert.false_positive,
        source=alert.integration.kind if alert.integration_id else "", severity=str((alert.labels or {}).get("severity", "")),
    )


def incident_window_end(incident: Incident) -> datetime:
    return incident.resolved_at or incident.last_alert_at or timezone.now()


def scope_alerts(incident: Incident) -> list[Alert]:
    """The incident's alerts plus the change events of its cluster from an hour before it started
    to its end: a change just before trouble is a suspect even when correlation left it out."""
    changes = Q(kind=Alert.Kind.CHANGE, correlation_key=incident.correlation_key,
                starts_at__gte=incident.started_at - CHANGE_LOOKBACK, starts_at__lte=incident_window_end(incident))
    rows = Alert.objects.filter(Q(incident=incident) | changes).select_related("integration").order_by("starts_at", "id")
    return list(rows)


def series_of(row: EvidenceSeries) -> Series:
    return Series(id=row.pk, signal=row.signal, labels=row.labels or {}, points=finite(unpack_points(row.points)), query=row.query)


def incident_evidence(incident: Incident, *, hysteresis: Hysteresis = Hysteresis()) -> Evidence:
    bands = catalog().bands
    series = [series_of(row) for row in EvidenceSeries.objects.filter(incident=incident).order_by("signal", "id")]
    actions = [
        ActionFact(id=a.pk, action=a.action, at=a.at, by=a.by.username if a.by else None, body=a.body or {}, alert_id=a.alert_id)
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
    for cell in MatrixCell.objects.filter(incident=incident).select_related("edited_by").order_by("-created_at", "-id"):
        cells.setdefault((cell.layer, cell.column), cell)
    return cells


def incident_matrix(incident: Incident, *, evidence: Evidence | None = None) -> list[dict[str, Any]]:
    """Suggested cells, each replaced by the newest human edit of that cell where one exists."""
    suggested = (evidence or incident_evidence(incident)).suggested_matrix()
    human = current_cells(incident)
    layers = [row.layer for row in suggested]
    order = {layer: i for i, layer in enumerate(catalog().layers)}
    layers += sorted({layer for layer, _ in human} - set(layers), key=lambda name: (order.get(name, len(order)), name))
    by_layer = {row.layer: row for row in suggested}
    result = []
    for layer in layers:
        row: dict[str, Any] = {"layer": layer}
        for column in COLUMNS:
            cell = human.get((layer, column))
            if cell is not None:
                row[column] = {"text": cell.text, "evidence": cell.evidence,
                               "edited_by": cell.edited_by.username if cell.edited_by else None}
            else:
                base = by_layer[layer].cell(column).as_dict() if layer in by_layer else {"text": "", "evidence": []}
                row[column] = {**base, "edited_by": None}
        result.append(row)
    return result


def matrix_edit(*, incident: Incident, user: AbstractBaseUser, body: Any) -> list[dict[str, Any]]:
    """PATCH: `{layer, <column>: {text, evidence?} | text}` or a list of them. Each edited cell is a
    new row (the old ones stay as history); evidence left out is carried over from the cell as
    it stood, suggested or edited."""
    require_role(user, "author")
    rows = body if isinstance(body, list) else [body]
    if not rows or not all(isinstance(row, dict) for row in rows):
        raise ActionError(400, "body: expected a row {layer, direct_cause|system_defect|process_gap: {text, evidence}} or a list of rows")
    layers = catalog().layers
    current = {row["layer"]: row for row in incident_matrix(incident)}
    edits: list[MatrixCell] = []
    for index, row in enumerate(rows):
        where = f"[{index}]" if isinstance(body, list) else ""
        layer = row.get("layer")
        if layer not in layers:
            raise ActionError(400, f"{where}layer: expected one of {', '.join(layers)}, got {str(layer)[:40]!r}")
        unknown = set(row) - {"layer", *COLUMNS}
        if unknown:
            raise ActionError(400, f"{where}{sorted(unknown)[0]}: unknown field; a row has layer, {', '.join(COLUMNS)}")
        if not set(row) & set(COLUMNS):
            raise ActionError(400, f"{where}: nothing to edit; give at least one of {', '.join(COLUMNS)}")
        for column in COLUMNS:
            if column not in row:
                continue
            text, evidence = _cell_value(row[column], f"{where}{column}")
            if evidence is None:
                evidence = current.get(layer, {}).get(column, {}).get("evidence", [])
            edits.append(MatrixCell(incident=incident, layer=layer, column=column, text=text, evidence=evidence,
                                    edited_by=user if user.pk else None))
    with transaction.atomic():
        for cell in edits:
            cell.save()
    return incident_matrix(incident)


def _cell_value(value: Any, path: str) -> tuple[str, list[dict[str, Any]] | None]:
    if isinstance(value, str):
        value = {"text": value}
    if not isinstance(value, dict):
        raise ActionError(400, f"{path}: expected {{text, evidence}} or a string")
    unknown = set(value) - {"text", "evidence", "edited_by"}
    if unknown:
        raise ActionError(400, f"{path}.{sorted(unknown)[0]}: unknown field; a cell has text and evidence")
    text = value.get("text")
    if not isinstance(text, str) or len(text) > MAX_CELL_TEXT or "\x00" in text:
        raise ActionError(400, f"{path}.text: expected a string of at most {MAX_CELL_TEXT} characters, without NUL")
    if "evidence" not in value:
        return text, None
    evidence = value["evidence"]
    if not isinstance(evidence, list) or len(evidence) > MAX_EVIDENCE:
        raise ActionError(400, f"{path}.evidence: expected a list of at most {MAX_EVIDENCE} {{kind, id}}")
    cleaned = []
    for i, item in enumerate(evidence):
        if not isinstance(item, dict) or set(item) != {"kind", "id"}:
            raise ActionError(400, f"{path}.evidence[{i}]: expected {{kind, id}}")
        if item["kind"] not in EVIDENCE_KINDS:
            raise ActionError(400, f"{path}.evidence[{i}].kind: expected one of {', '.join(EVIDENCE_KINDS)}")
        if isinstance(item["id"], bool) or not isinstance(item["id"], (int, str)) or len(str(item["id"])) > 200:
            raise ActionError(400, f"{path}.evidence[{i}].id: expected an id (integer or string)")
        cleaned.append({"kind": item["kind"], "id": item["id"]})
    return text, cleaned
