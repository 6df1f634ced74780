"""`/metrics`: Rootline's own figures in the Prometheus text format, written by prometheus_client
from a collector that reads them from the database at each scrape (they are stored counts, not
in-process counters: every web worker answers the same)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from incidents import selectors
from incidents.models import Delivery, Integration


class StoredFigures(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        deliveries = GaugeMetricFamily(
            "rootline_deliveries", "Webhook deliveries stored, by status.", labels=["status"]
        )
        for status, count in (
            Delivery.objects.values_list("status").annotate(n=Count("id")).order_by("status")
        ):
            deliveries.add_metric([status], count)
        yield deliveries
        alerts = GaugeMetricFamily(
            "rootline_alerts", "Alert occurrences stored, by status.", labels=["status"]
        )
        for status, count in selectors.alerts_by_status().items():
            alerts.add_metric([str(status)], count)
        yield alerts
        truncated = selectors.truncated_since()
        yield GaugeMetricFamily(
            "rootline_delivery_truncated_alerts",
            "Alerts senders left out of stored bodies (Alertmanager's truncatedAlerts, max_alerts): never "
            "sent, so never stored; summed over bodies (a group re-sent cut counts again).",
            value=truncated.alerts,
        )
        yield GaugeMetricFamily(
            "rootline_delivery_truncated_bodies",
            "Stored bodies a sender cut (truncatedAlerts > 0).",
            value=truncated.bodies,
        )
        yield GaugeMetricFamily(
            "rootline_integrations", "Configured integrations.", value=Integration.objects.count()
        )
        waiting = selectors.backlog()
        for name, help_text, value in (
            ("rootline_ingest_waiting_deliveries", "Deliveries stored and not read yet.", waiting.deliveries),
            (
                "rootline_ingest_lag_seconds",
                "Age of the oldest delivery not read yet (0: none waits).",
                waiting.deliveries_lag,
            ),
            (
                "rootline_correlation_waiting_alerts",
                "Stored alerts no correlation run has taken yet "
                f"(counted up to {selectors.BACKLOG_COUNT_LIMIT}).",
                waiting.alerts,
            ),
            (
                "rootline_correlation_lag_seconds",
                "Age of the oldest stored alert no correlation run has taken yet (0: none waits).",
                waiting.alerts_lag,
            ),
        ):
            yield GaugeMetricFamily(name, help_text, value=value)


def metrics_text() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoredFigures())
    return generate_latest(registry)
