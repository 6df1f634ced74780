"""Rootline says when it is behind: deliveries not read and alerts not in an incident yet, with
how long the oldest has waited, on the triage and alerts pages (once it is 5 s or more) and in
/metrics (always)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from incidents import selectors
from incidents.models import Alert, Delivery

pytestmark = pytest.mark.django_db
BEHIND = "Rootline is behind what arrives."


def waiting_alert(hook, number: int, *, waited: float, correlated: bool = False) -> Alert:
    now = timezone.now()
    return Alert.objects.create(
        fingerprint=f"fp{number}",
        starts_at=now - timedelta(minutes=5),
        status="firing",
        labels={"alertname": "LLMQueueWaitHigh", "pod": f"vllm-{number}"},
        integration=hook,
        received_at=now - timedelta(seconds=waited),
        correlation_key="gpu-eu-01",
        correlated=correlated,
    )


def waiting_delivery(hook, *, waited: float, status: str = Delivery.Status.PENDING) -> Delivery:
    return Delivery.objects.create(
        integration=hook, body=b"{}", status=status, received_at=timezone.now() - timedelta(seconds=waited)
    )


def metric(text: str, name: str) -> float:
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


@pytest.fixture
def viewer(client):
    client.force_login(User.objects.create_user("viewer"))
    return client


def test_nothing_waiting_is_no_notice_and_zero_in_metrics(make_integration, viewer):
    hook = make_integration()
    waiting_alert(hook, 1, waited=600, correlated=True)
    waiting_delivery(hook, waited=600, status=Delivery.Status.PROCESSED)
    assert selectors.backlog() == selectors.Backlog(0, 0.0, 0, 0.0, False)
    assert BEHIND not in viewer.get("/").content.decode()
    text = viewer.get("/metrics").content.decode()
    assert [
        metric(text, name)
        for name in (
            "rootline_ingest_waiting_deliveries",
            "rootline_ingest_lag_seconds",
            "rootline_correlation_waiting_alerts",
            "rootline_correlation_lag_seconds",
        )
    ] == [0, 0, 0, 0]


def test_alerts_waiting_for_correlation_are_said_with_the_oldest_wait(make_integration, viewer):
    hook = make_integration()
    for number, waited in enumerate((42, 30, 3)):
        waiting_alert(hook, number, waited=waited)
    waiting_alert(hook, 9, waited=900, correlated=True)
    waiting_delivery(hook, waited=12)
    waiting_delivery(hook, waited=1)
    backlog = selectors.backlog()
    assert (backlog.alerts, backlog.deliveries, backlog.alerts_capped) == (3, 2, False)
    assert 42 <= backlog.alerts_lag < 60 and 12 <= backlog.deliveries_lag < 30 and backlog.notable
    for page in ("/", "/alerts/"):
        html = viewer.get(page).content.decode()
        assert BEHIND in html
        assert "3 alerts received are not in an incident yet (the oldest has waited 4" in html
        assert "2 deliveries are not read yet (the oldest has waited 1" in html
    text = viewer.get("/metrics").content.decode()
    assert (
        metric(text, "rootline_correlation_waiting_alerts") == 3
        and metric(text, "rootline_ingest_waiting_deliveries") == 2
    )
    assert (
        42 <= metric(text, "rootline_correlation_lag_seconds") < 60
        and 12 <= metric(text, "rootline_ingest_lag_seconds") < 30
    )


def test_work_that_just_arrived_is_counted_but_not_a_notice(make_integration, viewer):
    hook = make_integration()
    waiting_alert(hook, 1, waited=0.5)
    waiting_delivery(hook, waited=0.2)
    backlog = selectors.backlog()
    assert (backlog.alerts, backlog.deliveries) == (1, 1) and not backlog.notable
    assert BEHIND not in viewer.get("/").content.decode()


def test_a_storms_backlog_is_counted_up_to_a_limit(make_integration, viewer, monkeypatch):
    monkeypatch.setattr(selectors, "BACKLOG_COUNT_LIMIT", 2)
    hook = make_integration()
    for number in range(3):
        waiting_alert(hook, number, waited=20)
    backlog = selectors.backlog()
    assert (backlog.alerts, backlog.alerts_capped) == (2, True)
    html = viewer.get("/").content.decode()
    assert "Over 2 alerts received are not in an incident yet (the oldest has waited at least 2" in html


def test_one_waiting_alert_reads_in_the_singular(make_integration, viewer):
    waiting_alert(make_integration(), 1, waited=8)
    html = viewer.get("/").content.decode()
    assert "1 alert received is not in an incident yet (the oldest has waited 8 s)." in html


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.4, "0 s"),
        (8.9, "8 s"),
        (59.99, "59 s"),
        (60, "1 min 0 s"),
        (252, "4 min 12 s"),
        (3599, "59 min 59 s"),
        (7260, "2 h 1 min"),
        (90061, "25 h 1 min"),
    ],
)
def test_a_wait_reads_in_seconds_minutes_or_hours(seconds, text):
    assert selectors.wait_text(seconds) == text


def test_a_stopped_worker_shows_hours_of_waiting(make_integration, viewer):
    waiting_alert(make_integration(), 1, waited=2 * 3600 + 75)
    assert "(the oldest has waited 2 h 1 min)." in viewer.get("/").content.decode()
