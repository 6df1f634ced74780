"""What usually comes next (correlate/forecast.py): places, cascades, history, the rules' fallback."""

from __future__ import annotations

from datetime import timedelta

import pytest

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.forecast import (
    MIN_LIFETIME,
    MIN_SIMILAR,
    TOP,
    History,
    Step,
    cascade,
    place_of,
    predict,
)
from correlate.forecast_replay import Fleet, replay
from correlate.scope import scope_of
from correlate.testing import BASE_DAY, make_alert

CATALOG = load_catalog(use_env=False)
POD = {"namespace": "llm", "pod": "chat-7b9f6d5c4-x2k9p", "deployment": "chat", "model_name": "llama-3-8b"}
SIBLING = {**POD, "pod": "chat-7b9f6d5c4-q8w4z"}


def scope(**labels):
    return scope_of(labels)


def step(mode: str, place: str, at: float, layer: str = "engine") -> Step:
    return Step(layer, mode, place, at)


def kv_cascade(oom_after: float = 600.0, with_slo: bool = True) -> list[Step]:
    steps = [step("kv_fragmentation", "pod", 0), step("oom", "pod", oom_after, "platform")]
    if with_slo:
        steps.append(step("slo_ttft", "route", oom_after + 300, "serving"))
    return steps


def test_places_are_seen_from_the_root():
    root = scope(**POD, node="gpu-node-3")
    assert place_of(root, scope(**POD)) == "pod"
    assert place_of(root, scope(**SIBLING)) == "siblings"
    assert place_of(root, scope(node="gpu-node-3", gpu="0")) == "node"
    assert place_of(root, scope(namespace="llm", model_name="llama-3-8b")) == "route"
    assert (
        place_of(root, scope(namespace="batch", pod="etl-5d8f7c6b9-abcde", deployment="etl")) == "elsewhere"
    )


def test_a_cascade_holds_each_step_once_in_firing_order_without_false_positives():
    alerts = [
        make_alert("VLLMKVCacheFragmentationHigh", "01:00", **POD),
        make_alert("VLLMKVCacheFragmentationHigh", "01:02", **{**POD, "instance": "b"}),
        make_alert("KubePodOOMKilled", "01:10", reason="OOMKilled", **POD),
        make_alert("VLLMTTFTp99High", "01:15", namespace="llm", model_name="llama-3-8b"),
    ]
    (incident,) = correlate(alerts, catalog=CATALOG)
    steps = cascade(incident.members, incident.root.alert_key)
    assert [(s.mode, s.place) for s in steps] == [
        ("kv_fragmentation", "pod"),
        ("oom", "pod"),
        ("slo_ttft", "route"),
    ]
    assert [s.at for s in steps] == [0.0, 600.0, 900.0]
    assert cascade([], None) == ()


def test_history_says_what_followed_how_often_and_how_soon():
    history = History.of(
        [(kv_cascade(oom_after=lag), float(i)) for i, lag in enumerate((300, 600, 900, 1200))]
    )
    history.add([step("kv_fragmentation", "pod", 0), step("preemption", "pod", 60)], 10.0)
    found, similar = predict([step("kv_fragmentation", "pod", 0)], history, CATALOG)
    assert similar == 5
    oom = next(p for p in found if p.mode == "oom")
    assert (oom.source, oom.seen, oom.of, oom.place, oom.layer) == ("history", 4, 5, "pod", "platform")
    assert oom.lag_p50 == 750.0
    assert 900 < oom.lag_p90 <= 1200
    assert found[0].mode == "oom" and found[0].seen >= found[-1].seen


def test_the_latest_step_is_what_the_lags_count_from_and_what_is_seen_is_not_predicted():
    history = History.of([(kv_cascade(oom_after=600), float(i)) for i in range(4)])
    found, _ = predict(
        [step("kv_fragmentation", "pod", 0), step("oom", "pod", 500, "platform")], history, CATALOG
    )
    assert [(p.mode, p.lag_p50, p.after_at) for p in found if p.source == "history"] == [
        ("slo_ttft", 300.0, 500)
    ]
    assert all(p.key != ("oom", "pod") for p in found)


def test_fewer_than_min_similar_past_incidents_fall_back_to_the_rules_and_say_so():
    assert MIN_SIMILAR == 3
    history = History.of([(kv_cascade(), float(i)) for i in range(MIN_SIMILAR - 1)])
    found, similar = predict([step("kv_fragmentation", "pod", 0)], history, CATALOG)
    assert similar == MIN_SIMILAR - 1
    assert found and {p.source for p in found} == {"rules"}
    effects = {rule.effect for rule in CATALOG.rules if rule.cause == "kv_fragmentation"}
    assert {p.mode for p in found} <= effects
    oom = next(p for p in found if p.mode == "oom")
    assert (oom.seen, oom.of) == (MIN_SIMILAR - 1, MIN_SIMILAR - 1)  # the thin history, counted
    rule = next(r for r in CATALOG.rules if r.id == "fragmentation->oom")
    assert oom.lag_p90 == rule.max_lag.total_seconds() and oom.lag_p50 == oom.lag_p90 / 2
    # One more like it and history speaks.
    history.add(kv_cascade(), float(MIN_SIMILAR))
    found, similar = predict([step("kv_fragmentation", "pod", 0)], history, CATALOG)
    assert similar == MIN_SIMILAR and found[0].source == "history"


def test_with_no_history_the_rules_rank_the_nearest_deeper_effect_first_in_its_usual_place():
    found, similar = predict([step("oom", "pod", 0, "platform")], History(), CATALOG, limit=TOP)
    assert similar == 0
    assert [(p.mode, p.place, p.of) for p in found] == [("preemption", "pod", 0), ("restart", "pod", 0),
                                                        ("target_down", "pod", 0)]  # fmt: skip


def test_history_counts_only_incidents_that_had_ended_by_the_moment():
    history = History.of([(kv_cascade(), 100.0 + i) for i in range(4)])
    _, similar = predict([step("kv_fragmentation", "pod", 0)], history, CATALOG, moment=101.5)
    assert similar == 2
    with pytest.raises(ValueError):
        history.add(kv_cascade(), 0.0)


def test_a_prediction_expires_after_its_p90_lag_and_never_before_the_minimum_lifetime():
    history = History.of([(kv_cascade(oom_after=1200, with_slo=False), float(i)) for i in range(3)])
    steps = [step("kv_fragmentation", "pod", 0)]
    live, _ = predict(steps, history, CATALOG, now=1200)
    assert ("oom", "pod") in {p.key for p in live}
    later, _ = predict(steps, history, CATALOG, now=1201)
    assert ("oom", "pod") not in {p.key for p in later if p.source == "history"}
    quick = History.of([(kv_cascade(oom_after=0, with_slo=False), float(i)) for i in range(3)])
    soon, _ = predict(steps, quick, CATALOG, now=MIN_LIFETIME)
    assert ("oom", "pod") in {p.key for p in soon if p.source == "history"}


def test_a_step_round_trips_through_its_stored_form():
    original = Step("platform", "oom", "pod", 612.34, "42")
    assert Step.from_list(original.as_list()) == Step("platform", "oom", "pod", 612.3, "42")


def _story(day_offset: int, name: str) -> Fleet:
    start = BASE_DAY + timedelta(days=day_offset)
    pod = {**POD, "pod": f"chat-7b9f6d5c4-{name}"}
    at = lambda minutes: start + timedelta(minutes=minutes)  # noqa: E731
    end = at(120)
    return Fleet(name, [
        make_alert("VLLMKVCacheFragmentationHigh", at(0), ends_at=end, **pod),
        make_alert("KubePodOOMKilled", at(12), ends_at=end, reason="OOMKilled", **pod),
        make_alert("VLLMTTFTp99High", at(20), ends_at=end, namespace="llm", model_name="llama-3-8b"),
    ])  # fmt: skip


def test_the_replay_scores_each_next_effect_from_what_came_before_it():
    effects = replay([_story(day, f"p{day}abc") for day in range(5)], CATALOG)
    assert len(effects) == 10  # two next effects (OOM, then the SLO) in each of five incidents
    first, last = effects[:2], effects[-2:]
    assert {e.source for e in first} == {"rules"}  # nothing had ended yet
    assert {e.source for e in last} == {"history"} and all(e.hit for e in last)
    oom = next(e for e in last if e.key == ("oom", "pod"))
    assert oom.lead == 12 * 60  # predicted from the fragmentation alert on


def test_what_came_before_the_latest_step_in_history_is_a_cause_not_what_comes_next():
    # In history the fragmentation came first; an incident that begins at the OOM has not shown
    # it, and will not: it is no prediction. The SLO breach that followed the OOM is.
    history = History.of([(kv_cascade(), float(i)) for i in range(MIN_SIMILAR)])
    found, _ = predict([step("oom", "pod", 0, "platform")], history, CATALOG)
    history_found = [p for p in found if p.source == "history"]
    assert [(p.mode, p.seen, p.lag_p50) for p in history_found] == [("slo_ttft", MIN_SIMILAR, 300.0)]


def test_a_pod_no_label_places_is_on_the_node_of_the_fault_it_was_tied_to():
    root = scope(node="gpu-node-3", gpu="0")
    assert place_of(root, scope(namespace="llm", pod="chat-7b9f6d5c4-x2k9p")) == "node"
    assert place_of(scope(**POD), scope(namespace="llm", pod="etl-5d8f7c6b9-abcde")) == "elsewhere"


def test_the_rules_name_the_latest_steps_effects_before_an_earlier_ones():
    steps = [step("gpu_error", "node", 0, "hardware"), step("restart", "pod", 120, "platform")]
    found, _ = predict(steps, History(), CATALOG, limit=TOP)
    restart_effects = {r.effect for r in CATALOG.rules if r.cause == "restart"}
    assert found[0].after == ("restart", "pod") and found[0].mode in restart_effects


def test_what_history_keeps_of_a_shape_of_cascade_gives_the_same_answer_at_another_time():
    history = History.of([(kv_cascade(), float(i)) for i in range(MIN_SIMILAR)])
    early, _ = predict(
        [step("kv_fragmentation", "pod", 0), step("oom", "pod", 100, "platform")], history, CATALOG
    )
    late, _ = predict(
        [step("kv_fragmentation", "pod", 0), step("oom", "pod", 400, "platform")], history, CATALOG
    )
    assert history.memo  # the second asked what the first had read
    assert [p.key for p in early] == [p.key for p in late]
    assert early[0].after_at == 100 and late[0].after_at == 400
    history.memo.clear()
    fresh, _ = predict(
        [step("kv_fragmentation", "pod", 0), step("oom", "pod", 400, "platform")], history, CATALOG
    )
    assert fresh == late
