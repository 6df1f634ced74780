"""Two web servers (behind one balancer, as two pods) and two Celery workers of each kind at once,
under a load shaped as Alertmanager sends it: every group sent again as it grows, and sent twice
(an HA pair of Alertmanagers both notify). No alert is lost, none stored twice, and no cascade
opens two incidents: runs of one cluster on two correlation workers wait on each other's lock."""

from __future__ import annotations

import random
import time

import pytest

from tests.drills.conftest import TOKEN, tails
from tests.support.drill_traffic import Sender, cascade_alerts, webhook_body
from tests.support.drills import wait_for

pytestmark = [pytest.mark.services]

CLUSTERS, PODS, ROUNDS = 10, 100, 3


def growing_groups(run_id: str) -> tuple[list[bytes], int]:
    """Each (cluster, alertname) group sent once per round with the members it has by then (a
    third, two thirds, all), each body twice, shuffled across groups."""
    t0 = time.time() - 300
    groups: dict[tuple[str, str], list[dict]] = {}
    total = 0
    for cluster in range(CLUSTERS):
        for alert in cascade_alerts(f"gpu-pair-{cluster:02d}", PODS, t0, run_id):
            groups.setdefault((alert["labels"]["cluster"], alert["labels"]["alertname"]), []).append(alert)
            total += 1
    bodies = []
    for round_number in range(1, ROUNDS + 1):
        this_round = []
        for members in groups.values():
            body = webhook_body(members[: max(1, len(members) * round_number // ROUNDS)])
            this_round += [body, body]
        random.Random(round_number).shuffle(this_round)
        bodies += this_round
    return bodies, total


def test_two_of_every_process_lose_and_double_nothing(make_stack, ledger_of, run_id):
    stack = make_stack()
    stack.web(workers=1)
    stack.web(workers=1)
    stack.workers(2)
    stack.beat()
    ledger = ledger_of(stack)
    bodies, total = growing_groups(run_id)

    sent = Sender([stack.url(stack.hook, 0), stack.url(stack.hook, 1)], TOKEN, threads=8).send(bodies)
    assert sent.delivered == len(bodies) and sent.given_up == 0, sent.statuses()
    try:
        wait_for(lambda: ledger.settled(total), timeout=180, what="every alert stored and correlated")
    except Exception:
        pytest.fail(f"{ledger.deliveries()} {ledger.uncorrelated()} uncorrelated\n{tails(stack)}")

    occurrences = ledger.occurrences()
    assert len(occurrences) == len(set(occurrences)) == total
    assert ledger.alerts_without_incident() == 0
    assert ledger.duplicate_roots() == [] and ledger.duplicate_edges() == []
    by_key = ledger.incidents_by_key()
    assert len(by_key) == CLUSTERS and all(len(ids) == 1 for ids in by_key.values()), by_key
    # Both web servers answered (the sender alternates) and every process is still up. Which
    # worker of a pair took which task is the broker's choice, not asserted.
    assert all(p.alive() for p in stack.processes)
