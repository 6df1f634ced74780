"""The scan's shortcut for neighbours on another pod, GPU and node: it only skips pairs no rule can
link, so the engine answers exactly as it does without it.

A storm of one failure mode over the pods of one workload (every pod's GPU memory alert at once)
made every new alert compare itself with every earlier one: the catalog's oom->oom rule needs one
pod, GPU or node, so a neighbour already joined through its workload still looked as if it could
add a causal edge, and was linked again only to be dropped. Measured on 3,000 such alerts: 38 s
before, about 2 s after (bench/results/history.md, "Storm density")."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.events import FIRING, RESOLVED, Alert, occurrence_key
from correlate.testing import label_fingerprint

START = datetime(2026, 3, 14, 12, tzinfo=UTC)
NAMES = [
    "GPUMemoryHigh",
    "LLMKVFragmentationHigh",
    "LLMContainerOOMKilled",
    "KubePodCrashLooping",
    "LLMQueueWaitHigh",
    "DCGMXidErrors",
    "TargetDown",
    "LLMVllmPreemptionsHigh",
]


def storm(seed: int, size: int = 260) -> list[Alert]:
    """Alerts over 3 workloads' pods, some naming their node and GPU, some node-level (no pod)."""
    rng = random.Random(seed)
    alerts = []
    for number in range(size):
        deployment = f"vllm-m{rng.randrange(3)}"
        labels = {
            "alertname": rng.choice(NAMES[:3]) if rng.random() < 0.7 else rng.choice(NAMES),
            "cluster": "c1",
            "namespace": "llm",
        }
        if rng.random() < 0.85:
            labels["pod"] = f"{deployment}-7d9f8b6c5d-{rng.randrange(40):05d}"
            labels["model_name"] = deployment[5:]
        if rng.random() < 0.4:
            labels["node"] = f"gpu-node-{rng.randrange(6)}"
            if rng.random() < 0.5:
                labels["gpu"] = str(rng.randrange(4))
        labels["n"] = str(number)  # every alert its own identity
        at = START + timedelta(seconds=rng.uniform(0, 1500))
        ends = at + timedelta(minutes=rng.uniform(1, 20)) if rng.random() < 0.4 else None
        alerts.append(
            Alert(label_fingerprint(labels), at, labels, {}, ends, RESOLVED if ends else FIRING, "")
        )
    return alerts


def without_shortcut(monkeypatch) -> None:
    monkeypatch.setattr(Correlator, "_local_rules_for", lambda self, later: [False] * 4096)


@pytest.mark.parametrize("seed", range(6))
def test_batch_answers_are_the_same_with_and_without_the_shortcut(seed, monkeypatch):
    catalog = load_catalog(use_env=False)
    alerts = storm(seed)
    fast = repr(correlate(alerts, catalog=catalog))
    without_shortcut(monkeypatch)
    assert repr(correlate(alerts, catalog=catalog)) == fast


@pytest.mark.parametrize("seed", range(3))
def test_incremental_answers_are_the_same_with_and_without_the_shortcut(seed, monkeypatch):
    catalog = load_catalog(use_env=False)
    alerts = sorted(storm(100 + seed), key=lambda a: a.starts_at)
    random.Random(seed).shuffle(alerts[-40:])  # some arrive late: replays

    def answers() -> list[str]:
        correlator = Correlator(catalog)
        return [repr(correlator.add_many(alerts[i : i + 25])) for i in range(0, len(alerts), 25)] + [
            repr(correlator.incidents())
        ]

    fast = answers()
    without_shortcut(monkeypatch)
    assert answers() == fast


def test_a_workload_wide_storm_of_one_mode_is_one_incident_with_its_same_pod_edges():
    catalog = load_catalog(use_env=False)
    alerts = []
    for number in range(300):
        labels = {
            "alertname": "GPUMemoryHigh",
            "cluster": "c1",
            "namespace": "llm",
            "pod": f"vllm-big-7d9f8b6c5d-{number:05d}",
            "model_name": "big",
        }
        alerts.append(
            Alert(
                label_fingerprint(labels),
                START + timedelta(milliseconds=50 * number),
                labels,
                {},
                None,
                FIRING,
                "",
            )
        )
    again = dict(alerts[0].labels)  # the first pod's memory alert fires again: one pod's own causal edge
    alerts.append(Alert(label_fingerprint(again), START + timedelta(minutes=2), again, {}, None, FIRING, ""))
    [incident] = correlate(alerts, catalog=catalog)
    assert len(incident.members) == 301
    first, refire = (occurrence_key(alert.fingerprint, alert.starts_at) for alert in (alerts[0], alerts[-1]))
    assert [(edge.cause, edge.rule, edge.relation) for edge in incident.edges if edge.effect == refire] == [
        (first, "oom->oom", "same_pod")
    ]
