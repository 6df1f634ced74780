"""Rootline's own figures from real processes: a delivery posted to a live server and read by a real
Celery worker on the broker is counted by that worker, under the queue its message came from, and
every scrape after it reads the same figures (they are in the database, not in a web process)."""

from __future__ import annotations

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from incidents.models import Delivery
from tests.conftest import wait_until

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def samples(url: str) -> dict[tuple[str, frozenset], float]:
    answer = requests.get(f"{url}/metrics", timeout=10)
    answer.raise_for_status()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def finished_from(figures: dict, queue: str) -> float:
    return sum(
        v
        for (name, labels), v in figures.items()
        if name == "rootline_tasks_finished_total" and dict(labels).get("queue") == queue
    )


def test_a_real_worker_counts_what_it_read_under_its_queue(live_server, make_integration, start_workers):
    start_workers(1)
    integration = make_integration("alertmanager")
    body = {
        "version": "4",
        "status": "firing",
        "receiver": "rootline",
        "groupKey": "{}:{}",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "VLLMQueueTimeHigh", "pod": f"vllm-{n}", "cluster": "it"},
                "annotations": {},
                "startsAt": f"2026-11-29T02:00:0{n}Z",
                "endsAt": "0001-01-01T00:00:00Z",
            }
            for n in range(3)
        ],
    }
    answer = requests.post(
        live_server.url + integration.path,
        json=body,
        headers={"Authorization": f"Bearer {integration.plain_token}"},
        timeout=10,
    )
    assert answer.status_code == 202, answer.text
    wait_until(
        lambda: not Delivery.objects.exclude(status="processed").exists(),
        timeout=60,
        what="the worker's read",
    )
    figures = wait_until(
        lambda: (
            (f := samples(live_server.url))[("rootline_deliveries_accepted_total", frozenset())] == 1
            and finished_from(f, "rootline") >= 1
            and f
        ),
        timeout=30,
        what="the worker's figures",
    )
    assert figures[("rootline_delivery_alerts_accepted_total", frozenset())] == 3
    assert figures[("rootline_ingest_delay_seconds_count", frozenset())] == 1
    assert figures[("rootline_queue_depth", frozenset({("queue", "rootline")}))] >= 0
    again = samples(live_server.url)
    assert {k: v for k, v in again.items() if k[0] == "rootline_deliveries_accepted_total"} == {
        k: v for k, v in figures.items() if k[0] == "rootline_deliveries_accepted_total"
    }
