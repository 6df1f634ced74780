"""What fires now is counted and listed over the firing alerts, not over every alert ever stored:
the alerts page's "N firing", `/api/v1/alerts/?status=firing` and `/metrics`' `rootline_alerts`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from incidents.models import Alert
from tests.conftest import require_postgres

pytestmark = pytest.mark.django_db


def stored(hook, count: int, status: str, *, offset: int = 0) -> None:
    now = timezone.now()
    Alert.objects.bulk_create(
        Alert(
            fingerprint=f"{status}{number}",
            starts_at=now - timedelta(minutes=number),
            status=status,
            ends_at=now if status == "resolved" else None,
            labels={"alertname": "LLMQueueWaitHigh", "pod": f"vllm-{number}"},
            integration=hook,
            received_at=now,
            correlation_key="gpu-eu-01",
            correlated=True,
        )
        for number in range(offset, offset + count)
    )


def alerts_metric(text: str) -> dict[str, int]:
    return {
        sample.labels["status"]: int(sample.value)
        for family in text_string_to_metric_families(text)
        if family.name == "rootline_alerts"
        for sample in family.samples
    }


@pytest.fixture
def viewer(client):
    client.force_login(User.objects.create_user("viewer"))
    return client


def test_metrics_give_both_statuses_even_before_any_alert(make_integration, viewer):
    assert alerts_metric(viewer.get("/metrics").content.decode()) == {"firing": 0, "resolved": 0}
    hook = make_integration()
    stored(hook, 3, "firing")
    stored(hook, 2, "resolved")
    assert alerts_metric(viewer.get("/metrics").content.decode()) == {"firing": 3, "resolved": 2}
    Alert.objects.filter(fingerprint="firing0").update(status="resolved", ends_at=timezone.now())
    assert alerts_metric(viewer.get("/metrics").content.decode()) == {"firing": 2, "resolved": 3}


def plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_firing_alerts_are_counted_and_listed_on_their_own_index(make_integration, viewer):
    """With a history of resolved alerts (and its statistics, as autovacuum keeps them), PostgreSQL
    reads the firing ones through `alert_firing_idx`; without the index, every row is read."""
    require_postgres()
    hook = make_integration()
    stored(hook, 20_000, "resolved")
    stored(hook, 30, "firing", offset=20_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE incidents_alert")
    count_sql, count_params = Alert.objects.firing().values("id").query.sql_with_params()
    assert "alert_firing_idx" in plan(f"SELECT count(*) FROM ({count_sql}) firing", list(count_params))
    listed = Alert.objects.firing().order_by("-starts_at", "-id")[:50]
    assert "alert_firing_idx" in listed.explain()

    page = viewer.get("/api/v1/alerts/?status=firing&page_size=10").json()
    assert page["count"] == 30 and all(alert["status"] == "firing" for alert in page["results"])
    assert [alert["fingerprint"] for alert in page["results"]] == [
        f"firing{number}" for number in range(20_000, 20_010)
    ]
