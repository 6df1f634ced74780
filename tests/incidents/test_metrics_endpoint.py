"""/metrics: the Prometheus text format prometheus_client writes, every family Rootline exports,
open while ROOTLINE_METRICS_TOKEN is unset and only with that bearer token once it is set
(the figures counted by tasks: tests/incidents/test_own_metrics.py)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.django_db

FAMILIES = {
    "rootline_deliveries",
    "rootline_alerts",
    "rootline_delivery_truncated_alerts",
    "rootline_delivery_truncated_bodies",
    "rootline_integrations",
    "rootline_ingest_waiting_deliveries",
    "rootline_ingest_lag_seconds",
    "rootline_correlation_waiting_alerts",
    "rootline_correlation_lag_seconds",
    "rootline_sweep_last_run_timestamp_seconds",
    "rootline_sweep_interval_seconds",
}
# Kept in the database by the processes that count them (incidents/services/tallies.py).
COUNTERS = {
    "rootline_deliveries_accepted",
    "rootline_deliveries_rejected",
    "rootline_delivery_alerts_accepted",
    "rootline_delivery_alerts_rejected",
    "rootline_correlation_errors",
    "rootline_evidence_errors",
    "rootline_remediation_checks",
    "rootline_remediation_checks_failed",
    "rootline_emails_sent",
    "rootline_emails_failed",
    "rootline_tasks_finished",
}
SUMMARIES = {
    "rootline_ingest_delay_seconds",
    "rootline_correlation_run_seconds",
    "rootline_evidence_collection_seconds",
}


def test_metrics_parse_as_prometheus_text_with_every_family(client, make_integration, settings):
    settings.CELERY_BROKER_URL = (
        None  # the queue depths need a Redis broker (tests/incidents/test_own_metrics.py)
    )
    make_integration()
    answer = client.get("/metrics")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/plain; version=")
    families = {family.name: family for family in text_string_to_metric_families(answer.content.decode())}
    assert set(families) == FAMILIES | COUNTERS | SUMMARIES
    assert all(family.documentation for family in families.values())
    assert {name for name, family in families.items() if family.type == "gauge"} == FAMILIES
    assert {name for name, family in families.items() if family.type == "counter"} == COUNTERS
    assert {name for name, family in families.items() if family.type == "summary"} == SUMMARIES
    assert families["rootline_integrations"].samples[0].value == 1


def test_a_metrics_token_closes_the_endpoint_to_scrapers_without_it(client, settings):
    settings.METRICS_TOKEN = "scrape-me-9"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic scrape-me-9").status_code == 401
    answer = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-9")
    assert answer.status_code == 200 and b"rootline_alerts" in answer.content
