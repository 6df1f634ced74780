"""Real components end to end: Debian's Alertmanager delivering to a live Rootline, and a real
Celery worker on the broker processing what the webhook stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import requests

from incidents.models import Alert, Delivery
from tests.conftest import require_binary, wait_until
from tests.support.alertmanager import Alertmanager, make_alert

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_alertmanager_deliveries_to_a_live_server_are_stored_and_processed(
    live_server, make_integration, processing
):
    binary = require_binary("alertmanager")
    integration = make_integration("alertmanager")
    now = datetime.now(UTC).replace(microsecond=0)
    fleet = {"cluster": "it", "namespace": "llm", "model_name": "llama-3-70b"}
    firing = [
        make_alert(
            "KVCacheFragmentationHigh",
            {**fleet, "pod": "vllm-llama-5d8f-x1"},
            {"summary": "frag 31%"},
            starts_at=now - timedelta(minutes=3),
        ),
        make_alert(
            "LLMContainerOOMKilled",
            {**fleet, "pod": "vllm-llama-5d8f-x1"},
            {"summary": "OOM"},
            starts_at=now - timedelta(minutes=1),
        ),
    ]
    with Alertmanager(
        live_server.url + integration.path, integration.plain_token, binary=binary
    ) as alertmanager:
        alertmanager.post_alerts(firing)
        wait_until(
            lambda: Alert.objects.filter(integration=integration, status="firing").count() == 2,
            timeout=90,
            what="two firing alerts",
        )
        resolved = dict(firing[0], endsAt=(now - timedelta(seconds=5)).isoformat().replace("+00:00", "Z"))
        alertmanager.post_alerts([resolved])
        wait_until(
            lambda: Alert.objects.filter(integration=integration, status="resolved").count() == 1,
            timeout=90,
            what="the resolved notification",
        )
        assert alertmanager.metric("alertmanager_notifications_failed_total", integration="webhook") == 0
    fragmentation = Alert.objects.get(alertname="KVCacheFragmentationHigh")
    assert fragmentation.starts_at == now - timedelta(minutes=3)
    assert fragmentation.ends_at == now - timedelta(seconds=5)
    assert Alert.objects.filter(integration=integration).count() == 2
    deliveries = Delivery.objects.filter(integration=integration)
    assert deliveries.exists() and not deliveries.exclude(status="processed").exists()
    assert all(d.headers.get("user-agent", "").startswith("Alertmanager/") for d in deliveries)


def test_real_worker_processes_interleaved_deliveries_on_the_broker(
    live_server, make_integration, celery_worker_process
):
    integration = make_integration("alertmanager")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {integration.plain_token}"
    sent = 0
    for batch in range(20):
        alerts = [
            {
                "status": "firing",
                "labels": {"alertname": "VLLMQueueTimeHigh", "pod": f"vllm-{batch}-{n}", "cluster": "it"},
                "annotations": {},
                "startsAt": f"2026-11-29T02:{batch:02d}:{n:02d}Z",
                "endsAt": "0001-01-01T00:00:00Z",
            }
            for n in range(10)
        ]
        response = session.post(
            live_server.url + integration.path,
            data=json.dumps({"version": "4", "alerts": alerts}),
            timeout=10,
        )
        assert response.status_code == 202, response.text
        sent += len(alerts)
    wait_until(
        lambda: Alert.objects.filter(integration=integration).count() == sent,
        timeout=60,
        what=f"{sent} alerts processed by the worker",
    )
    assert not Delivery.objects.filter(integration=integration).exclude(status="processed").exists()


def test_a_real_worker_keeps_its_database_connection_from_task_to_task(
    make_integration, celery_worker_process
):
    """Celery's Django fixup would open a PostgreSQL session for every task (CELERY_DB_REUSE_MAX
    unset); the worker keeps one, as web processes do, over many drain and correlation runs."""
    from django.db import connection

    from incidents import services

    def sessions() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
            return cursor.fetchone()[0]

    integration = make_integration("alertmanager")
    before = sessions()
    for batch in range(8):  # one at a time, each its own drain and correlation task
        alerts = [
            {
                "status": "firing",
                "labels": {"alertname": "VLLMQueueTimeHigh", "pod": f"vllm-{batch}", "cluster": "it"},
                "annotations": {},
                "startsAt": f"2026-11-29T03:{batch:02d}:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
            }
        ]
        services.delivery_receive(
            integration=integration, body=json.dumps({"version": "4", "alerts": alerts}).encode(), headers={}
        )
        wait_until(
            lambda batch=batch: (
                Alert.objects.filter(integration=integration, correlated=True).count() == batch + 1
            ),
            timeout=30,
            what=f"alert {batch + 1} processed and correlated",
        )
    # The worker's pool process and its parent; without reuse each of the 16+ tasks opened one.
    assert sessions() - before <= 4


def test_a_real_worker_ranks_a_big_incident_soon_after_holding_its_ranking_back(
    make_integration, start_workers
):
    """A storm's incident passes 500 alerts while it was ranked a moment ago: the worker writes
    its alerts at once, holds its ranking back, and ranks it in the run it queued on the broker
    for when that is due, with no further alert arriving. One process, as a correlation shard's
    worker runs (`bin/serve`): the engine state that holds rankings back lives in a process."""
    # Held rankings wait 20 s in this worker, not 5: long enough that a loaded machine's polls
    # still see the hold between the run that holds it and the run that ranks it.
    RANK_EVERY = 20
    start_workers(1, concurrency=1, extra_env={"ROOTLINE_CORRELATION_RANK_EVERY_MS": str(RANK_EVERY * 1000)})
    from datetime import datetime, timedelta

    from incidents import services
    from incidents.models import Incident
    from incidents.services.correlation.state import BIG_INCIDENT

    integration = make_integration("alertmanager")
    names = [
        "KVCacheFragmentationHigh",
        "GPUMemoryHigh",
        "LLMPodOOMKilled",
        "LLMQueueBacklog",
        "TTFTp95High",
        "PreemptionStorm",
    ]
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)

    def send(first: int, count: int) -> None:
        alerts = [
            {
                "status": "firing",
                "annotations": {},
                "endsAt": "0001-01-01T00:00:00Z",
                "labels": {
                    "alertname": names[i % 6],
                    "pod": f"vllm-llama-5d8f-{i}",
                    "namespace": "llm-serving",
                    "cluster": "big",
                    "job": "vllm",
                },
                "startsAt": (start + timedelta(milliseconds=10 * i)).isoformat().replace("+00:00", "Z"),
            }
            for i in range(first, first + count)
        ]
        services.delivery_receive(
            integration=integration, body=json.dumps({"version": "4", "alerts": alerts}).encode(), headers={}
        )

    def correlated(count: int) -> bool:
        return Alert.objects.filter(integration=integration, correlated=True).count() == count

    send(0, 100)
    wait_until(
        lambda: correlated(100), timeout=60, what="the first 100 alerts correlated"
    )  # ranked now: small
    total = BIG_INCIDENT + 300  # five of the six names link into one incident (GPU memory stays apart)
    for first in range(100, total, 100):
        send(first, 100)
    held = []
    wait_until(
        lambda: held.append(Incident.objects.filter(ranking_held=True).exists()) or correlated(total),
        timeout=60,
        what=f"{total} alerts correlated",
    )
    held.append(Incident.objects.filter(ranking_held=True).exists())  # the last run may have held it
    assert not Alert.objects.filter(
        integration=integration, incident=None
    ).exists()  # every alert in its incident at once
    incident = max(
        Incident.objects.filter(alerts__integration=integration).distinct(), key=lambda i: i.alerts.count()
    )
    assert incident.alerts.count() >= BIG_INCIDENT
    assert any(held), "the big incident's ranking was never held back"
    wait_until(
        lambda: not Incident.objects.filter(pk=incident.pk, ranking_held=True).exists(),
        timeout=RANK_EVERY + 30,
        what="the held ranking done by the queued run",
    )
    incident.refresh_from_db()
    assert incident.root_alert is not None and len(incident.chain) > 1
    assert incident.edges.exists() and incident.root_candidates.exists()
