"""The scan's bucket keys are cached per (scope, nodes, GPUs) for the time between two pod links on
those nodes/GPUs; the cached answer must be the one computed afresh, whatever the topology learns
later and whatever time the next alert of that scope has."""

from __future__ import annotations

import random

import pytest
from test_partial_replay import day

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.events import Alert
from correlate.testing import label_fingerprint


def shared_label_sets(seed: int) -> list[Alert]:
    """test_partial_replay's day with one label set per pod and alert name, so scopes repeat over
    hours: an alert then meets a scope whose keys were cached at another time."""
    alerts = {}
    for alert in day(seed):
        labels = {k: v for k, v in alert.labels.items() if k != "n"}
        again = Alert(
            label_fingerprint(labels),
            alert.starts_at,
            labels,
            alert.annotations,
            alert.ends_at,
            alert.status,
            alert.generator_url,
        )
        alerts.setdefault((again.key, again.status), again)
    return list(alerts.values())


CATALOG = load_catalog(use_env=False)


def afresh(partition, entry):
    cache = partition._scan_keys_cache
    partition._scan_keys_cache = {}
    try:
        return partition._scan_keys(entry, entry.own_scan)
    finally:
        partition._scan_keys_cache = cache


@pytest.mark.parametrize("seed", range(4))
def test_cached_scan_keys_are_the_keys_computed_afresh_as_links_are_learned(seed):
    alerts = shared_label_sets(seed)
    rng = random.Random(seed)
    correlator = Correlator(CATALOG)
    hits = 0
    for start in range(0, len(alerts), 5):
        correlator.add_many(alerts[start : start + 5])
        for partition in correlator._partitions.values():
            processed = [e for e in partition.entries if e.index_keys or e.mode == "change"]
            for entry in rng.sample(processed, min(len(processed), 30)):
                before = len(partition._scan_keys_cache)
                cached = partition._scan_keys(entry, entry.own_scan)
                hits += len(partition._scan_keys_cache) == before and bool(entry.nodes or entry.gpus)
                assert list(cached) == list(afresh(partition, entry))
    assert hits > 100


def test_an_alerts_buckets_are_its_scopes_and_its_names():
    alerts = day(7)
    correlator = Correlator(CATALOG)
    correlator.add_many(alerts)
    for entry in correlator._entries.values():
        assert entry.own_keys == tuple(sorted(entry.own_scan + (("name", entry.alert.alertname),)))
        assert all(kind != "name" for kind, _ in entry.own_scan)
    assert repr(correlator.incidents()) == repr(correlate(alerts, catalog=CATALOG))


@pytest.mark.parametrize("seed", range(4))
def test_the_keys_an_alert_last_scanned_are_its_keys_now_while_its_links_are_the_same(seed):
    """A partial replay asks which buckets each later alert would read (`_scan_keys_now`) and
    answers with those its last scan read, unless a link of its pod or of its nodes/GPUs was
    learned since."""
    alerts = shared_label_sets(seed)
    correlator = Correlator(CATALOG)
    reused = 0
    for start in range(0, len(alerts), 5):
        correlator.add_many(alerts[start : start + 5])
        for partition in correlator._partitions.values():
            for entry in partition.entries:
                if entry.index_keys:
                    reused += (
                        partition.topology.version != entry.scan_version
                        and bool(entry.nodes or entry.gpus)
                        and partition._links_unchanged_since(entry, entry.scan_version)
                    )
                    assert list(partition._scan_keys_now(entry)) == list(afresh(partition, entry))
    assert reused > 100
