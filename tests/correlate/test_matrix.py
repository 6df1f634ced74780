"""The suggested root-cause matrix (pure: no Django)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from correlate.catalog import load_catalog
from correlate.matrix import COLUMNS, suggest_matrix
from correlate.series import GREEN, RED, YELLOW, Crossing
from correlate.timeline import ActionFact, AlertFact

CATALOG = load_catalog(use_env=False)
T = datetime(2026, 3, 14, 1, 0, tzinfo=UTC)
RUNBOOK = {"runbook_url": "https://runbooks/x"}


def at(minutes: float) -> datetime:
    return T + timedelta(minutes=minutes)


def march(*, reviewed: str = "false", judged: bool = True, ttft_runbook: bool = False):
    change = AlertFact(
        30,
        "KvCacheFragmented",
        at(10),
        at(10),
        "resolved",
        kind="change",
        layer="process",
        failure_mode="change",
        labels={"change_type": "threshold_edit", "reviewed": reviewed, "verified_in_staging": reviewed},
        annotations={"summary": "prometheus-rules: raise KvCacheFragmented threshold 0.25 -> 0.40"},
        source="events",
    )
    frag = AlertFact(
        2,
        "KvCacheFragmented",
        at(45),
        at(60),
        "resolved",
        layer="engine",
        failure_mode="kv_fragmentation",
        labels={"pod": "p1"},
        annotations={"summary": "fragmentation 43%", **RUNBOOK},
        false_positive=judged,
    )
    ooms = [
        AlertFact(
            4 + i,
            "LLMPodOOMKilled",
            at(60 + 2 * i),
            None,
            layer="platform",
            failure_mode="oom",
            labels={"pod": f"p{i + 1}"},
            annotations=RUNBOOK,
        )
        for i in range(3)
    ]
    ttft = AlertFact(
        14,
        "llm-ttft-p99-slo",
        at(69),
        None,
        layer="serving",
        failure_mode="slo_ttft",
        annotations={"summary": "p99 TTFT 6.5 s", **(RUNBOOK if ttft_runbook else {})},
    )
    reds = [
        Crossing(50 + i, "framebuffer_ratio", at(30 + 3 * i), YELLOW, RED, 0.86, 0.85, {"pod": f"p{i + 1}"})
        for i in range(3)
    ]
    reds.append(Crossing(50, "framebuffer_ratio", at(61), RED, GREEN, 0.01, 0.85, {"pod": "p1"}))
    actions = [ActionFact(3, "false_positive", at(47.3), "oncall", {"alert_id": 2}, 2)] if judged else []
    actions.append(ActionFact(8, "degrade", at(75), "lead", {"level": "L3"}, None))
    return [change, frag, *ooms, ttft], reds, actions


def as_table(rows):
    return {row.layer: {column: row.cell(column) for column in COLUMNS} for row in rows}


def cites(cell, kind, ident=None):
    return any(k == kind and (ident is None or i == ident) for k, i in cell.evidence)


def test_the_march_matrix_carries_the_postmortems_substance_and_every_cell_cites_its_evidence():
    alerts, crossings, actions = march()
    rows = suggest_matrix(
        alerts=alerts, crossings=crossings, actions=actions, catalog=CATALOG, root_alert_id=2
    )
    table = as_table(rows)
    assert list(table) == ["hardware", "engine", "serving", "platform", "process"]
    hardware, engine, process = table["hardware"], table["engine"], table["process"]
    assert "GPU memory exhausted" in hardware["direct_cause"].text and cites(
        hardware["direct_cause"], "threshold", "50:1773451800:red"
    )
    assert "fragmentation" in engine["direct_cause"].text and cites(engine["direct_cause"], "alert", 2)
    assert (
        "no fragmentation reclamation" in engine["system_defect"].text
        and "dynamic block size" in engine["system_defect"].text
    )
    assert cites(engine["system_defect"], "catalog", "defect:kv_fragmentation")
    assert (
        "threshold changed without review" in engine["process_gap"].text
        and "not verified in staging" in engine["process_gap"].text
    )
    assert cites(engine["process_gap"], "change", 30)
    assert "false positive" in process["direct_cause"].text and cites(process["direct_cause"], "action", 3)
    assert "no alert correlation" in process["system_defect"].text and cites(
        process["system_defect"], "threshold"
    )
    assert "before the incident escalated" in process["process_gap"].text and cites(
        process["process_gap"], "action", 3
    )
    assert "runbook" in process["process_gap"].text and cites(process["process_gap"], "alert", 14)
    for row in rows:
        for column in COLUMNS:
            cell = row.cell(column)
            assert bool(cell.text) == bool(cell.evidence), (row.layer, column)
            assert all(
                kind in ("alert", "threshold", "action", "change", "catalog") for kind, _ in cell.evidence
            )


def test_cells_with_nothing_to_cite_stay_empty():
    alerts, crossings, actions = march(reviewed="true", judged=False, ttft_runbook=True)
    table = as_table(
        suggest_matrix(alerts=alerts, crossings=crossings, actions=actions, catalog=CATALOG, root_alert_id=2)
    )
    assert "process" not in table
    assert table["engine"]["process_gap"].text == "" and table["engine"]["process_gap"].evidence == ()
    assert table["hardware"]["process_gap"].text == ""


def test_a_change_after_the_first_alert_is_no_process_gap_and_a_change_root_leads_the_process_row():
    alerts, crossings, actions = march()
    late = [a if a.kind != "change" else AlertFact(**{**a.__dict__, "starts_at": at(50)}) for a in alerts]
    table = as_table(suggest_matrix(alerts=late, crossings=[], actions=[], catalog=CATALOG, root_alert_id=2))
    assert table["engine"]["process_gap"].text == ""
    table = as_table(
        suggest_matrix(alerts=alerts, crossings=[], actions=[], catalog=CATALOG, root_alert_id=30)
    )
    assert "change" in table["process"]["direct_cause"].text and cites(
        table["process"]["direct_cause"], "change", 30
    )
    assert cites(table["process"]["system_defect"], "catalog", "defect:change")


def test_no_evidence_no_matrix():
    assert suggest_matrix(alerts=[], crossings=[], actions=[], catalog=CATALOG) == []


def test_series_timeline_and_matrix_import_nothing_of_django():
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import json, sys\nimport correlate.series, correlate.timeline, correlate.matrix\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'rest_framework', 'incidents', 'rootline'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == []
