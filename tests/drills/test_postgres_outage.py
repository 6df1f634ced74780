"""PostgreSQL stopped for 30 s in the middle of a storm from a real Alertmanager: the webhook
answers 503 (never 500) while it is down, Alertmanager sends again, and once the database is back
every alert Alertmanager holds is stored exactly once, by (fingerprint, startsAt), and correlated."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
import requests

from tests.drills.conftest import TOKEN, tails
from tests.support.alertmanager import Alertmanager, make_alert
from tests.support.drill_traffic import cascade_alerts
from tests.support.drills import wait_for

pytestmark = [pytest.mark.services]

CLUSTERS = 6
PODS = 12
STORM_SECONDS = 60
OUTAGE_AT, OUTAGE_SECONDS = 15, 30


def occurrence(fingerprint: str, starts_at: str | datetime) -> tuple[str, int]:
    """(fingerprint, startsAt in ms): Alertmanager's text and PostgreSQL's timestamp alike."""
    if isinstance(starts_at, str):
        starts_at = datetime.fromisoformat(starts_at.replace("Z", "+00:00"))
    return fingerprint, round(starts_at.timestamp() * 1000)


def storm(run_id: str) -> list[list[dict]]:
    """Waves of alerts, one wave a second: each cluster's cascade spread over the storm, so that
    every group grows (and is sent again) before, during and after the outage."""
    t0 = time.time()
    alerts = [
        alert
        for cluster in range(CLUSTERS)
        for alert in cascade_alerts(f"gpu-drill-{cluster:02d}", PODS, t0, run_id)
    ]
    waves: list[list[dict]] = [[] for _ in range(STORM_SECONDS)]
    for number, alert in enumerate(alerts):
        waves[number * STORM_SECONDS // len(alerts)].append(alert)
    return waves


def test_postgres_down_30s_mid_storm_loses_and_doubles_nothing(
    make_stack, private_postgres, ledger_of, run_id
):
    stack = make_stack()
    stack.web(workers=2)
    stack.workers(1)
    stack.beat()
    ledger = ledger_of(stack)
    outage: dict[str, float] = {}
    health: list[dict] = []

    def stop_and_start_postgres():
        time.sleep(OUTAGE_AT)
        outage["stopped"] = time.time()
        private_postgres.stop("fast")
        time.sleep(OUTAGE_SECONDS / 2)
        answer = requests.get(stack.url("/healthz"), timeout=10)
        health.append({**answer.json(), "code": answer.status_code})
        time.sleep(OUTAGE_SECONDS / 2)
        private_postgres.start()
        outage["started"] = time.time()

    with Alertmanager(
        stack.url(stack.hook), TOKEN, group_by=("alertname", "cluster"), group_wait="1s", group_interval="2s"
    ) as alertmanager:
        chaos = threading.Thread(target=stop_and_start_postgres)
        chaos.start()
        for wave in storm(run_id):
            started = time.monotonic()
            alertmanager.post_alerts(
                make_alert(a["labels"]["alertname"], a["labels"], a["annotations"], starts_at=a["startsAt"])
                for a in wave
            )
            time.sleep(max(0.0, 1 - (time.monotonic() - started)))
        chaos.join()
        held = {occurrence(a["fingerprint"], a["startsAt"]) for a in alertmanager.alerts()}
        assert len(held) == CLUSTERS * len(cascade_alerts("x", PODS, 0, run_id))

        try:
            wait_for(lambda: ledger.settled(len(held)), timeout=120, what="every alert stored and correlated")
        except Exception:
            pytest.fail(f"not settled: {ledger.deliveries()}\n{alertmanager.log_tail()}\n{tails(stack)}")
        failed_notifications = alertmanager.metric(
            "alertmanager_notifications_failed_total", integration="webhook"
        )

    stored = [occurrence(fingerprint, starts) for fingerprint, starts in ledger.occurrences()]
    assert len(stored) == len(set(stored)), "an occurrence stored twice"
    assert set(stored) == held, "stored alerts differ from the ones Alertmanager holds"
    assert ledger.uncorrelated() == 0 and ledger.alerts_without_incident() == 0

    # The outage was real and seen by Alertmanager: its sends failed and it sent again.
    assert outage["started"] - outage["stopped"] >= OUTAGE_SECONDS
    assert failed_notifications >= 1
    statuses = stack.web_statuses()
    assert statuses.get(503, 0) >= 1, statuses
    assert not {status for status in statuses if status >= 500} - {503}, statuses
    assert health and health[0]["code"] == 503 and health[0]["database"].startswith("error")
    assert health[0]["broker"] == "ok"
    # One incident per cluster's cascade, none opened twice.
    assert ledger.duplicate_roots() == []
    assert sorted(len(ids) for ids in ledger.incidents_by_key().values()) == [1] * CLUSTERS
