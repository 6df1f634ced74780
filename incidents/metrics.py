"""`/metrics`: Rootline's own figures in the Prometheus text format, written by prometheus_client
from collectors that read them at each scrape: counts of stored rows, the counters, sums and
last-run times the web, the workers and beat add to (the `Tally` table,
incidents/services/tallies.py), and the depth of each Celery queue on the broker. None is an
in-process counter: every web worker answers the same."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.db.models import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from incidents import selectors
from incidents.models import Delivery, Integration, Tally
from incidents.services import tallies as t

logger = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Counted:
    """A tallied counter: its stored name, help, label names and the label values always written
    (0 until counted, so that `increase()` sees the first one)."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    known: tuple[tuple[str, ...], ...] = ((),)


COUNTERS = (
    Counted(
        t.DELIVERIES_ACCEPTED,
        "Deliveries read with their alerts, by a worker (or at once when the body held no alert); "
        "a replayed delivery counts again.",
    ),
    Counted(
        t.DELIVERIES_REJECTED,
        "Deliveries refused, by reason: unreadable (nothing usable in the body, kept as rejected), "
        "too_large (over ROOTLINE_MAX_BODY), throttled (over the integration's rate limit), "
        "unauthenticated (missing or wrong token, nothing stored), unstorable (a value the database "
        "refused).",
        ("reason",),
        tuple((reason,) for reason in t.REJECTION_REASONS),
    ),
    Counted(t.DELIVERY_ALERTS_ACCEPTED, "Alerts read from accepted deliveries."),
    Counted(
        t.DELIVERY_ALERTS_REJECTED,
        "Alerts of delivered bodies that could not be read (up to 1,000 a body, as stored).",
    ),
    Counted(t.CORRELATION_ERRORS, "Correlation runs that raised (the task retries them)."),
    Counted(
        t.EVIDENCE_ERRORS,
        "Evidence collections that raised, or that Prometheus or the local store answered with an "
        "error (PROMETHEUS_URL left unset is none).",
    ),
    Counted(t.REMEDIATION_CHECKS, "Remediation checks evaluated."),
    Counted(
        t.REMEDIATION_CHECKS_FAILED,
        "Remediation checks that could not evaluate (Prometheus unset, unreachable or refusing the query).",
    ),
    Counted(t.EMAILS_SENT, "Emails sent, by kind.", ("kind",), tuple((k,) for k in t.EMAIL_KINDS)),
    Counted(
        t.EMAILS_FAILED,
        "Emails the mail server refused or could not be reached for, by kind.",
        ("kind",),
        tuple((k,) for k in t.EMAIL_KINDS),
    ),
    Counted(
        t.TASKS_FINISHED,
        "Celery task runs finished, by the queue they came from, task and outcome (ok, retry, error).",
        ("queue", "task", "outcome"),
        (),
    ),
)
SUMMARIES = (
    (t.INGEST_DELAY, "How long deliveries waited between their receipt and a worker reading them."),
    (t.CORRELATION_RUN, "How long correlation runs took (those that raised included)."),
    (t.EVIDENCE_COLLECTION, "How long evidence collections took (those that raised included)."),
)


class TalliedFigures(Collector):
    """The figures of `incidents/services/tallies.py`, read in one query."""

    def collect(self) -> Iterator[Metric]:
        stored: dict[str, dict[str, float]] = {}
        for name, labels, value in Tally.objects.values_list("name", "labels", "value"):
            stored.setdefault(name, {})[labels] = value
        for counted in COUNTERS:
            family = CounterMetricFamily(counted.name, counted.help, labels=counted.labels)
            values = {key: 0.0 for key in counted.known}
            for labels, value in stored.get(counted.name, {}).items():
                key = label_values(labels, counted.labels)
                values[key] = values.get(key, 0.0) + value
            for key, value in sorted(values.items()):
                family.add_metric(list(key), value)
            yield family
        for name, help_text in SUMMARIES:
            yield SummaryMetricFamily(
                name,
                help_text,
                count_value=round(stored.get(f"{name}_count", {}).get("", 0.0)),
                sum_value=stored.get(f"{name}_sum", {}).get("", 0.0),
            )
        sweeps = GaugeMetricFamily(
            t.SWEEP_LAST_RUN,
            "When each of beat's sweeps last finished, in Unix seconds (0: never).",
            labels=["sweep"],
        )
        last_runs = {
            label_values(labels, ("sweep",))[0]: v for labels, v in stored.get(t.SWEEP_LAST_RUN, {}).items()
        }
        for sweep in sorted(set(t.SWEEPS.values())):
            sweeps.add_metric([sweep], last_runs.get(sweep, 0.0))
        yield sweeps
        yield GaugeMetricFamily(
            "rootline_sweep_interval_seconds",
            "How often beat runs its sweeps (ROOTLINE_SWEEP_SECONDS).",
            value=settings.SWEEP_SECONDS,
        )


def label_values(text: str, names: tuple[str, ...]) -> tuple[str, ...]:
    labels = json.loads(text) if text else {}
    return tuple(str(labels.get(name, "")) for name in names)


class QueueDepths(Collector):
    """Messages waiting in each Celery queue; no figure at all (never an error) without a Redis
    broker or when it does not answer."""

    def collect(self) -> Iterator[Metric]:
        depths = queue_depths()
        if depths is None:
            return
        family = GaugeMetricFamily(
            "rootline_queue_depth", "Messages waiting in each Celery queue (Redis LLEN).", labels=["queue"]
        )
        for queue, depth in depths.items():
            family.add_metric([queue], depth)
        yield family


REDIS_SCHEMES = ("redis", "rediss", "unix")
REDIS_TIMEOUT_SECONDS = 1.0


def queue_names() -> list[str]:
    """The queues Rootline's tasks go to: the default one, correlation's (`<queue>-N` per shard
    with ROOTLINE_CORRELATION_SHARDS > 1) and evidence's."""
    shards = settings.CORRELATION_SHARDS
    base = settings.CELERY_CORRELATION_QUEUE
    correlation = [base] if shards == 1 else [f"{base}-{n}" for n in range(shards)]
    return list(
        dict.fromkeys([settings.CELERY_TASK_DEFAULT_QUEUE, *correlation, settings.CELERY_EVIDENCE_QUEUE])
    )


def queue_depths() -> dict[str, int] | None:
    """Each queue's length on the Redis broker (a queue is a list named after it, behind the
    transport's `global_keyprefix` if one is set), in one round trip; None without a Redis broker
    or when it does not answer within a second."""
    url = settings.CELERY_BROKER_URL
    if not url or urlsplit(url).scheme not in REDIS_SCHEMES:
        return None
    prefix = (settings.CELERY_BROKER_TRANSPORT_OPTIONS or {}).get("global_keyprefix", "")
    names = queue_names()
    try:
        with redis.Redis.from_url(
            url, socket_connect_timeout=REDIS_TIMEOUT_SECONDS, socket_timeout=REDIS_TIMEOUT_SECONDS
        ) as client:
            pipeline = client.pipeline(transaction=False)
            for name in names:
                pipeline.llen(f"{prefix}{name}")
            lengths = pipeline.execute()
    except Exception as exc:  # noqa: BLE001 - a scrape answers without the figure, never fails
        logger.warning("queue depth not read from the broker: %s", exc.__class__.__name__)
        return None
    return {name: int(length) for name, length in zip(names, lengths, strict=True)}


def metrics_text() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    for collector in (StoredFigures(), TalliedFigures(), QueueDepths()):
        registry.register(collector)
    return generate_latest(registry)
