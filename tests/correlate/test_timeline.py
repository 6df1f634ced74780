"""The timeline builder and durations (pure: no Django)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from correlate.catalog import load_catalog
from correlate.series import GREEN, RED, YELLOW, Crossing
from correlate.timeline import ActionFact, AlertFact, build_timeline, durations

BANDS = load_catalog(use_env=False).bands
T = datetime(2026, 3, 14, 1, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T + timedelta(minutes=minutes)


def facts():
    change = AlertFact(
        30,
        "KvCacheFragmented",
        at(10),
        at(10),
        "resolved",
        kind="change",
        layer="process",
        failure_mode="change",
        labels={"change_type": "threshold_edit", "reviewed": "false"},
        annotations={"summary": "raise KvCacheFragmented threshold 0.25 -> 0.40"},
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
        annotations={"summary": "fragmentation 43%", "runbook_url": "https://r/x"},
        false_positive=True,
    )
    oom = AlertFact(
        4,
        "LLMPodOOMKilled",
        at(60),
        None,
        "firing",
        layer="platform",
        failure_mode="oom",
        labels={"pod": "p1"},
    )
    red = Crossing(5, "framebuffer_ratio", at(30), YELLOW, RED, 0.851, 0.85, {"pod": "p1"})
    back = Crossing(5, "framebuffer_ratio", at(61), RED, GREEN, 0.01, 0.85, {"pod": "p1"})
    actions = [
        ActionFact(1, "acknowledge", at(46), "oncall", {}, 2),
        ActionFact(2, "note", at(47), "oncall", {"text": "looks like noise"}, None),
        ActionFact(3, "false_positive", at(47.3), "oncall", {"alert_id": 2}, 2),
        ActionFact(4, "degrade", at(75), "lead", {"level": "L3"}, None),
        ActionFact(5, "merge", at(76), "lead", {"into": 9}, None),
        ActionFact(6, "refresh_evidence", at(77), "lead", {}, None),
    ]
    return [change, frag, oom], [red, back], actions


def test_timeline_merges_changes_crossings_alerts_and_actions_in_time_order_each_with_its_source():
    alerts, crossings, actions = facts()
    items = build_timeline(alerts=alerts, crossings=crossings, actions=actions, bands=BANDS)
    assert [i.at for i in items] == sorted(i.at for i in items)
    kinds = [(round((i.at - T).total_seconds() / 60, 1), i.kind) for i in items]
    assert kinds == [
        (10, "change"),
        (30, "threshold"),
        (45, "alert_fired"),
        (46, "action"),
        (47, "note"),
        (47.3, "action"),
        (60, "alert_fired"),
        (60, "alert_resolved"),
        (61, "threshold"),
        (75, "action"),
        (76, "action"),
    ]
    assert {i.kind: i.source for i in items} == {
        "change": "events",
        "threshold": "metrics",
        "alert_fired": "alertmanager",
        "alert_resolved": "alertmanager",
        "action": "people",
        "note": "people",
    }
    threshold = items[1].as_dict()
    assert (
        threshold["signal"] == "framebuffer_ratio"
        and threshold["band"] == RED
        and threshold["value"] == 0.851
    )
    assert threshold["layer"] == "hardware" and "85.1%" in threshold["title"] and "p1" in threshold["detail"]
    judged = items[5].as_dict()
    assert judged["action"] == "false_positive" and judged["by"] == "oncall" and judged["alert_id"] == 2
    assert "KvCacheFragmented" in judged["title"] and "false positive" in judged["title"]
    assert "L3" in items[9].title and "#9" in items[10].title
    assert set(items[2].as_dict()) == {"at", "kind", "layer", "title", "detail", "source"}
    assert "judged false positive" in items[2].detail


def test_detection_runs_from_the_first_red_crossing_when_it_precedes_the_first_alert():
    alerts, crossings, _ = facts()
    result = durations(
        alerts=alerts, crossings=crossings, acknowledged_at=at(46), mitigated_at=at(88), resolved_at=at(112)
    )
    assert result.onset == at(30) and result.detected_at == at(45)
    assert result.as_dict() == {
        "detect_s": 900.0,
        "acknowledge_s": 960.0,
        "mitigate_s": 3480.0,
        "resolve_s": 4920.0,
    }


def test_detection_is_zero_when_the_alert_came_first_and_changes_are_not_detections():
    alerts, crossings, _ = facts()
    late_red = [Crossing(5, "framebuffer_ratio", at(50), YELLOW, RED, 0.9, 0.85)]
    result = durations(
        alerts=alerts, crossings=late_red, acknowledged_at=None, mitigated_at=None, resolved_at=None
    )
    assert result.onset == at(45) and result.detect_s == 0.0 and result.acknowledge_s is None
    yellow_only = [Crossing(5, "framebuffer_ratio", at(20), GREEN, YELLOW, 0.75, 0.7)]
    assert (
        durations(
            alerts=alerts, crossings=yellow_only, acknowledged_at=None, mitigated_at=None, resolved_at=None
        ).detect_s
        == 0.0
    )
    none = durations(
        alerts=[alerts[0]], crossings=[], acknowledged_at=None, mitigated_at=None, resolved_at=None
    )
    assert none.detect_s is None and none.onset is None


def test_every_action_reads_as_a_sentence():
    alerts, _, _ = facts()
    cases = {
        "acknowledge": "oncall acknowledged",
        "mitigate": "oncall mitigated",
        "resolve": "oncall resolved",
        "reopen": "oncall reopened",
        "exclude_alert": "oncall excluded KvCacheFragmented from the incident",
        "assign": "oncall assigned lead",
        "severity": "oncall set severity critical",
        "split": "oncall split off 2 alert(s)",
    }
    bodies = {
        "assign": {"username": "lead"},
        "severity": {"level": "critical"},
        "split": {"alert_ids": [2, 4]},
    }
    actions = [
        ActionFact(
            i, name, at(50 + i), "oncall", bodies.get(name, {}), 2 if name == "exclude_alert" else None
        )
        for i, name in enumerate(cases)
    ]
    items = build_timeline(alerts=alerts, crossings=[], actions=actions, bands=BANDS)
    titles = {i.action: i.title for i in items if i.kind == "action"}
    assert titles == cases
