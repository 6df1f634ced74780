"""A late alert's replay links again only the alerts it can change; the rest repeat what they did.

Rolling a cluster back to a late alert used to link every alert after it again, though most sit on
other workloads and would link exactly as before (on the 100k-alert day a late add replayed ~59
alerts). `_Replay` sends an alert through linking again only when its buckets or its changes hold
an alert of a group that a re-linked alert is in (now, or before the rollback); these tests feed
the same streams with and without that shortcut and require every answer to be identical.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from correlate import rewind
from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.events import FIRING, RESOLVED, Alert
from correlate.partition import _Partition
from correlate.results import Exclude
from correlate.rewind import _Replay
from correlate.testing import BASE_DAY, label_fingerprint, make_change

CATALOG = load_catalog(use_env=False)
NAMES = [
    "LLMKVFragmentationHigh",
    "LLMKVCachePoolUtilizationHigh",
    "LLMContainerOOMKilled",
    "KubePodCrashLooping",
    "LLMQueueWaitHigh",
    "LLMTTFTp99High",
    "DCGMXidErrors",
    "TargetDown",
    "LLMVllmPreemptionsHigh",
    "GPUMemoryHigh",
]


def day(seed: int, size: int = 320) -> list[Alert]:
    """A few hours of one cluster over 8 workloads whose pods share 6 nodes: pod, node-only and
    model-wide alerts, deploys of one workload or of the whole cluster, short resolutions (some
    sent again later); in arrival order, a fifth of them 1-15 minutes late. Node alerts and
    cluster-wide deploys join groups across workloads, whose alerts share no bucket."""
    rng = random.Random(seed)
    timed = []
    for number in range(size):
        workload = rng.randrange(8)
        at = BASE_DAY + timedelta(seconds=rng.uniform(0, 4 * 3600))
        if rng.random() < 0.03:
            scope = {"deployment": f"vllm-w{workload}"} if rng.random() < 0.8 else {}
            timed.append((at, make_change(f"deploy #{number}", at, cluster="c1", **scope)))
            continue
        labels = {"alertname": rng.choice(NAMES), "cluster": "c1", "namespace": "llm"}
        pod = rng.randrange(6)
        node = f"gpu-node-{(workload + pod) % 6}"
        if rng.random() < 0.1:  # a node's own alert: no pod, no model
            labels.update(alertname="DCGMXidErrors", node=node, gpu=str(pod % 2))
        else:
            labels["model_name"] = f"w{workload}"
            if rng.random() < 0.8:
                labels["pod"] = f"vllm-w{workload}-7d9f8b6c5d-{pod:05d}"
                if rng.random() < 0.3:  # some name the pod's node (and GPU): links are learned
                    labels["node"] = node
                    if rng.random() < 0.5:
                        labels["gpu"] = str(pod % 2)
        labels["n"] = str(number)
        ends = at + timedelta(minutes=rng.uniform(1, 15)) if rng.random() < 0.6 else None
        alert = Alert(label_fingerprint(labels), at, labels, {}, ends, RESOLVED if ends else FIRING, "")
        if ends is not None and rng.random() < 0.3:  # firing first, its resolution later
            timed.append((at, Alert(alert.fingerprint, at, labels, {}, None, FIRING, "")))
            timed.append((ends, alert))
        else:
            timed.append((at, alert))
    arrivals = [
        (at + timedelta(seconds=rng.uniform(60, 900) if rng.random() < 0.2 else rng.uniform(0, 30)), alert)
        for at, alert in timed
    ]
    arrivals.sort(key=lambda pair: pair[0])
    return [alert for _, alert in arrivals]


def answers(alerts: list[Alert], batch: int, seed: int) -> list[str]:
    """Every answer of add_many() and decide() (a few exclusions along the way), then all incidents."""
    rng = random.Random(seed)
    correlator = Correlator(CATALOG)
    out = []
    for start in range(0, len(alerts), batch):
        out.append(repr(correlator.add_many(alerts[start : start + batch])))
        if rng.random() < 0.08:
            key = rng.choice(sorted(correlator._entries))
            out.append(repr(correlator.decide(Exclude(key))))
    out.append(repr(correlator.incidents()))
    return out


def relinking_everything(monkeypatch) -> None:
    monkeypatch.setattr(_Replay, "must_relink", lambda self, entry: True)


@pytest.mark.parametrize(
    "seed,batch", [(seed, 1) for seed in range(10)] + [(20 + seed, 7) for seed in range(6)]
)
def test_a_partial_replay_answers_exactly_as_linking_everything_again(seed, batch, monkeypatch):
    alerts = day(seed)
    repeated = []
    must_relink = _Replay.must_relink
    monkeypatch.setattr(
        _Replay,
        "must_relink",
        lambda self, entry: repeated.append(not must_relink(self, entry)) or not repeated[-1],
    )
    fast = answers(alerts, batch, seed)
    relinking_everything(monkeypatch)
    assert answers(alerts, batch, seed) == fast
    assert sum(repeated) > 10  # the shortcut is taken


def test_an_alert_on_another_workload_repeats_and_one_on_the_late_alerts_workload_is_linked_again(
    monkeypatch,
):
    def alert(name: str, minute: int, workload: str) -> Alert:
        labels = {
            "alertname": name,
            "cluster": "c1",
            "namespace": "llm",
            "model_name": workload,
            "pod": f"vllm-{workload}-7d9f8b6c5d-00001",
        }
        return Alert(
            label_fingerprint(labels), BASE_DAY + timedelta(minutes=minute), labels, {}, None, FIRING, ""
        )

    early = [alert("LLMContainerOOMKilled", 10, "a"), alert("LLMContainerOOMKilled", 11, "b")]
    late = alert("LLMKVFragmentationHigh", 5, "a")
    correlator = Correlator(CATALOG)
    correlator.add_many(early)
    relinked = []
    must_relink = _Replay.must_relink

    def spy(self, entry):
        again = must_relink(self, entry)
        if again:
            relinked.append((entry.alert.alertname, entry.alert.labels["model_name"]))
        return again

    monkeypatch.setattr(_Replay, "must_relink", spy)
    correlator.add(late)  # both later alerts are replayed
    assert relinked == [("LLMKVFragmentationHigh", "a"), ("LLMContainerOOMKilled", "a")]  # not workload b's
    assert repr(correlator.incidents()) == repr(correlate(early + [late], catalog=CATALOG))


def replaying_the_plain_way(monkeypatch) -> None:
    """No `_Replay`: the cluster is rolled back in full (groups and index) and all is linked again."""
    monkeypatch.setattr(_Partition, "_replay_for", lambda self, suffix, touched: None)


@pytest.mark.parametrize(
    "seed,batch", [(40 + seed, 1) for seed in range(6)] + [(50 + seed, 5) for seed in range(4)]
)
def test_a_partial_replay_answers_exactly_as_a_full_rollback(seed, batch, monkeypatch):
    """A partial replay cuts back only the index buckets a re-linked alert reads or joins, and
    compares the incidents of the alerts a re-linked one reached; the plain way rolls back every
    bucket, links everything again and compares every replayed alert's incident."""
    alerts = day(seed)
    cuts = []
    cut_for = _Partition._cut_for
    monkeypatch.setattr(
        _Partition, "_cut_for", lambda self, x, cut: cuts.append(len(cut)) or cut_for(self, x, cut)
    )
    fast = answers(alerts, batch, seed)
    assert sum(1 for n in cuts if n) > 10  # later re-linked alerts found buckets already cut
    replaying_the_plain_way(monkeypatch)
    assert answers(alerts, batch, seed) == fast


@pytest.mark.parametrize(
    "seed,batch,storm",
    [(60 + seed, 1, 256) for seed in range(6)]
    + [(70 + seed, 5, 256) for seed in range(3)]
    + [(80 + seed, 1, 6) for seed in range(3)],
)
def test_only_alerts_a_relinked_one_reached_can_have_another_incident(seed, batch, storm, monkeypatch):
    """add_many() returns the incidents that changed; a partial replay compares the incident
    signatures of alerts linked again or tainted only (all, once a storm's group is tainted: the
    taint is no longer kept; a low bar makes small groups count as storms here). Every other
    replayed alert must have the signature it had before the rollback (and comparing them all
    must give the same answers)."""
    monkeypatch.setattr(rewind, "_STORM_GROUP", storm)
    alerts = day(seed)
    old = {}
    skipped = []
    init, note_reached = _Replay.__init__, _Replay.note_reached

    def remember(self, partition, suffix, touched):
        init(self, partition, suffix, touched)
        old.update((entry.key, partition.signature(entry)) for entry in suffix)

    def check(self, replayed):
        note_reached(self, replayed)
        for entry in replayed:
            if entry.key not in self.before:
                skipped.append(entry.key)
                assert self.partition.signature(entry) == old[entry.key], entry.key

    monkeypatch.setattr(_Replay, "__init__", remember)
    monkeypatch.setattr(_Replay, "note_reached", check)
    fast = answers(alerts, batch, seed)
    assert len(skipped) > 30  # the shortcut is taken
    monkeypatch.setattr(_Replay, "may_have_changed", lambda self, entry: True)
    assert answers(alerts, batch, seed) == fast
