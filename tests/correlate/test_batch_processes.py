"""A batch shared among processes (correlate/batch.py) answers exactly as one process does."""

from __future__ import annotations

import json
import os
import pickle
import random
from datetime import timedelta

import pytest

from correlate import batch
from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.events import Alert
from correlate.results import Exclude, FalsePositive, Merge
from correlate.testing import BASE_DAY, make_alert, make_change

CATALOG = load_catalog(use_env=False)
CASCADE = [
    "LLMKVFragmentationHigh",
    "LLMKVCachePoolUtilizationHigh",
    "LLMContainerOOMKilled",
    "KubePodCrashLooping",
    "LLMQueueWaitHigh",
    "LLMTTFTp99High",
]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


@pytest.fixture(autouse=True)
def split_small_batches(monkeypatch):
    monkeypatch.setattr(batch, "MIN_ALERTS_TO_SPLIT", 0)


def fleet_day(seed: int, clusters: int = 5, alerts: int = 400) -> list[Alert]:
    """Cascades, noise, deploys and resolutions over several clusters, in a shuffled arrival order."""
    rng = random.Random(seed)
    out: list[Alert] = []
    while len(out) < alerts:
        cluster = f"prod-{rng.randrange(clusters)}"
        model = f"m{rng.randrange(3)}"
        pod = f"vllm-{model}-7d9f8b6c5d-{rng.randrange(4):05d}"
        at = BASE_DAY + timedelta(minutes=rng.uniform(0, 600))
        if rng.random() < 0.1:
            out.append(
                make_change(
                    f"deploy vllm-{model}", at, cluster=cluster, namespace="llm", deployment=f"vllm-{model}"
                )
            )
            continue
        for step, name in enumerate(CASCADE[: rng.randint(1, len(CASCADE))]):
            starts = at + timedelta(minutes=3 * step)
            ends = starts + timedelta(minutes=rng.uniform(2, 30)) if rng.random() < 0.5 else None
            out.append(
                make_alert(
                    name, starts, ends_at=ends, cluster=cluster, namespace="llm", pod=pod, model_name=model
                )
            )
    rng.shuffle(out)
    return out


def test_shared_clusters_give_the_one_process_answer():
    alerts = fleet_day(1)
    assert len({a.labels["cluster"] for a in alerts}) == 5
    alone = correlate(alerts, catalog=CATALOG)
    assert correlate(alerts, catalog=CATALOG, processes=2) == alone
    assert correlate(alerts, catalog=CATALOG, processes=3) == alone
    assert len(alone) > 10 and any(len(incident.members) > 3 for incident in alone)


def test_exclusions_and_false_positives_reach_every_process():
    alerts = fleet_day(2)
    alone = correlate(alerts, catalog=CATALOG)
    picked = [incident.members[-1].key for incident in alone if len(incident.members) > 2][:6]
    decisions = [Exclude(key) for key in picked[:3]] + [FalsePositive(key) for key in picked[3:]]
    decided = correlate(alerts, decisions, catalog=CATALOG)
    assert decided != alone
    assert correlate(alerts, decisions, catalog=CATALOG, processes=2) == decided


def test_resent_and_resolved_notifications_go_with_their_occurrence():
    alerts = fleet_day(3)
    resolved = [
        Alert(
            a.fingerprint,
            a.starts_at,
            a.labels,
            a.annotations,
            a.starts_at + timedelta(minutes=45),
            "resolved",
            a.generator_url,
        )
        for a in alerts[::7]
    ]
    stream = alerts + resolved + alerts[::11]
    assert correlate(stream, catalog=CATALOG, processes=2) == correlate(stream, catalog=CATALOG)


def test_clusters_sharing_a_fingerprint_are_correlated_in_one_process():
    """An occurrence the engine filed under one cluster, sent again with another cluster label
    (an Events-API dedup key reused, say), is that first cluster's: the two go to one share."""
    alerts = fleet_day(4, clusters=4)
    first = next(a for a in alerts if a.labels["cluster"] == "prod-0")
    moved = Alert(
        first.fingerprint,
        first.starts_at,
        {**first.labels, "cluster": "prod-3"},
        first.annotations,
        first.starts_at + timedelta(minutes=5),
        "resolved",
        first.generator_url,
    )
    stream = alerts + [moved]
    shares = batch.shares_by_cluster(stream, 4)
    holding = [{a.labels["cluster"] for a in share} for share in shares]
    assert any({"prod-0", "prod-3"} <= clusters for clusters in holding)
    assert sum(len(share) for share in shares) == len(stream)
    assert correlate(stream, catalog=CATALOG, processes=4) == correlate(stream, catalog=CATALOG)


def test_shares_keep_arrival_order_and_balance_work():
    alerts = fleet_day(5, clusters=6, alerts=600)
    shares = batch.shares_by_cluster(alerts, 2)
    assert len(shares) == 2
    for share in shares:
        positions = [alerts.index(a) for a in share]
        assert positions == sorted(positions)
    assert abs(len(shares[0]) - len(shares[1])) < 0.35 * len(alerts)


def test_human_merges_keep_the_batch_in_one_process(monkeypatch):
    alerts = fleet_day(6)
    alone = correlate(alerts, catalog=CATALOG)
    merge = Merge((alone[0].members[0].key, alone[-1].members[0].key))
    assert not batch.can_split(alerts, [merge], 2)
    monkeypatch.setattr(batch, "correlate_split", lambda *args: pytest.fail("forked despite a merge"))
    assert len(correlate(alerts, [merge], catalog=CATALOG, processes=2)) == len(alone) - 1


def test_a_failing_worker_raises_its_error():
    """The biggest cluster stays in this process, so the small one with the broken alert fails in a worker."""
    big = fleet_day(7, clusters=1, alerts=300)
    broken = make_alert("LLMContainerOOMKilled", BASE_DAY, cluster="small", pod="p")
    broken = Alert(
        broken.fingerprint, None, broken.labels, broken.annotations, None, "firing", ""
    )  # no start time
    small = [
        make_alert("TargetDown", BASE_DAY + timedelta(minutes=n), cluster="small", pod="p") for n in range(20)
    ]
    stream = big + small + [broken]
    assert broken in batch.shares_by_cluster(stream, 2)[1]
    with pytest.raises(RuntimeError, match="(?s)batch correlation worker failed.*AttributeError"):
        correlate(stream, catalog=CATALOG, processes=2)


def test_a_worker_that_dies_is_reported(monkeypatch):
    monkeypatch.setattr(batch, "_work", lambda *args: os._exit(3))
    with pytest.raises(RuntimeError, match="ended without its whole answer .*exit code 3"):
        correlate(fleet_day(8), catalog=CATALOG, processes=2)


def test_a_worker_that_dies_halfway_through_its_answer_is_reported(monkeypatch):
    """Its first chunk arrived; the missing end mark still tells the parent the answer is cut."""

    def first_chunk_then_die(share, decisions, catalog, pipe):
        incidents = batch.correlate_here(share, decisions, catalog)
        pickle.dump(("incidents", incidents[:1]), pipe)
        pipe.flush()
        os._exit(3)

    monkeypatch.setattr(batch, "_work", first_chunk_then_die)
    with pytest.raises(RuntimeError, match="ended without its whole answer .*exit code 3"):
        correlate(fleet_day(8), catalog=CATALOG, processes=2)


def test_answers_of_many_chunks_arrive_whole_and_in_order(monkeypatch):
    monkeypatch.setattr(batch, "_CHUNK", 3)
    alerts = fleet_day(9)
    assert correlate(alerts, catalog=CATALOG, processes=2) == correlate(alerts, catalog=CATALOG)


def test_workers_run_no_after_fork_hooks_of_the_libraries_loaded(tmp_path):
    """kombu registers a multiprocessing after-fork hook that closes its broker connections,
    reading from sockets the parent still uses: in a Django process a worker hung there."""
    from multiprocessing.util import register_after_fork

    class Hooked:
        pass

    hooked = Hooked()
    marker = tmp_path / "hook-ran"
    register_after_fork(hooked, lambda _: marker.write_text("ran"))
    alerts = fleet_day(10)
    assert correlate(alerts, catalog=CATALOG, processes=2) == correlate(alerts, catalog=CATALOG)
    assert not marker.exists()


def test_processes_default_to_the_cpus_this_process_may_use():
    assert batch.usable_processes(3) == 3
    assert batch.usable_processes(0) >= 1
    assert batch.usable_processes(None) == batch.usable_processes(0)


def test_the_command_line_prints_the_same_incidents_over_processes(tmp_path, monkeypatch, capsys):
    """`python -m correlate` shares clusters among processes by default; --processes 1 keeps one."""
    from correlate import cli

    bodies = []
    for alert in fleet_day(9):
        bodies.append(
            {
                "version": "4",
                "status": alert.status,
                "receiver": "r",
                "groupKey": "{}:{}",
                "alerts": [
                    {
                        "status": alert.status,
                        "labels": alert.labels,
                        "annotations": alert.annotations,
                        "startsAt": alert.starts_at.isoformat(),
                        "endsAt": alert.ends_at.isoformat() if alert.ends_at else "0001-01-01T00:00:00Z",
                        "generatorURL": alert.generator_url,
                        "fingerprint": alert.fingerprint,
                    }
                ],
            }
        )
    path = tmp_path / "alerts.jsonl"
    path.write_text("\n".join(json.dumps(body) for body in bodies) + "\n")
    forked = []
    split = batch.correlate_split
    monkeypatch.setattr(batch, "correlate_split", lambda *args: forked.append(args[-1]) or split(*args))
    assert cli.main([str(path), "--processes", "1"]) == 0
    one = capsys.readouterr().out
    assert cli.main([str(path), "--processes", "3"]) == 0
    assert capsys.readouterr().out == one
    assert forked == [3]
    assert len(json.loads(one)["incidents"]) > 10
