"""The review of a known week (tests/review/history.py): every figure, the week's UTC edges
included, through the JSON API as a reviewer reads it."""

from __future__ import annotations

import pytest

from incidents.review.report import review
from incidents.review.weeks import Week
from tests.review import history

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded():
    return history.seed()


@pytest.fixture
def figures(seeded):
    return review(Week.parse(history.WEEK), history.NOW)


def ids(rows):
    return [row["id"] for row in rows]


def test_the_week_runs_monday_to_monday_in_utc_and_only_its_incidents_count(seeded, figures):
    assert figures["week"] == "2026-W47"
    assert figures["start"] == "2026-11-16T00:00:00Z" and figures["end"] == "2026-11-23T00:00:00Z"
    assert figures["complete"] is True
    listed = ids(figures["incident_list"])
    assert seeded["c"].pk in listed  # Sunday 23:59:59 UTC
    assert seeded["d"].pk not in listed  # Monday 00:00:00 UTC: the next week's
    assert seeded["earlier"].pk not in listed
    assert figures["incidents"]["count"] == 8 == len(listed)  # the merged-away incident is not one


def test_incidents_by_severity_root_cause_cluster_and_model(figures):
    incidents = figures["incidents"]
    assert incidents["by_severity"] == {"info": 5, "critical": 2, "warning": 1}
    assert incidents["by_failure_mode"] == {"unknown": 6, "kv_fragmentation": 1, "queueing": 1}
    assert incidents["by_layer"] == {"unknown": 6, "engine": 1, "serving": 1}
    assert incidents["by_cluster"] == {"prod-eu": 7, "prod-us": 1}
    assert incidents["by_model"] == {"unknown": 6, "llama-70b": 1, "qwen-7b": 1}


def test_durations_are_medians_and_p90s_from_the_measured_onset(figures):
    durations = figures["incidents"]["durations"]
    # A: red at 09:50, first alert 10:00 (600 s), the seven others detected at their first alert.
    assert durations["detect_s"] == {"median": 0.0, "p90": 180.0, "n": 8}
    assert durations["acknowledge_s"] == {"median": 510.0, "p90": 822.0, "n": 2}  # 900 s and 120 s
    assert durations["mitigate_s"] == {"median": 2400.0, "p90": 2400.0, "n": 1}
    assert durations["resolve_s"] == {"median": 5400.0, "p90": 6840.0, "n": 2}  # 7200 s and 3600 s


def test_a_chain_seen_before_on_the_same_deployment_is_a_repeat(seeded, figures):
    (repeat,) = figures["repeats"]
    assert repeat["id"] == seeded["a"].pk
    assert repeat["seen_before"] == 1 and ids(repeat["earlier"]) == [seeded["earlier"].pk]
    assert repeat["signature_words"] == "kv_fragmentation (engine) → oom (platform)"
    roots = {(r["layer"], r["failure_mode"]): r for r in figures["recurring_roots"]}
    assert roots[("engine", "kv_fragmentation")]["count"] == 1
    assert roots[("engine", "kv_fragmentation")]["root_alerts"] == {"KVCacheFragmentationHigh": 1}
    assert roots[("unknown", "unknown")]["weeks_seen_before"] == 2  # W45 (earlier) and W46 (G, H)


def test_the_warning_waved_off_before_the_oom_is_an_ignored_warning(seeded, figures):
    (ignored,) = figures["ignored_warnings"]  # the other false positive had nothing after it
    assert ignored["alert_id"] == seeded["frag"].pk
    assert ignored["judged_by"] == "ana" and ignored["judged_at"] == "2026-11-16T10:02:00Z"
    assert ignored["incident"]["id"] == seeded["a"].pk
    assert ignored["followed_by"] == "LLMContainerOOMKilled" and ignored["lead_s"] == 1200.0


def test_noisy_rules_and_alerts_without_a_runbook(figures):
    noisy = {row["alertname"]: row for row in figures["noisy_rules"]}
    assert [row["alertname"] for row in figures["noisy_rules"]] == [
        "NoisyThing", "KVCacheFragmentationHigh", "LLMGpuXidError", "TeamLinkedRule",
    ]  # fmt: skip
    assert noisy["NoisyThing"] == {
        "alertname": "NoisyThing", "firings": 3, "in_incident": 0, "in_incident_share": 0.0,
        "never_in_incident": True, "judged_false_positive": 0,
    }  # fmt: skip
    assert noisy["KVCacheFragmentationHigh"]["judged_false_positive"] == 2
    assert "LLMContainerOOMKilled" not in noisy  # always part of a cascade
    bare = [row["alertname"] for row in figures["without_runbook"]]
    assert "NoisyThing" in bare and "KVCacheFragmentationHigh" in bare
    assert "TeamLinkedRule" not in bare  # its own runbook_url
    assert "LLMGpuXidError" not in bare and "LLMContainerOOMKilled" not in bare  # the pack's


def test_remediation_as_of_the_weeks_end(seeded, figures):
    fixes = figures["remediation"]
    assert ids(fixes["due"]) == [seeded["done_late"].pk, seeded["due_open"].pk, seeded["done_on_time"].pk]
    assert ids(fixes["overdue"]) == [seeded["regressed"].pk, seeded["due_open"].pk]
    assert fixes["overdue"][1]["overdue_s"] == 4 * 86400.0
    assert ids(fixes["completed_on_time"]) == [seeded["done_on_time"].pk]
    assert ids(fixes["verified"]) == [seeded["verified"].pk]
    assert ids(fixes["regressed"]) == [seeded["regressed"].pk]


def test_postmortems_due_and_unpublished(seeded, figures):
    postmortems = figures["postmortems"]
    assert [r["incident"]["id"] for r in postmortems["due"]] == [seeded["g"].pk, seeded["h"].pk]
    assert postmortems["due"][0]["postmortem"]["status"] == "draft" and postmortems["due"][1]["published"]
    assert [r["incident"]["id"] for r in postmortems["unpublished"]] == [seeded["g"].pk, seeded["earlier"].pk]
    assert postmortems["unpublished_count"] == 2
    assert postmortems["unpublished"][1]["postmortem"] is None


def test_the_trend_is_the_eight_weeks_before(figures):
    weeks = [row["week"] for row in figures["trend"]]
    assert weeks == [f"2026-W{n}" for n in range(39, 47)]
    counts = {row["week"]: row["incidents"]["count"] for row in figures["trend"]}
    assert counts["2026-W45"] == 1 and counts["2026-W46"] == 2 and counts["2026-W44"] == 0
    # G was resolved an hour after its alert; H has no alert, so no onset to time it from.
    assert figures["trend"][-1]["incidents"]["durations"]["resolve_s"] == {
        "median": 3600.0,
        "p90": 3600.0,
        "n": 1,
    }


def test_without_metrics_the_objectives_say_why(figures):
    assert figures["objectives"] == []
    assert figures["objectives_reason"]


def test_the_trend_counts_repeats_as_the_week_lists_them(seeded, figures):
    later = review(Week.parse(history.WEEK).shifted(1), history.NOW)["trend"]
    assert later[-1]["week"] == history.WEEK and later[-1]["repeats"] == len(figures["repeats"]) == 1
