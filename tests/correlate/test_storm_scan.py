"""The scan passes a same-component run of a workload's mode list also when the new alert can be
the cause of older alerts (within the onset slack), stopping only at alerts with no kept incoming
edge: those must still get their edge, or they would turn into sources and ranking would change.

Measured on `bench/correlate/bench_peer_storm.py` (six linked modes over one workload's pods):
the scan's cost per alert grew with the storm before (bench/results/history.md)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.events import FIRING, Alert, occurrence_key
from correlate.partition import _Partition
from correlate.testing import label_fingerprint

CATALOG = load_catalog(use_env=False)
START = datetime(2026, 3, 14, 12, tzinfo=UTC)


def alert(name: str, pod: int, seconds: float) -> Alert:
    labels = {
        "alertname": name,
        "cluster": "c1",
        "namespace": "llm",
        "pod": f"vllm-big-7d9f8b6c5d-{pod:05d}",
        "model_name": "big",
    }
    return Alert(label_fingerprint(labels), START + timedelta(seconds=seconds), labels, {}, None, FIRING, "")


def key(a: Alert) -> str:
    return occurrence_key(a.fingerprint, a.starts_at)


def test_an_alert_with_no_cause_inside_a_passed_run_still_gets_the_edge_from_its_cause():
    # Queue alerts on 41 pods of one workload form one component (one run of its mode list). The
    # oldest has no cause; each of the others has one (KV fragmentation on its own pod). An OOM
    # that starts within the onset slack after all of them can be the cause of each: the first
    # one it meets takes its edge, the rest of the run is passed, but not the one with no cause.
    source = alert("LLMQueueWaitHigh", 0, 0)
    fragmented = [alert("LLMKVFragmentationHigh", pod, 1 + pod / 2) for pod in range(1, 41)]
    queued = [alert("LLMQueueWaitHigh", pod, 30 + pod / 2) for pod in range(1, 41)]
    oom = alert("LLMContainerOOMKilled", 99, 90)
    alerts = [source, *fragmented, *queued, oom]
    [incident] = correlate(alerts, catalog=CATALOG)
    causes = {}
    for edge in incident.edges:
        causes.setdefault(edge.effect, []).append((edge.cause, edge.rule))
    assert causes[key(source)] == [(key(oom), "oom->queueing")]
    assert all(
        causes[key(q)] == [(key(f), "fragmentation->queueing")]
        for f, q in zip(fragmented, queued, strict=True)
    )
    for order in (alerts, list(reversed(alerts)), random.Random(1).sample(alerts, len(alerts))):
        correlator = Correlator(CATALOG)
        for number in range(0, len(order), 9):
            correlator.add_many(order[number : number + 9])
        assert repr(correlator.incidents()) == repr([incident])


def test_every_mode_list_alert_with_no_kept_incoming_edge_is_listed_after_late_alerts_roll_a_storm_back():
    names = [
        "LLMQueueWaitHigh",
        "LLMKVFragmentationHigh",
        "LLMContainerOOMKilled",
        "GPUMemoryHigh",
        "LLMTTFTp99High",
    ]
    rng = random.Random(5)
    alerts = [alert(rng.choice(names), pod, rng.uniform(0, 240)) for pod in range(300)]
    arrival = rng.sample(alerts, len(alerts))
    correlator = Correlator(CATALOG)
    unkept = 0
    for start in range(0, len(arrival), 31):
        correlator.add_many(arrival[start : start + 31])
        for partition in correlator._partitions.values():
            for modes in partition.by_mode.values():
                for same_mode in modes.values():
                    sources = same_mode.sources
                    assert sources == sorted(set(sources)) and all(0 <= at < len(same_mode) for at in sources)
                    listed = set(sources)
                    for at, entry in enumerate(same_mode):
                        if not entry.incoming:
                            assert at in listed
                            unkept += 1
    assert unkept and repr(correlator.incidents()) == repr(correlate(alerts, catalog=CATALOG))


class AlwaysMixed(dict):
    """A partition's pod-bucket node labels as if every pod bucket held alerts of several nodes:
    the scan then reads each pod bucket, as it did before it passed those inside a node's bucket."""

    def __getitem__(self, key):
        return ""


def placed_alert(name: str, pod: int, node: str, seconds: float) -> Alert:
    labels = {
        "alertname": name,
        "cluster": "c1",
        "namespace": "llm",
        "pod": f"vllm-big-7d9f8b6c5d-{pod:05d}",
        "model_name": "big",
    }
    if node:
        labels["node"] = node
    return Alert(label_fingerprint(labels), START + timedelta(seconds=seconds), labels, {}, None, FIRING, "")


def test_passing_pod_buckets_inside_a_node_bucket_changes_no_incident(monkeypatch):
    # Pods that moved (their alerts carry two node labels) or whose alerts carry none: their
    # buckets are not inside one node's, and must be read (a flag kept from the latest alert's
    # node alone fails here).

    names = [
        "LLMKVFragmentationHigh",
        "LLMKVCachePoolUtilizationHigh",
        "LLMContainerOOMKilled",
        "KubePodCrashLooping",
        "LLMQueueWaitHigh",
        "GPUMemoryHigh",
        "LLMVllmPreemptionsHigh",
    ]
    rng = random.Random(11)
    alerts = []
    for pod in range(60):
        nodes = [
            f"gpu-node-{pod // 4}",
            f"gpu-node-{rng.randrange(20)}",
            "",
        ]  # its node, where it moved, none
        for _ in range(rng.randrange(1, 6)):
            alerts.append(placed_alert(rng.choice(names), pod, rng.choice(nodes), rng.uniform(0, 300)))
    arrival = rng.sample(alerts, len(alerts))

    def incremental() -> str:
        correlator = Correlator(CATALOG)
        for start in range(0, len(arrival), 17):
            correlator.add_many(arrival[start : start + 17])
        return repr(correlator.incidents())

    passing = (repr(correlate(alerts, catalog=CATALOG)), incremental())
    init = _Partition.__init__

    def reading_every_pod_bucket(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.pod_node = AlwaysMixed()

    monkeypatch.setattr(_Partition, "__init__", reading_every_pod_bucket)
    reading = (repr(correlate(alerts, catalog=CATALOG)), incremental())
    assert passing == reading
    assert passing[0] == passing[1]
