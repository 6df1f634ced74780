import random
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import fragmentation_chain

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.events import RESOLVED, Alert
from correlate.testing import BASE_DAY, make_alert, make_change

CATALOG = load_catalog(use_env=False)
NAMES = [
    "LLMContainerOOMKilled",
    "LLMKVFragmentationHigh",
    "KubePodCrashLooping",
    "LLMQueueWaitHigh",
    "LLMTTFTp99High",
    "DCGMXidErrors",
    "LLMVllmPreemptionsHigh",
    "TargetDown",
    "SomethingOdd",
    "LLMGateway5xxRate",
    "LLMNaNLogitsDetected",
]
PODS = ["vllm-a-7d9f8b6c5d-x2k4p", "vllm-a-7d9f8b6c5d-q8r7s", "vllm-b-6c5d8f7b9c-zzzzz", "sglang-c-0", ""]


@st.composite
def alert_stream(draw):
    count = draw(st.integers(min_value=1, max_value=18))
    alerts = []
    seen = set()
    for _ in range(count):
        name = draw(st.sampled_from(NAMES))
        minute = draw(st.integers(min_value=0, max_value=240))
        labels = {"cluster": draw(st.sampled_from(["c1", "c2"])), "namespace": "llm"}
        pod = draw(st.sampled_from(PODS))
        if pod:
            labels["pod"] = pod
        if draw(st.booleans()):
            labels["node"] = draw(st.sampled_from(["n1", "n2"]))
        if draw(st.booleans()):
            labels["model_name"] = draw(st.sampled_from(["a", "b"]))
        ends = (
            BASE_DAY + timedelta(minutes=minute + draw(st.integers(1, 40))) if draw(st.booleans()) else None
        )
        alert = make_alert(name, BASE_DAY + timedelta(minutes=minute), ends_at=ends, **labels)
        if alert.key in seen:
            continue  # one occurrence has one end: two draws of it with different ends are no real stream
        seen.add(alert.key)
        alerts.append(alert)
        if ends is not None and draw(st.booleans()):
            firing = Alert(
                alert.fingerprint, alert.starts_at, alert.labels, alert.annotations, None, "firing"
            )
            alerts.append(firing)
    if draw(st.booleans()):
        alerts.append(
            make_change(
                "deploy vllm-a",
                BASE_DAY + timedelta(minutes=draw(st.integers(0, 200))),
                cluster="c1",
                deployment="vllm-a",
            )
        )
    return alerts


def shape(incidents):
    return sorted(
        (
            i.alert_keys,
            i.chain,
            tuple((c.alert_key, c.confidence) for c in i.root_candidates),
            i.edges,
            i.ended_at,
        )
        for i in incidents
    )


def resolved_last(alerts):
    """What the set means: an occurrence's end is known once any notification carried it."""
    merged = {}
    for alert in alerts:
        known = merged.get(alert.key)
        if known is None or (alert.status == RESOLVED and known.status != RESOLVED):
            merged[alert.key] = alert
    return list(merged.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alerts=alert_stream(), data=st.data())
def test_any_arrival_order_gives_the_same_incidents(alerts, data):
    expected = shape(correlate(resolved_last(alerts), catalog=CATALOG))
    arrival = data.draw(st.permutations(alerts))
    correlator = Correlator(CATALOG)
    for alert in arrival:
        correlator.add(alert)
    assert shape(correlator.incidents()) == expected


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_cascade_in_any_order_keeps_its_root(data):
    chain = fragmentation_chain()
    arrival = data.draw(st.permutations(chain))
    correlator = Correlator(CATALOG)
    for alert in arrival:
        correlator.add(alert)
    [incident] = correlator.incidents()
    assert incident.member(incident.root.alert_key).alertname == "LLMKVFragmentationHigh"


@settings(max_examples=60, deadline=None)
@given(alerts=alert_stream(), data=st.data())
def test_batches_of_any_size_agree_with_one_batch(alerts, data):
    expected = shape(correlate(resolved_last(alerts), catalog=CATALOG))
    arrival = data.draw(st.permutations(alerts))
    cut = data.draw(st.integers(0, len(arrival)))
    correlator = Correlator(CATALOG)
    correlator.add_many(arrival[:cut])
    correlator.add_many(arrival[cut:])
    assert shape(correlator.incidents()) == expected


def storm(waves: int, pods: int, start=BASE_DAY) -> list[Alert]:
    """Cascades over many pods of two models at once: every alert inside everyone's horizon."""
    alerts = []
    for wave in range(waves):
        for step, name in enumerate(
            [
                "LLMKVFragmentationHigh",
                "LLMContainerOOMKilled",
                "KubePodCrashLooping",
                "LLMQueueWaitHigh",
                "LLMTTFTp99High",
            ]
        ):
            at = start + timedelta(seconds=wave * 20 + step * 4)
            for number in range(pods):
                model = f"llama-3-8b-{number % 2}"
                labels = {"cluster": "c1", "namespace": "llm", "model_name": model}
                if name != "LLMTTFTp99High":
                    labels.update(pod=f"vllm-{model}-7d9f8b6c5d-{number:05d}", node=f"n{number // 4}")
                alerts.append(make_alert(name, at, **labels))
    return list({a.key: a for a in alerts}.values())


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_a_storm_in_any_batches_agrees_with_one_batch(data):
    alerts = storm(waves=4, pods=24)
    expected = shape(correlate(alerts, catalog=CATALOG))
    arrival = data.draw(st.permutations(alerts))
    correlator = Correlator(CATALOG)
    size = data.draw(st.integers(1, 60))
    for start in range(0, len(arrival), size):
        correlator.add_many(arrival[start : start + size])
    assert shape(correlator.incidents()) == expected


def test_a_storm_records_only_the_edges_ranking_can_use():
    alerts = storm(waves=6, pods=40)
    correlator = Correlator(CATALOG)
    incidents = correlator.add_many(alerts)
    assert max(len(i.members) for i in incidents) > 200
    # Every linking pair recorded would be ~130 edges and ~120 links per alert here.
    recorded = [(len(e.edges), len(e.links)) for e in correlator._entries.values()]
    assert sum(edges for edges, _ in recorded) < 5 * len(alerts)
    assert sum(links for _, links in recorded) < 2 * len(alerts)
    assert all(len(i.chain) == len(i.members) for i in incidents)


def full_answer(incidents):
    return sorted(repr(i) for i in incidents)


def reverse_mode_order(correlator):
    for partition in correlator._partitions.values():
        for index_key, modes in partition.by_mode.items():
            partition.by_mode[index_key] = dict(reversed(modes.items()))


def test_a_scan_gives_the_same_answer_whatever_order_it_reads_the_modes_of_a_wide_bucket():
    # A workload/model bucket is read one failure mode after another, not newest first across
    # modes: what a scan keeps must not depend on that order (edges, chains, explanations too).
    alerts = storm(waves=4, pods=24) + [a for a in fragmentation_chain()]
    arrival = random.Random(11).sample(alerts, len(alerts))
    plain, reversed_modes = Correlator(CATALOG), Correlator(CATALOG)
    for start in range(0, len(arrival), 17):
        plain.add_many(arrival[start : start + 17])
        reverse_mode_order(reversed_modes)
        reversed_modes.add_many(arrival[start : start + 17])
    assert full_answer(reversed_modes.incidents()) == full_answer(plain.incidents())
    assert full_answer(plain.incidents()) == full_answer(correlate(alerts, catalog=CATALOG))


def test_mode_buckets_hold_exactly_the_wide_buckets_after_late_alerts_roll_a_storm_back():
    alerts = storm(waves=4, pods=24)
    arrival = random.Random(12).sample(alerts, len(alerts))
    correlator = Correlator(CATALOG)
    for start in range(0, len(arrival), 23):
        correlator.add_many(arrival[start : start + 23])
        for partition in correlator._partitions.values():
            assert set(partition.by_mode) == {k for k in partition.index if k[0] in ("gw", "dep", "model")}
            for index_key, modes in partition.by_mode.items():
                bucket = partition.index[index_key]
                assert all(modes.values())
                assert (
                    sorted((e for same in modes.values() for e in same), key=lambda e: e.sort_key) == bucket
                )
                assert all(e.mode_id == mode_id for mode_id, same in modes.items() for e in same)


def test_a_scan_reads_an_equal_mode_list_of_another_bucket_once():
    from correlate.partition import _Partition

    a, b, c = object(), object(), object()
    read = {}
    readable = [True, True, False]
    assert _Partition._unread_runs({0: [a, b], 2: [c]}, readable, read) == [[a, b]]
    assert _Partition._unread_runs({0: [a, b], 1: [c]}, readable, read) == [[c]]  # an equal copy is skipped
    assert _Partition._unread_runs({0: [c, b]}, readable, read) == [
        [c, b]
    ]  # same length and newest, other alerts


def kin_root(entry):
    while entry.kin is not entry:
        entry = entry.kin
    return entry


def test_a_mode_list_run_holds_one_component_after_late_alerts_roll_a_storm_back():
    # A scan passes a whole run at once when its component has nothing more to give, so every
    # run recorded must still be one component after unions, rollbacks and replays.
    # Two storms 30 minutes apart on the same models: one mode's list holds two components.
    alerts = storm(waves=3, pods=24) + storm(waves=3, pods=24, start=BASE_DAY + timedelta(minutes=30))
    arrival = random.Random(13).sample(alerts, len(alerts))
    correlator = Correlator(CATALOG)
    longest, mixed = 0, False
    for start in range(0, len(arrival), 29):
        correlator.add_many(arrival[start : start + 29])
        for partition in correlator._partitions.values():
            for modes in partition.by_mode.values():
                for same_mode in modes.values():
                    assert len(same_mode.starts) == len(same_mode)
                    for at, begins in enumerate(same_mode.starts):
                        assert begins <= at
                        assert {id(kin_root(e)) for e in same_mode[begins : at + 1]} == {
                            id(kin_root(same_mode[at]))
                        }
                        longest = max(longest, at - begins + 1)
                    mixed = mixed or len({id(kin_root(e)) for e in same_mode}) > 1
    assert longest > 20 and mixed
