"""A simulated fleet replayed into Rootline: the app is a faithful window on the engine.

- through the webhook into a running server (with real workers when a broker is configured), the
  stored incidents score exactly as the engine does offline on the same files;
- the same bodies in shuffled order, incrementally and by `recorrelate`, give the same incidents;
- two real workers on Redis against PostgreSQL with interleaved deliveries: no duplicate
  incidents, no alert lost.
"""

from __future__ import annotations

import json
import random
import re
import threading
from pathlib import Path

import pytest
import requests
from django.core.management import call_command

from correlate import simulator
from correlate.batch import correlate
from correlate.io import read_alerts
from correlate.scoring import grouping_from_document, grouping_from_incidents, score
from incidents import selectors, services
from incidents.models import Alert, Delivery, Incident
from incidents.services.correlation import correlation_run
from incidents.tasks import process_delivery
from tests.conftest import require_postgres, wait_until

pytestmark = pytest.mark.services
SCENARIO_START = "2026-03-14T06:00:00Z"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    simulator.simulate("fleet-day", SCENARIO_START, 11, str(folder))
    return folder


def bodies(path: Path) -> list[bytes]:
    return [line.strip() for line in path.read_bytes().splitlines() if line.strip()]


def offline(fleet: Path):
    incidents = correlate(read_alerts([fleet / "alerts.jsonl", fleet / "changes.jsonl"]))
    return grouping_from_incidents(incidents)


def partition(grouping) -> set[frozenset]:
    return {group for group in grouping.groups}


def stored_grouping():
    return grouping_from_document(selectors.incidents_as_truth())


def post_fleet(fleet: Path, live_server, make_integration) -> None:
    """The fleet's changes, then its alert bodies, through the live server's webhooks."""
    alerts_hook, changes_hook = make_integration("alertmanager"), make_integration("events")
    session = requests.Session()
    for hook, path in ((changes_hook, fleet / "changes.jsonl"), (alerts_hook, fleet / "alerts.jsonl")):
        for body in bodies(path):
            response = session.post(
                live_server.url + hook.path,
                data=body,
                headers={"Authorization": f"Bearer {hook.plain_token}"},
                timeout=30,
            )
            assert response.status_code == 202, response.text


def quiet() -> bool:
    return (
        not Delivery.objects.filter(status="pending").exists()
        and not Alert.objects.filter(correlated=False).exists()
    )


@pytest.mark.django_db(transaction=True)
def test_replay_through_the_webhook_scores_as_the_engine_offline(
    fleet, live_server, make_integration, processing
):
    truth = json.loads((fleet / "truth.json").read_text())
    post_fleet(fleet, live_server, make_integration)
    wait_until(quiet, timeout=120, interval=0.3, what="every delivery processed and every alert correlated")
    engine, app = score("engine", truth, offline(fleet)), score("app", truth, stored_grouping())
    assert partition(stored_grouping()) == partition(offline(fleet))
    assert (app.f1, app.root_top1) == (engine.f1, engine.root_top1)
    assert app.f1 > 0.8


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario, seed", [("gpu-xid-crash", 3), ("march-oom", 29), ("threshold-storm", 3)])
def test_other_scenarios_through_the_webhook_score_as_the_engine_offline(
    scenario, seed, tmp_path, live_server, make_integration, processing
):
    """A cause delivered after its effects, a human's false positive with a threshold edit, a change
    that roots a storm: each as the engine has it offline (every scenario x seeds 3 and 29 passed
    once, fourteenth session; these three stay)."""
    simulator.simulate(scenario, SCENARIO_START, seed, str(tmp_path))
    truth = json.loads((tmp_path / "truth.json").read_text())
    post_fleet(tmp_path, live_server, make_integration)
    wait_until(quiet, timeout=120, interval=0.3, what="every delivery processed and every alert correlated")
    assert partition(stored_grouping()) == partition(offline(tmp_path))
    engine, app = score("engine", truth, offline(tmp_path)), score("app", truth, stored_grouping())
    assert (app.f1, app.root_top1) == (engine.f1, engine.root_top1)


@pytest.mark.django_db
def test_shuffled_arrival_incremental_and_batch_give_the_same_incidents(fleet, make_integration):
    require_postgres()
    alert_bodies, change_bodies = bodies(fleet / "alerts.jsonl"), bodies(fleet / "changes.jsonl")

    def replay(order_seed: int | None):
        Alert.objects.all().delete()
        Incident.objects.all().delete()
        Delivery.objects.all().delete()
        alerts_hook, changes_hook = make_integration("alertmanager"), make_integration("events")
        pairs = [(alerts_hook, body) for body in alert_bodies] + [
            (changes_hook, body) for body in change_bodies
        ]
        if order_seed is not None:
            random.Random(order_seed).shuffle(pairs)
        for hook, body in pairs:
            receipt = services.delivery_receive(integration=hook, body=body, headers={})
            process_delivery(receipt.body["delivery"])
            for key in set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True)):
                correlation_run(key=key, keep_state=True)  # as the worker runs it: from its kept state
        return partition(stored_grouping())

    in_order = replay(None)
    assert replay(1) == in_order
    assert replay(2) == in_order
    call_command("recorrelate", "--since", "2026-03-13T00:00:00Z", stdout=open("/dev/null", "w"))
    assert partition(stored_grouping()) == in_order
    assert in_order == partition(offline(fleet))


@pytest.mark.django_db(transaction=True)
def test_two_real_workers_with_interleaved_deliveries_lose_nothing_and_duplicate_nothing(
    fleet, live_server, make_integration, start_workers
):
    start_workers(2, concurrency=2)
    alerts_hook, changes_hook = make_integration("alertmanager"), make_integration("events")
    pairs = [(alerts_hook, body) for body in bodies(fleet / "alerts.jsonl")] + [
        (changes_hook, body) for body in bodies(fleet / "changes.jsonl")
    ]
    random.Random(5).shuffle(pairs)
    failures: list[str] = []

    def send(share: list) -> None:
        session = requests.Session()
        for hook, body in share:
            response = session.post(
                live_server.url + hook.path,
                data=body,
                headers={"Authorization": f"Bearer {hook.plain_token}"},
                timeout=30,
            )
            if response.status_code != 202:
                failures.append(response.text)

    threads = [threading.Thread(target=send, args=(pairs[n::4],)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    wait_until(quiet, timeout=180, interval=0.3, what="both workers to finish")
    expected = partition(offline(fleet))
    stored = partition(stored_grouping())
    assert (
        sum(len(group) for group in stored) == sum(len(group) for group in expected) == Alert.objects.count()
    )
    assert stored == expected
    visible = Incident.objects.visible()
    assert (
        visible.count()
        == len([group for group in stored if group]) - Alert.objects.filter(incident=None).count()
    )


@pytest.mark.django_db(transaction=True)
def test_sharded_correlation_workers_each_keep_their_clusters(
    fleet, live_server, make_integration, start_workers, settings, tmp_path
):
    """ROOTLINE_CORRELATION_SHARDS=2 as `make serve` runs it: an ingestion worker and one worker per
    shard queue. Every cluster is correlated by one process only, which runs it from its kept
    state, and the incidents are the engine's."""
    settings.CORRELATION_SHARDS = 2
    shards = {"ROOTLINE_CORRELATION_SHARDS": "2"}
    start_workers(1, concurrency=2, queues="rootline", extra_env=shards)
    logs = [tmp_path / "shard-0.log", tmp_path / "shard-1.log"]
    for number, log in enumerate(logs):
        start_workers(
            1,
            concurrency=1,
            queues=f"{settings.CELERY_CORRELATION_QUEUE}-{number}",
            extra_env=shards,
            log=log,
        )
    post_fleet(fleet, live_server, make_integration)
    wait_until(quiet, timeout=180, interval=0.3, what="the shards to correlate every alert")
    assert partition(stored_grouping()) == partition(offline(fleet))

    runs = [re.findall(r"correlated (\S*) from the (kept state|window)", log.read_text()) for log in logs]
    keys_by_shard = [{key for key, _ in shard} for shard in runs]
    clusters = set(Alert.objects.values_list("correlation_key", flat=True))
    assert keys_by_shard[0] | keys_by_shard[1] == clusters
    assert not keys_by_shard[0] & keys_by_shard[1]  # a cluster never ran in both processes
    assert all(keys_by_shard)  # and the clusters were spread over both
    assert (
        sum(path == "kept state" for shard in runs for _, path in shard)
        > sum(len(shard) for shard in runs) // 2
    )
