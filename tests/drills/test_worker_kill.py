"""A Celery worker killed with SIGKILL in the middle of its task (the whole process group, as the
OOM killer or a lost node does it: no warm shutdown, its messages left unacknowledged in Redis for
the broker's visibility timeout): the ingestion worker mid-drain, the correlation worker mid-run,
the evidence worker mid-collection. After a restart every delivery is processed and every alert
correlated once; nothing is doubled."""

from __future__ import annotations

import time

import pytest

from tests.drills.conftest import TOKEN, tails
from tests.support.drill_traffic import Sender, cascade_alerts, grouped_bodies
from tests.support.drills import wait_for

pytestmark = [pytest.mark.services]


def storm(run_id: str, clusters: int, pods: int) -> tuple[list[bytes], int]:
    t0 = time.time() - 120
    alerts = [a for c in range(clusters) for a in cascade_alerts(f"gpu-kill-{c:02d}", pods, t0, run_id)]
    return grouped_bodies(alerts, per_body=1000), len(alerts)


def killed_mid_task(process, busy, *, timeout: float = 90) -> dict:
    """SIGKILL `process` the first moment `busy()` says it is working (a dict of what was seen
    then), and return that."""
    seen = wait_for(busy, timeout=timeout, interval=0.02, what=f"{process.name} to be mid-task")
    process.kill()
    return seen


def assert_nothing_lost_or_doubled(ledger, total: int, clusters: int) -> None:
    assert ledger.deliveries().keys() == {"processed"}, ledger.deliveries()
    occurrences = ledger.occurrences()
    assert len(occurrences) == len(set(occurrences)) == total
    assert ledger.uncorrelated() == 0 and ledger.alerts_without_incident() == 0
    assert ledger.duplicate_roots() == [] and ledger.duplicate_edges() == []
    assert sorted(len(ids) for ids in ledger.incidents_by_key().values()) == [1] * clusters


def test_ingestion_worker_killed_mid_drain(make_stack, ledger_of, run_id):
    stack = make_stack()
    stack.web(workers=2)
    stack.beat()
    ledger = ledger_of(stack)
    bodies, total = storm(run_id, clusters=4, pods=1500)
    sent = Sender([stack.url(stack.hook)], TOKEN, threads=4).send(bodies)
    assert sent.delivered == len(bodies)
    ingestion = stack.worker("ingestion")

    def draining():
        # A drain stores up to 500 deliveries in one transaction: open for a while, all still pending.
        return ledger.open_transactions(older_than=0.3) > 0 and ledger.deliveries()

    seen = killed_mid_task(ingestion, draining)
    left = ledger.deliveries()
    assert left.get("pending", 0) > 0, f"the drain had finished before the kill: {seen} -> {left}"
    stack.restart(ingestion)
    stack.worker("correlation")
    try:
        wait_for(lambda: ledger.settled(total), timeout=180, what="everything processed and correlated")
    except Exception:
        pytest.fail(f"{ledger.deliveries()}\n{tails(stack)}")
    assert_nothing_lost_or_doubled(ledger, total, clusters=4)


def test_correlation_worker_killed_mid_run(make_stack, ledger_of, run_id):
    stack = make_stack()
    stack.web(workers=2)
    stack.beat()
    stack.worker("ingestion")
    ledger = ledger_of(stack)
    bodies, total = storm(run_id, clusters=3, pods=2500)
    sent = Sender([stack.url(stack.hook)], TOKEN, threads=4).send(bodies)
    assert sent.delivered == len(bodies)
    wait_for(lambda: ledger.deliveries().keys() == {"processed"}, timeout=120, what="deliveries stored")
    correlation = stack.worker("correlation")

    def correlating():
        waiting = ledger.uncorrelated()
        return 0 < waiting and ledger.open_transactions(older_than=0.3) > 0 and {"uncorrelated": waiting}

    seen = killed_mid_task(correlation, correlating)
    assert ledger.uncorrelated() > 0, f"correlation had finished before the kill: {seen}"
    stack.restart(correlation)
    try:
        wait_for(lambda: ledger.settled(total), timeout=180, what="every alert correlated")
    except Exception:
        pytest.fail(f"{ledger.uncorrelated()} uncorrelated\n{tails(stack)}")
    assert_nothing_lost_or_doubled(ledger, total, clusters=3)


def test_evidence_worker_killed_mid_collection(make_stack, ledger_of, story_prometheus, story_bodies):
    proxy = story_prometheus.proxy
    proxy.delay = 0.5  # each query half a second: a collection takes its dozens of them
    stack = make_stack(PROMETHEUS_URL=proxy.url)
    stack.web(workers=1)
    stack.beat()
    stack.worker("ingestion")
    stack.worker("correlation")
    evidence = stack.worker("evidence")
    ledger = ledger_of(stack)
    sent = Sender([stack.url(stack.hook)], TOKEN, threads=1).send(story_bodies)
    assert sent.delivered == len(story_bodies)

    def collecting():
        shown = ledger.evidence()
        return proxy.requests >= 3 and shown and all(collected is None for collected, _, _ in shown.values())

    killed_mid_task(evidence, collecting, timeout=120)
    asked_before = proxy.requests
    (incident,) = ledger.evidence()
    proxy.delay = 0
    stack.restart(evidence)
    try:
        # Swept up by beat's requeue (its message died with the worker): after the incident's
        # minimum interval between collections (60 s), as any second collection would be.
        wait_for(lambda: ledger.evidence()[incident][0] is not None, timeout=150, what="evidence collected")
    except Exception:
        pytest.fail(f"{ledger.evidence()} after {proxy.requests} queries\n{tails(stack)}")
    collected, series, gaps = ledger.evidence()[incident]
    assert proxy.requests > asked_before
    assert series > 20 and gaps == 0, ledger.evidence()
    doubled = ledger.value(
        "SELECT count(*) FROM (SELECT 1 FROM incidents_evidenceseries"
        " GROUP BY incident_id, signal, query, labels_key HAVING count(*) > 1) d"
    )
    assert doubled == 0
