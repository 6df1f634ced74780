"""The suggested root-cause matrix: one row per layer the incident touched, three columns
(direct cause, system defect, process gap), each cell citing what it rests on.

Nothing is guessed: a cell with no alert, crossing, action or change to cite stays empty. The
facts read are the timeline's: alerts by layer and mode, red crossings by band, judgements
made by people, and changes with their review and staging flags.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from correlate import matrix_texts as texts
from correlate.catalog import MATRIX_COLUMNS, Catalog
from correlate.series import RED, Crossing
from correlate.timeline import BAND_LAYERS, ActionFact, AlertFact

COLUMNS = MATRIX_COLUMNS
UNREVIEWED_TEXT = re.compile(r"no review|without review|unreviewed|not reviewed", re.IGNORECASE)


@dataclass(frozen=True)
class Cell:
    text: str = ""
    evidence: tuple[tuple[str, str | int], ...] = ()

    def as_dict(self) -> dict:
        return {"text": self.text, "evidence": [{"kind": k, "id": i} for k, i in self.evidence]}


@dataclass(frozen=True)
class Row:
    layer: str
    direct_cause: Cell = Cell()
    system_defect: Cell = Cell()
    process_gap: Cell = Cell()

    def cell(self, column: str) -> Cell:
        return getattr(self, column)


@dataclass
class _Draft:
    parts: dict[str, list[tuple[str, list[tuple[str, str | int]]]]] = field(
        default_factory=lambda: {c: [] for c in COLUMNS}
    )

    def add(self, column: str, text: str, evidence: Iterable[tuple[str, str | int]]) -> None:
        cited = list(dict.fromkeys(evidence))
        if text and cited:
            self.parts[column].append((text, cited))

    def cell(self, column: str) -> Cell:
        parts = self.parts[column]
        if not parts:
            return Cell()
        text = "; ".join(dict.fromkeys(t for t, _ in parts))
        evidence = tuple(dict.fromkeys(e for _, cited in parts for e in cited))
        return Cell(text, evidence)


def band_title(title: str) -> str:
    """The catalog's band title without its parenthesised note."""
    return title.split(" (")[0]


def _hm(moment: datetime) -> str:
    return moment.strftime("%H:%M")


def _names(alerts: Sequence[AlertFact], limit: int = 3) -> str:
    wheres = list(dict.fromkeys(a.where for a in alerts if a.where))
    name = ", ".join(dict.fromkeys(a.alertname for a in alerts))
    if not wheres:
        return name
    shown = ", ".join(wheres[:limit]) + (f" and {len(wheres) - limit} more" if len(wheres) > limit else "")
    return f"{name} on {shown}"


def _falsy(labels: Mapping[str, str], keys: Sequence[str]) -> bool:
    return any(str(labels[k]).strip().lower() in texts.FALSY for k in keys if k in labels)


def suggest_matrix(
    *,
    alerts: Sequence[AlertFact],
    crossings: Sequence[Crossing],
    actions: Sequence[ActionFact],
    catalog: Catalog,
    root_alert_id: int | None = None,
) -> list[Row]:
    fired = sorted((a for a in alerts if a.kind != "change"), key=lambda a: (a.starts_at, a.id))
    changes = sorted((a for a in alerts if a.kind == "change"), key=lambda a: (a.starts_at, a.id))
    reds = [c for c in crossings if c.to == RED and c.worse]
    first_alert_at = fired[0].starts_at if fired else None
    root = next((a for a in alerts if a.id == root_alert_id), None)
    drafts: dict[str, _Draft] = {}

    def draft(layer: str) -> _Draft:
        return drafts.setdefault(layer, _Draft())

    by_layer: dict[str, list[AlertFact]] = {}
    for alert in fired:
        by_layer.setdefault(alert.layer or "unknown", []).append(alert)
    reds_by_layer: dict[str, list[Crossing]] = {}
    for crossing in reds:
        reds_by_layer.setdefault(BAND_LAYERS.get(crossing.signal, "unknown"), []).append(crossing)

    for layer in set(by_layer) | set(reds_by_layer):
        if layer == "process":
            continue
        _layer_causes(draft(layer), by_layer.get(layer, []), reds_by_layer.get(layer, []), catalog, root)

    _change_gaps(drafts, changes, fired, first_alert_at, catalog, draft)
    _judgement_rows(draft, fired, reds, actions, root)
    missing = [a for a in fired if not a.has_runbook]
    if missing:
        draft("process").add(
            "process_gap",
            "runbook did not cover the scenario: no runbook for "
            f"{', '.join(dict.fromkeys(a.alertname for a in missing))}",
            [("alert", a.id) for a in missing],
        )

    order = {layer: index for index, layer in enumerate(catalog.layers)}
    rows = []
    for layer in sorted(drafts, key=lambda name: (order.get(name, len(order)), name)):
        d = drafts[layer]
        row = Row(layer, *(d.cell(column) for column in COLUMNS))
        if any(row.cell(column).text for column in COLUMNS):
            rows.append(row)
    return rows


def _layer_causes(
    d: _Draft, alerts: list[AlertFact], reds: list[Crossing], catalog: Catalog, root: AlertFact | None
) -> None:
    first_red: dict[str, Crossing] = {}
    for crossing in reds:
        first_red.setdefault(crossing.signal, crossing)
    for signal, first in first_red.items():
        same = [c for c in reds if c.signal == signal]
        wheres = list(
            dict.fromkeys(
                w
                for c in same
                for w in [c.labels.get("pod") or c.labels.get("Hostname") or c.labels.get("gpu") or ""]
                if w
            )
        )
        phrase = texts.BAND_DIRECT.get(signal, f"{signal.replace('_', ' ')} in the red")
        band = catalog.bands.get(signal)
        title = band_title(band.title if band else signal.replace("_", " "))
        text = f"{phrase}: {title} crossed {first.line:g} at {_hm(first.at)}" + (
            f" on {len(wheres)} series" if len(wheres) > 1 else ""
        )
        cited = [("threshold", c.id) for c in same]
        d.add("direct_cause", text, cited)
    primary_mode = None
    if alerts:
        in_layer_root = root if root and root in alerts else None
        primary = in_layer_root or alerts[0]
        primary_mode = primary.failure_mode or "other"
        same_mode = [a for a in alerts if a.failure_mode == primary.failure_mode]
        mode_label = catalog.modes[primary_mode].label if primary_mode in catalog.modes else primary_mode
        text = (
            f"{texts.DIRECT.get(primary_mode, mode_label)} "
            f"({_names(same_mode)}, from {_hm(same_mode[0].starts_at)})"
        )
        d.add("direct_cause", text, [("alert", a.id) for a in same_mode])
        if primary_mode in texts.DEFECT:
            d.add(
                "system_defect",
                texts.DEFECT[primary_mode],
                [("catalog", f"defect:{primary_mode}"), *(("alert", a.id) for a in same_mode)],
            )
    elif first_red:
        signal = next(iter(first_red))
        mode = texts.BAND_MODES.get(signal)
        if mode in texts.DEFECT:
            d.add(
                "system_defect",
                texts.DEFECT[mode],
                [("catalog", f"defect:{mode}"), ("threshold", first_red[signal].id)],
            )


def _change_text(change: AlertFact) -> str:
    return " ".join([change.alertname, change.summary, *(f"{k} {v}" for k, v in change.labels.items())])


def _change_gaps(
    drafts: dict[str, _Draft],
    changes: list[AlertFact],
    fired: list[AlertFact],
    first_alert_at: datetime | None,
    catalog: Catalog,
    draft: Callable[[str], _Draft],
) -> None:
    """Unreviewed threshold edits and changes not verified in staging, made before the first alert,
    go to the row of the layer whose alerts the edited rule raises (else the process row)."""
    for change in changes:
        if first_alert_at is not None and change.starts_at > first_alert_at:
            continue
        text = _change_text(change)
        unreviewed = _falsy(change.labels, texts.REVIEW_KEYS) or bool(UNREVIEWED_TEXT.search(change.summary))
        rule_edit = catalog.changes is not None and catalog.changes.kind_of(text) == "rule_edit"
        target = next((a.layer for a in fired if a.alertname == change.alertname and a.layer), None)
        layer = target if target and target != "unknown" else "process"
        what = change.summary or change.alertname
        if unreviewed:
            gap = "alert threshold changed without review" if rule_edit else "change shipped without review"
            draft(layer).add(
                "process_gap", f"{gap} ({what}, {_hm(change.starts_at)})", [("change", change.id)]
            )
        if _falsy(change.labels, texts.STAGING_KEYS):
            draft(layer).add("process_gap", "change not verified in staging", [("change", change.id)])


def _judgement_rows(
    draft: Callable[[str], _Draft],
    fired: list[AlertFact],
    reds: list[Crossing],
    actions: Sequence[ActionFact],
    root: AlertFact | None,
) -> None:
    """A false-positive judgement before the incident escalated is a process gap (and, in the
    process row, the direct cause: the warning was there); made while related evidence was red,
    it shows the missing alert correlation."""
    by_id = {a.id: a for a in fired}
    if root is not None and root.kind == "change":
        draft("process").add(
            "direct_cause",
            f"change: {root.summary or root.alertname} ({_hm(root.starts_at)})",
            [("change", root.id)],
        )
        draft("process").add(
            "system_defect", texts.DEFECT["change"], [("catalog", "defect:change"), ("change", root.id)]
        )
    for action in actions:
        if action.action != "false_positive" or action.alert_id not in by_id:
            continue
        judged = by_id[action.alert_id]
        later = [a for a in fired if a.starts_at > action.at and a.id != judged.id]
        escalation = later[0] if later else None
        who = action.by or "on-call"
        if escalation is not None:
            draft("process").add(
                "direct_cause",
                f"{who} judged {judged.alertname} a false positive at {_hm(action.at)}; "
                f"{escalation.alertname} followed at {_hm(escalation.starts_at)}",
                [("action", action.id), ("alert", judged.id), ("alert", escalation.id)],
            )
            draft("process").add(
                "process_gap",
                "alert judged false positive before the incident escalated "
                f"({judged.alertname}, {_hm(action.at)})",
                [("action", action.id), ("alert", judged.id)],
            )
        red_before = [c for c in reds if c.at <= action.at]
        if red_before:
            draft("process").add(
                "system_defect",
                texts.NO_CORRELATION,
                [("action", action.id), ("alert", judged.id), *(("threshold", c.id) for c in red_before)],
            )
