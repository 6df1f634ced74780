"""Rootline watching itself: the figures `/metrics` gains (incidents/services/tallies.py), read back
right after a real task run (Celery's eager `apply`, its signals included) or the service called as
the task calls it; the same on every request; the queue depths from Redis, left out when Redis
does not answer; and the rules pack reading only names `/metrics` writes."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from incidents.models import Incident, RemediationItem, Tally
from incidents.runbooks import RULES_DIR
from incidents.services.evidence import evidence_collect
from incidents.services.mail import mail_send
from incidents.services.remediation import remediation_check
from incidents.services.tallies import tally_add, tally_stamp, tally_timed
from incidents.tasks import correlate_key, process_delivery, requeue_stale_deliveries
from tests.conftest import require_broker
from tests.incidents.conftest import BAD_POD, DAY, FLEET, am_alert, am_body

pytestmark = pytest.mark.django_db

Samples = dict[tuple[str, frozenset], float]


def scrape(client: Client, **headers: str) -> Samples:
    answer = client.get("/metrics", **headers)
    assert answer.status_code == 200, answer.content
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.content.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def tallied(samples: Samples) -> Samples:
    """The samples kept in the database (not the lags, which move with the clock)."""
    return {key: v for key, v in samples.items() if not key[0].endswith("lag_seconds")}


def test_a_delivery_read_by_a_real_task_run_is_counted_with_its_alerts_and_its_wait(
    client, make_integration, post_hook, django_capture_on_commit_callbacks
):
    integration = make_integration()
    body = am_body(am_alert("KVCacheFragmentationHigh", f"{DAY}T01:45:00Z", pod=BAD_POD, **FLEET))
    with django_capture_on_commit_callbacks(execute=False):  # the enqueue is left to this test
        delivery_id = post_hook(integration, body).json()["delivery"]
    before = scrape(client)
    assert value(before, "rootline_deliveries_accepted_total") == 0
    assert value(before, "rootline_ingest_delay_seconds_count") == 0

    with django_capture_on_commit_callbacks(execute=True):
        process_delivery.apply(args=(delivery_id,))

    after = scrape(client)
    assert value(after, "rootline_deliveries_accepted_total") == 1
    assert value(after, "rootline_delivery_alerts_accepted_total") == 1
    assert value(after, "rootline_delivery_alerts_rejected_total") == 0
    assert value(after, "rootline_ingest_delay_seconds_count") == 1
    assert 0 <= value(after, "rootline_ingest_delay_seconds_sum") < 60
    assert (
        value(
            after,
            "rootline_tasks_finished_total",
            queue="rootline",
            task="incidents.process_delivery",
            outcome="ok",
        )
        == 1
    )
    assert all(
        value(after, "rootline_deliveries_rejected_total", reason=reason) == 0
        for reason in ("unreadable", "too_large", "throttled", "unauthenticated", "unstorable")
    )


def test_a_correlation_run_is_timed_and_counted_under_its_queue(
    client, make_integration, post_hook, django_capture_on_commit_callbacks
):
    from incidents.models import Alert

    integration = make_integration()
    body = am_body(
        am_alert("LLMContainerOOMKilled", f"{DAY}T02:00:00Z", pod=BAD_POD, container="vllm", **FLEET)
    )
    with django_capture_on_commit_callbacks(execute=False):  # stored and read, not correlated yet
        process_delivery(post_hook(integration, body).json()["delivery"])
    key = Alert.objects.get().correlation_key

    with django_capture_on_commit_callbacks(execute=True):
        correlate_key.apply(args=(key,))

    samples = scrape(client)
    assert value(samples, "rootline_correlation_run_seconds_count") == 1
    assert value(samples, "rootline_correlation_run_seconds_sum") > 0
    assert value(samples, "rootline_correlation_errors_total") == 0
    queue = "rootline-correlation"
    assert (
        value(
            samples,
            "rootline_tasks_finished_total",
            queue=queue,
            task="incidents.correlate_key",
            outcome="ok",
        )
        == 1
    )
    assert Alert.objects.get().incident_id is not None


def test_refused_deliveries_are_counted_by_reason(
    client, make_integration, post_hook, settings, django_capture_on_commit_callbacks
):
    from django.core.cache import cache

    cache.clear()
    integration = make_integration(rate_limit=1)
    with django_capture_on_commit_callbacks(execute=False):
        assert post_hook(integration, am_body(am_alert("A", f"{DAY}T01:00:00Z"))).status_code == 202
    with django_capture_on_commit_callbacks(execute=True):
        assert post_hook(integration, b"{not json").status_code == 400
        assert (
            post_hook(integration, am_body(am_alert("B", f"{DAY}T01:00:00Z")), token="wrong").status_code
            == 401
        )
        assert (
            post_hook(integration, am_body(am_alert("C", f"{DAY}T01:00:00Z"))).status_code == 503
        )  # throttled
        settings.MAX_BODY = 100
        assert post_hook(integration, am_body(am_alert("D" * 200, f"{DAY}T01:00:00Z"))).status_code == 413

    samples = scrape(client)
    assert {
        reason: value(samples, "rootline_deliveries_rejected_total", reason=reason)
        for reason in ("unreadable", "too_large", "throttled", "unauthenticated", "unstorable")
    } == {"unreadable": 1, "too_large": 1, "throttled": 1, "unauthenticated": 1, "unstorable": 0}
    assert value(samples, "rootline_deliveries_accepted_total") == 0  # the first one waits for a worker


def test_beats_sweep_is_stamped_when_its_task_ran(client, django_capture_on_commit_callbacks):
    assert value(scrape(client), "rootline_sweep_last_run_timestamp_seconds", sweep="deliveries") == 0
    before = time.time()
    with django_capture_on_commit_callbacks(execute=True):
        requeue_stale_deliveries.apply()
    samples = scrape(client)
    assert (
        before
        <= value(samples, "rootline_sweep_last_run_timestamp_seconds", sweep="deliveries")
        <= time.time()
    )
    assert value(samples, "rootline_sweep_last_run_timestamp_seconds", sweep="correlation") == 0
    assert value(samples, "rootline_sweep_interval_seconds") == 60
    assert (
        value(
            samples,
            "rootline_tasks_finished_total",
            queue="rootline",
            task="incidents.requeue_stale_deliveries",
            outcome="ok",
        )
        == 1
    )


def test_evidence_collections_are_timed_and_prometheus_errors_counted(
    client, make_integration, deliver, settings, django_capture_on_commit_callbacks
):
    integration = make_integration()
    deliver(
        integration, am_body(am_alert("KVCacheFragmentationHigh", f"{DAY}T01:45:00Z", pod=BAD_POD, **FLEET))
    )
    incident = Incident.objects.get()
    settings.PROMETHEUS_URL = ""
    with django_capture_on_commit_callbacks(execute=True):
        evidence_collect(incident_id=incident.pk)  # no Prometheus configured: no error
    samples = scrape(client)
    assert value(samples, "rootline_evidence_collection_seconds_count") == 1
    assert value(samples, "rootline_evidence_errors_total") == 0

    settings.PROMETHEUS_URL = "http://127.0.0.1:1"  # nothing listens: refused at once
    with django_capture_on_commit_callbacks(execute=True):
        evidence_collect(incident_id=incident.pk)
    samples = scrape(client)
    assert value(samples, "rootline_evidence_collection_seconds_count") == 2
    assert value(samples, "rootline_evidence_errors_total") == 1


def test_remediation_checks_and_emails_are_counted_run_and_failed(
    client, settings, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    incident = Incident.objects.create(title="frag", started_at=timezone.now(), severity="critical")
    item = RemediationItem.objects.create(
        incident=incident,
        title="fix",
        due_at=timezone.now(),
        status="done",
        done_at=timezone.now(),
        check_expr="up",
    )
    settings.PROMETHEUS_URL = ""
    with django_capture_on_commit_callbacks(execute=True):
        remediation_check(item=item)
        mail_send(kind="review", subject="s", message="m", recipients=["a@example.com"])
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2
    with pytest.raises(OSError), django_capture_on_commit_callbacks(execute=True):
        mail_send(kind="remediation", subject="s", message="m", recipients=["b@example.com"])

    samples = scrape(client)
    assert value(samples, "rootline_remediation_checks_total") == 1
    assert value(samples, "rootline_remediation_checks_failed_total") == 1  # PROMETHEUS_URL unset
    assert value(samples, "rootline_emails_sent_total", kind="review") == 1
    assert value(samples, "rootline_emails_failed_total", kind="remediation") == 1
    assert value(samples, "rootline_emails_sent_total", kind="remediation") == 0


def test_sums_add_up_last_run_times_replace_and_a_raising_block_is_an_error(
    client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        tally_add("rootline_deliveries_accepted", 2)
        tally_add("rootline_deliveries_accepted", 3)
        tally_stamp("rootline_sweep_last_run_timestamp_seconds", 100.0, sweep="evidence")
        tally_stamp("rootline_sweep_last_run_timestamp_seconds", 50.0, sweep="evidence")
        with (
            pytest.raises(ValueError),
            tally_timed("rootline_correlation_run_seconds", errors="rootline_correlation_errors"),
        ):
            int("not a number")
    samples = scrape(client)
    assert value(samples, "rootline_deliveries_accepted_total") == 5
    assert value(samples, "rootline_sweep_last_run_timestamp_seconds", sweep="evidence") == 50
    assert value(samples, "rootline_correlation_errors_total") == 1
    assert value(samples, "rootline_correlation_run_seconds_count") == 1
    assert Tally.objects.filter(name="rootline_deliveries_accepted").count() == 1


def test_a_rolled_back_batch_counts_nothing(client, django_capture_on_commit_callbacks):
    from django.db import transaction

    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            tally_add("rootline_deliveries_accepted", 7)
            raise RuntimeError("the batch failed")
        tally_add("rootline_deliveries_accepted", 1)
    assert value(scrape(client), "rootline_deliveries_accepted_total") == 1


def test_two_requests_read_the_same_figures(make_integration, post_hook, django_capture_on_commit_callbacks):
    integration = make_integration()
    with django_capture_on_commit_callbacks(execute=True):
        post_hook(integration, b"[]")
        post_hook(integration, b"{}", token="nope")
        requeue_stale_deliveries.apply()
    first, second = scrape(Client()), scrape(Client())
    assert tallied(first) == tallied(second)
    assert value(first, "rootline_deliveries_rejected_total", reason="unauthenticated") == 1


def test_the_metrics_token_still_closes_the_new_figures(client, settings):
    settings.METRICS_TOKEN = "scrape-me-9"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    samples = scrape(client, HTTP_AUTHORIZATION="Bearer scrape-me-9")
    assert value(samples, "rootline_deliveries_accepted_total") == 0


@pytest.fixture
def own_queues(settings):
    """Queue names of this test only, on the configured Redis broker, removed afterwards."""
    import redis

    url = require_broker()
    settings.CELERY_BROKER_URL = url
    prefix = f"test-depth-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = f"{prefix}-default"
    settings.CELERY_CORRELATION_QUEUE = f"{prefix}-correlation"
    settings.CELERY_EVIDENCE_QUEUE = f"{prefix}-evidence"
    client = redis.Redis.from_url(url)
    yield client, prefix
    client.delete(*client.keys(f"{prefix}-*") or ["-"])


def test_queue_depth_is_read_from_redis_for_every_queue_and_shard(client, settings, own_queues):
    broker, prefix = own_queues
    settings.CORRELATION_SHARDS = 2
    broker.rpush(f"{prefix}-default", "m1", "m2", "m3")
    broker.rpush(f"{prefix}-correlation-1", "m1")
    samples = scrape(client)
    depths = {
        dict(labels)["queue"]: v for (name, labels), v in samples.items() if name == "rootline_queue_depth"
    }
    assert depths == {
        f"{prefix}-default": 3,
        f"{prefix}-correlation-0": 0,
        f"{prefix}-correlation-1": 1,
        f"{prefix}-evidence": 0,
    }


@pytest.mark.parametrize(
    "broker", [None, "redis://127.0.0.1:1/0", "amqp://guest@127.0.0.1:1//"], ids=["none", "down", "not-redis"]
)
def test_queue_depth_is_left_out_without_an_answering_redis(client, settings, broker):
    settings.CELERY_BROKER_URL = broker
    started = time.monotonic()
    samples = scrape(client)
    assert time.monotonic() - started < 5
    assert not any(name == "rootline_queue_depth" for name, _ in samples)
    assert value(samples, "rootline_deliveries_accepted_total") == 0


def test_the_rules_pack_reads_only_names_metrics_writes(client, django_capture_on_commit_callbacks):
    """Every `rootline_*` series rules/rootline.yml reads is written by /metrics once a task ran
    (the queue depth only with a Redis broker, so it is named here)."""
    with django_capture_on_commit_callbacks(execute=True):
        requeue_stale_deliveries.apply()
    written = {name for name, _ in scrape(client)} | {"rootline_queue_depth"}
    read = set(re.findall(r"\brootline_[a-z_]+", (RULES_DIR / "rootline.yml").read_text()))
    assert read and read <= written, sorted(read - written)
