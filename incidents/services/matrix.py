"""The root-cause matrix as people edit it: each edited cell is a new `MatrixCell` row (the old
ones stay as history); reading it is `incidents/timeline.py` (`incident_matrix`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from correlate.matrix import COLUMNS
from incidents.catalog import catalog
from incidents.models import Incident, MatrixCell
from incidents.services.audit import audit_record
from incidents.services.errors import invalid
from incidents.services.roles import require_role
from incidents.timeline import EVIDENCE_KINDS, incident_matrix

MAX_CELL_TEXT = 5_000
MAX_EVIDENCE = 200


def matrix_edit(*, incident: Incident, user: User, via: str, body: Any) -> list[dict[str, Any]]:
    """PATCH: `{layer, <column>: {text, evidence?} | text}` or a list of them. Each edited cell is a
    new row (the old ones stay as history), with its audit record; evidence left out is carried
    over from the cell as it stood, suggested or edited."""
    require_role(user, "author")
    rows = body if isinstance(body, list) else [body]
    if not rows or not all(isinstance(row, dict) for row in rows):
        raise invalid(
            "body: expected a row {layer, direct_cause|system_defect|process_gap: {text, evidence}} "
            "or a list of rows"
        )
    layers = catalog().layers
    current = {row["layer"]: row for row in incident_matrix(incident)}
    edits: list[tuple[MatrixCell, str]] = []
    for index, row in enumerate(rows):
        where = f"[{index}]" if isinstance(body, list) else ""
        layer = row.get("layer")
        if layer not in layers:
            raise invalid(f"{where}layer: expected one of {', '.join(layers)}, got {str(layer)[:40]!r}")
        unknown = set(row) - {"layer", *COLUMNS}
        if unknown:
            raise invalid(
                f"{where}{sorted(unknown)[0]}: unknown field; a row has layer, {', '.join(COLUMNS)}"
            )
        if not set(row) & set(COLUMNS):
            raise invalid(f"{where}: nothing to edit; give at least one of {', '.join(COLUMNS)}")
        for column in COLUMNS:
            if column not in row:
                continue
            text, evidence = _cell_value(row[column], f"{where}{column}")
            if evidence is None:
                evidence = current.get(layer, {}).get(column, {}).get("evidence", [])
            was = current.get(layer, {}).get(column, {}).get("text", "")
            edits.append(
                (
                    MatrixCell(
                        incident=incident,
                        layer=layer,
                        column=column,
                        text=text,
                        evidence=evidence,
                        edited_by=user if user.pk else None,
                    ),
                    was,
                )
            )
    with transaction.atomic():
        for cell, was in edits:
            cell.save()
            audit_record(
                by=user,
                via=via,
                target=incident,
                action="matrix_edit",
                field=f"matrix.{cell.layer}.{cell.column}",
                old=was,
                new=cell.text,
                detail={"evidence": cell.evidence},
            )
    return incident_matrix(incident)


def _cell_value(value: Any, path: str) -> tuple[str, list[dict[str, Any]] | None]:
    if isinstance(value, str):
        value = {"text": value}
    if not isinstance(value, dict):
        raise invalid(f"{path}: expected {{text, evidence}} or a string")
    unknown = set(value) - {"text", "evidence", "edited_by"}
    if unknown:
        raise invalid(f"{path}.{sorted(unknown)[0]}: unknown field; a cell has text and evidence")
    text = value.get("text")
    if not isinstance(text, str) or len(text) > MAX_CELL_TEXT or "\x00" in text:
        raise invalid(f"{path}.text: expected a string of at most {MAX_CELL_TEXT} characters, without NUL")
    if "evidence" not in value:
        return text, None
    evidence = value["evidence"]
    if not isinstance(evidence, list) or len(evidence) > MAX_EVIDENCE:
        raise invalid(f"{path}.evidence: expected a list of at most {MAX_EVIDENCE} {{kind, id}}")
    cleaned = []
    for i, item in enumerate(evidence):
        if not isinstance(item, dict) or set(item) != {"kind", "id"}:
            raise invalid(f"{path}.evidence[{i}]: expected {{kind, id}}")
        if item["kind"] not in EVIDENCE_KINDS:
            raise invalid(f"{path}.evidence[{i}].kind: expected one of {', '.join(EVIDENCE_KINDS)}")
        if (
            isinstance(item["id"], bool)
            or not isinstance(item["id"], (int, str))
            or len(str(item["id"])) > 200
        ):
            raise invalid(f"{path}.evidence[{i}].id: expected an id (integer or string)")
        cleaned.append({"kind": item["kind"], "id": item["id"]})
    return text, cleaned
