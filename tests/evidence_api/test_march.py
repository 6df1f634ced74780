"""The March incident (DOMAIN.md) rebuilt from the simulator's files alone: alerts and changes
through `import_alerts`, actions through `import_actions`, metrics as stored evidence. T = 01:00."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from incidents.timeline import incident_durations, incident_evidence, incident_matrix, incident_timeline
from tests.evidence_api.march import metrics_importable, replay, simulate, store_evidence_from_om

pytestmark = pytest.mark.django_db
T = datetime(2026, 3, 14, 1, 0, tzinfo=UTC)


def minutes(item_or_time) -> float:
    moment = item_or_time["at"] if isinstance(item_or_time, dict) else item_or_time
    return (moment - T).total_seconds() / 60


def check_march(incident, *, slack: float) -> None:
    """The five facts of the March timeline and the substance of its matrix, each cell citing
    evidence that exists. `slack`: minutes another seed may move the story's times by."""
    items = incident_timeline(incident)
    change = [i for i in items if i["kind"] == "change"]
    assert len(change) == 1 and abs(minutes(change[0]) - 10) <= slack and "threshold" in change[0]["title"]
    memory = [
        i
        for i in items
        if i["kind"] == "threshold" and i["signal"] == "framebuffer_ratio" and i["band"] == "red"
    ]
    assert memory and abs(minutes(memory[0]) - 30) <= 1.5 + slack and memory[0]["value"] >= 0.85
    assert memory[0]["layer"] == "hardware" and memory[0]["source"] == "metrics"
    frag = [
        i
        for i in items
        if i["kind"] == "alert_fired"
        and i["layer"] == "engine"
        and "frag" in (i["title"] + i["detail"]).lower()
    ]
    assert frag and abs(minutes(frag[0]) - 45) <= 1 + slack
    judged = [i for i in items if i.get("action") == "false_positive"]
    assert judged and judged[0]["alert_id"] and abs(minutes(judged[0]) - 47) <= 1 + slack
    ooms = [
        i
        for i in items
        if i["kind"] == "alert_fired" and i["layer"] == "platform" and "oom" in i["title"].lower()
    ]
    assert len(ooms) >= 3 and abs(minutes(ooms[0]) - 60) <= 1.5 + slack
    degrade = [i for i in items if i.get("action") == "degrade"]
    assert degrade and "L3" in degrade[0]["title"] and abs(minutes(degrade[0]) - 75) <= slack
    assert [i["at"] for i in items] == sorted(i["at"] for i in items)

    evidence = incident_evidence(incident)
    known = {("alert", a.id) for a in evidence.alerts if a.kind != "change"} | {
        ("change", a.id) for a in evidence.alerts if a.kind == "change"
    }
    known |= {("threshold", c.id) for c in evidence.crossings} | {("action", a.id) for a in evidence.actions}
    rows = {row["layer"]: row for row in incident_matrix(incident)}
    assert {"hardware", "engine", "process"} <= set(rows)
    for row in rows.values():
        for column in ("direct_cause", "system_defect", "process_gap"):
            cell = row[column]
            assert bool(cell["text"]) == bool(cell["evidence"]), (row["layer"], column)
            for ref in cell["evidence"]:
                assert ref["kind"] == "catalog" or (ref["kind"], ref["id"]) in known, ref
    assert "GPU memory exhausted" in rows["hardware"]["direct_cause"]["text"]
    assert "fragmentation" in rows["engine"]["direct_cause"]["text"].lower()
    defects = " ".join(row["system_defect"]["text"] for row in rows.values())
    assert (
        "no fragmentation reclamation" in defects
        and "dynamic block size" in defects
        and "no alert correlation" in defects
    )
    gaps = " ".join(row["process_gap"]["text"] for row in rows.values())
    assert "threshold changed without review" in gaps and "not verified in staging" in gaps
    assert "before the incident escalated" in gaps and "runbook" in gaps
    assert "false positive" in rows["process"]["direct_cause"]["text"]
    assert any(ref["kind"] == "change" for ref in rows["engine"]["process_gap"]["evidence"])

    durations = incident_durations(incident)
    first_alert = min(i["at"] for i in items if i["kind"] == "alert_fired")
    first_red = min(i["at"] for i in items if i["kind"] == "threshold" and i["band"] == "red")
    assert first_red < first_alert and durations["detect_s"] == round(
        (first_alert - first_red).total_seconds(), 3
    )


@pytest.mark.parametrize("seed, slack", [(1, 0), (7, 3)])
def test_march_timeline_and_matrix_rebuilt_from_the_files(
    tmp_path, make_integration, django_capture_on_commit_callbacks, seed, slack
):
    folder = simulate(tmp_path, seed)
    incident = replay(folder, make_integration, django_capture_on_commit_callbacks, metrics=False)
    assert store_evidence_from_om(incident, folder / "metrics.om") >= 6
    check_march(incident, slack=slack)


@pytest.mark.skipif(
    not metrics_importable(),
    reason="needs `manage.py import_metrics` and incidents.services.evidence.evidence_collect "
    "(the evidence helper's work)",
)
def test_march_rebuilt_through_import_metrics_and_evidence_collection(
    tmp_path, make_integration, django_capture_on_commit_callbacks
):
    folder = simulate(tmp_path, 1)
    incident = replay(folder, make_integration, django_capture_on_commit_callbacks, metrics=True)
    check_march(incident, slack=0)


def test_the_march_timeline_without_metrics_still_holds_the_alerts_actions_and_change(
    tmp_path, make_integration, django_capture_on_commit_callbacks
):
    incident = replay(
        simulate(tmp_path, 1), make_integration, django_capture_on_commit_callbacks, metrics=False
    )
    kinds = [i["kind"] for i in incident_timeline(incident)]
    assert "threshold" not in kinds and {"change", "alert_fired", "action", "note"} <= set(kinds)
    assert "hardware" not in {row["layer"] for row in incident_matrix(incident)}
    assert incident_durations(incident)["detect_s"] == 0.0
