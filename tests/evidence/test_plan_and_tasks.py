"""What an incident asks for (window, step, PromQL), and the task and enqueue around the service."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from types import SimpleNamespace
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import transaction

from incidents import flow
from incidents.catalog import catalog
from incidents.evidence import queries
from incidents.flow import evidence_enqueue
from incidents.services.evidence import evidence_collect, evidence_window
from incidents.tasks import collect_evidence

T0 = datetime(2026, 11, 20, 1, 0, tzinfo=UTC)


def alert(minutes: float, *, ends: float | None = None, status: str = "resolved"):
    return SimpleNamespace(
        starts_at=T0 + timedelta(minutes=minutes),
        status=status,
        ends_at=T0 + timedelta(minutes=ends) if ends is not None else None,
    )


def test_window_is_an_hour_before_the_first_alert_to_15_minutes_after_the_last():
    window = evidence_window([alert(0, ends=10), alert(20, ends=30)], now=T0 + timedelta(days=1))
    assert window.start == (T0 - timedelta(minutes=60)).timestamp()
    assert window.end == (T0 + timedelta(minutes=45)).timestamp()
    assert window.step == 15


def test_a_firing_incident_runs_to_now_and_a_long_one_coarsens_the_step():
    now = T0 + timedelta(hours=2)
    window = evidence_window([alert(0, status="firing")], now=now)
    assert window.end <= now.timestamp() and window.step == 15
    long = evidence_window([alert(0, ends=60 * 24 * 3)], now=T0 + timedelta(days=10))
    assert long.step % 15 == 0 and (long.end - long.start) / long.step + 1 <= 1000


def test_the_plan_scopes_by_the_deployment_and_uses_real_metric_names():
    scope = queries.incident_scope(
        [
            {
                "alertname": "KVCacheFragmentationHigh",
                "namespace": "llm",
                "pod": "vllm-llama-7d9f8b6c4-x2k9p",
                "model_name": "meta/llama-3-70b",
            },
            {"alertname": "LLMTTFTP99High", "namespace": "llm", "model_name": "meta/llama-3-70b"},
        ]
    )
    plan = queries.plan(scope, ["kv_fragmentation", "slo_tpot", "preemption"], catalog(), step=15)
    by_signal: dict[str, list[str]] = {}
    for query in plan:
        by_signal.setdefault(query.signal, []).append(query.promql)

    pods = 'namespace="llm",pod=~"vllm-llama-.*"'
    assert f"llm_kv_cache_fragmentation_ratio{{{pods}}}" in by_signal["kv_fragmentation"]
    assert f"vllm:kv_cache_usage_perc{{{pods}}}" in by_signal["kv_pool_usage"]
    assert (
        f"histogram_quantile(0.99, sum by (le, namespace, model_name) "
        f"(rate(vllm:time_to_first_token_seconds_bucket{{{pods}}}[2m])))"
    ) in by_signal["ttft_p99"]
    assert any("vllm:request_time_per_output_token_seconds_bucket" in q for q in by_signal["tpot_p99"])
    assert any(
        q.startswith("histogram_quantile(0.99,")
        and " - histogram_quantile(0.5," in q
        and "vllm:inter_token_latency_seconds_bucket" in q
        for q in by_signal["itl_jitter"]
    )
    assert f"rate(vllm:num_preemptions_total{{{pods}}}[2m])" in by_signal["preemptions"]
    assert (
        f"sum by (namespace, model_name) (rate(vllm:request_queue_time_seconds_sum{{{pods}}}[2m])) / "
        f"sum by (namespace, model_name) (rate(vllm:request_queue_time_seconds_count{{{pods}}}[2m]))"
    ) in by_signal["queue_wait"]
    dcgm = 'DCGM_FI_DEV_FB_USED{pod=~"vllm-llama-.*"}'
    assert (
        f'{dcgm} / ({dcgm} + DCGM_FI_DEV_FB_FREE{{pod=~"vllm-llama-.*"}})' in by_signal["framebuffer_ratio"]
    )
    # renamed vLLM metrics are read only when the new name answers nothing
    old = next(q for q in plan if q.metric == "vllm:gpu_cache_usage_perc")
    assert old.fallback_of == f"vllm:kv_cache_usage_perc{{{pods}}}"
    # dcgm-exporter without honorLabels: exported_pod, read only if pod found nothing
    exported = next(
        q for q in plan if q.signal == "framebuffer_headroom" and q.matchers[0][0] == "exported_pod"
    )
    assert exported.fallback_of == 'DCGM_FI_DEV_FB_FREE{pod=~"vllm-llama-.*"}'


def test_the_model_scopes_latency_when_no_pod_is_known():
    scope = queries.incident_scope(
        [{"alertname": "LLMTTFTP99High", "namespace": "llm", "model_name": "meta/llama-3.1-8b"}]
    )
    (ttft,) = [
        q
        for q in queries.plan(scope, ["slo_ttft"], catalog(), step=15)
        if q.signal == "ttft_p99" and q.metric == "vllm:time_to_first_token_seconds"
    ]
    assert 'model_name=~"(.+/)?(llama-3\\\\.1-8b)"' in ttft.promql


def test_an_incident_without_a_place_queries_nothing():
    scope = queries.incident_scope([{"alertname": "CertificateExpiringSoon", "cluster": "prod"}])
    assert queries.plan(scope, ["other"], catalog(), step=15) == []


@pytest.mark.django_db
def test_collect_evidence_task_is_named_and_quiet_for_a_missing_incident():
    assert collect_evidence.name == "incidents.collect_evidence"
    assert collect_evidence.max_retries and collect_evidence.autoretry_for
    assert collect_evidence(987654) is None
    assert evidence_collect(incident_id=987654).skipped == "gone"


@pytest.mark.django_db
def test_evidence_enqueue_waits_for_commit_and_collapses_repeats(
    settings, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    cache.delete(flow.evidence_pending_flag(7))
    cache.delete(
        flow.evidence_started_key(7)
    )  # another test's collection of an incident 7 (the demo's) would delay the first
    with mock.patch("incidents.tasks.collect_evidence.apply_async") as enqueue:
        with django_capture_on_commit_callbacks(execute=True):
            with transaction.atomic():
                evidence_enqueue([7, 7])
                assert cache.get(flow.evidence_pending_flag(7)) is None
                enqueue.assert_not_called()
        enqueue.assert_called_once_with(
            (7,), countdown=flow.SETTLE_SECONDS
        )  # a burst of changes rides on one
        with django_capture_on_commit_callbacks(execute=True):
            evidence_enqueue([7])  # still pending: nothing more
        enqueue.assert_called_once()
        evidence_collect(incident_id=7)  # a run clears the flag, so the next change enqueues again,
        with django_capture_on_commit_callbacks(execute=True):
            evidence_enqueue([7])
        assert enqueue.call_count == 2
        countdown = enqueue.call_args.kwargs["countdown"]  # but no sooner than a minute after that run began
        assert flow.MIN_INTERVAL_SECONDS - 5 < countdown <= flow.MIN_INTERVAL_SECONDS
    cache.delete(flow.evidence_pending_flag(7))
    cache.delete(flow.evidence_started_key(7))


@pytest.mark.django_db
def test_evidence_enqueue_reads_the_cache_once_for_many_incidents(
    settings, django_capture_on_commit_callbacks
):
    """A storm's correlation run touches dozens of incidents, most with a collection pending:
    one read of every flag, then a flag set and a task only for the others."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    ids = list(range(9001, 9031))
    for pk in ids:
        cache.delete(flow.evidence_pending_flag(pk))
        cache.delete(flow.evidence_started_key(pk))
    for pk in ids[::3]:
        cache.set(flow.evidence_pending_flag(pk), 1)
    cache.set(flow.evidence_started_key(ids[1]), time.time() - 20)
    reads, inside = [], []
    get_many, get = cache.get_many, cache.get

    def counted_get_many(keys):  # one read, however the backend serves it (locmem: a get per key)
        reads.append(len(keys))
        inside.append(True)
        try:
            return get_many(keys)
        finally:
            inside.pop()

    def counted_get(*args, **kwargs):
        if not inside:
            reads.append(1)
        return get(*args, **kwargs)

    with (
        mock.patch("incidents.tasks.collect_evidence.apply_async") as enqueue,
        mock.patch("incidents.tasks.collect_evidence_each.apply_async") as enqueue_each,
        mock.patch.object(cache, "get_many", side_effect=counted_get_many),
        mock.patch.object(cache, "get", side_effect=counted_get),
    ):
        with django_capture_on_commit_callbacks(execute=True):
            evidence_enqueue(ids)
    assert reads == [2 * len(ids)]
    # the incidents due at the same moment ride on one message, a lone one on its own task
    assert enqueue_each.call_count == 1 and enqueue.call_count == 1
    queued = {call.args[0][0]: call.kwargs["countdown"] for call in enqueue.call_args_list}
    queued.update(
        {pk: call.kwargs["countdown"] for call in enqueue_each.call_args_list for pk in call.args[0][0]}
    )
    assert sorted(queued) == [pk for pk in ids if pk not in ids[::3]]
    assert queued[ids[2]] == flow.SETTLE_SECONDS
    assert flow.MIN_INTERVAL_SECONDS - 25 < queued[ids[1]] <= flow.MIN_INTERVAL_SECONDS - 20
    assert all(cache.get(flow.evidence_pending_flag(pk)) == 1 for pk in ids)
    for pk in ids:
        cache.delete(flow.evidence_pending_flag(pk))
        cache.delete(flow.evidence_started_key(pk))


@pytest.mark.django_db
def test_a_second_collection_upserts_instead_of_duplicating(story_file, story_incident, settings):
    from django.core.management import call_command

    from incidents.models import EvidenceSeries

    settings.PROMETHEUS_URL = None
    call_command("import_metrics", str(story_file), stdout=StringIO())
    incident = story_incident()
    evidence_collect(incident_id=incident.pk)
    before = sorted(
        EvidenceSeries.objects.filter(incident=incident).values_list(
            "id", "signal", "labels_key", "point_count"
        )
    )
    evidence_collect(incident_id=incident.pk)
    after = sorted(
        EvidenceSeries.objects.filter(incident=incident).values_list(
            "id", "signal", "labels_key", "point_count"
        )
    )
    assert after == before and len(before) > 20


@pytest.mark.django_db
def test_collect_evidence_each_queues_one_collection_per_incident():
    from incidents.tasks import collect_evidence_each

    with mock.patch("incidents.tasks.collect_evidence.delay") as collect_one:
        collect_evidence_each([4, 9, 11])
    assert [call.args for call in collect_one.call_args_list] == [(4,), (9,), (11,)]


@pytest.fixture
def clusters(make_integration):
    """Two clusters' incidents: gpu-a with an alert not yet correlated, gpu-b all correlated."""
    from incidents.models import Alert, Incident

    integration = make_integration()
    made = {}
    for key, waiting in (("gpu-a", True), ("gpu-b", False)):
        incident = Incident.objects.create(title=key, correlation_key=key, started_at=T0, last_alert_at=T0)
        for number, correlated in enumerate((True, not waiting)):
            Alert.objects.create(
                fingerprint=f"{key}-{number}",
                starts_at=T0,
                status="firing",
                alertname="TargetDown",
                labels={"alertname": "TargetDown", "cluster": key},
                integration=integration,
                received_at=T0,
                correlation_key=key,
                correlated=correlated,
                incident=incident if correlated else None,
            )
        made[key] = incident
        cache.delete(flow.evidence_pending_flag(incident.pk))
    return made


@pytest.mark.django_db
def test_a_collection_waits_while_its_cluster_has_alerts_waiting_for_correlation(settings, clusters):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    waiting, caught_up = clusters["gpu-a"].pk, clusters["gpu-b"].pk
    with (
        mock.patch("incidents.tasks.evidence_collect") as collected,
        mock.patch("incidents.tasks.collect_evidence.apply_async") as again,
    ):
        collect_evidence(waiting)
        collected.assert_not_called()
        again.assert_called_once_with(
            (waiting,),
            {"waited": flow.WAIT_FOR_CORRELATION_SECONDS},
            countdown=flow.WAIT_FOR_CORRELATION_SECONDS,
        )
        assert cache.get(flow.evidence_pending_flag(waiting)) == 1  # changes until then ride on it
        collect_evidence(caught_up)
        collected.assert_called_once_with(incident_id=caught_up)
        # a cluster that never stops alerting still gets its evidence, after a bounded wait
        collect_evidence(waiting, waited=flow.WAIT_FOR_CORRELATION_AT_MOST_SECONDS)
        assert collected.call_args_list[-1] == mock.call(incident_id=waiting)
        assert again.call_count == 1
    from incidents.models import Alert

    Alert.objects.filter(correlation_key="gpu-a").update(correlated=True)
    with mock.patch("incidents.tasks.evidence_collect") as collected:
        collect_evidence(waiting)
    collected.assert_called_once_with(incident_id=waiting)
    cache.delete(flow.evidence_pending_flag(waiting))


@pytest.mark.django_db
def test_collect_evidence_each_puts_off_the_waiting_clusters_together(settings, clusters, make_integration):
    from incidents.models import Incident

    settings.CELERY_TASK_ALWAYS_EAGER = False
    other = Incident.objects.create(
        title="gpu-a too", correlation_key="gpu-a", started_at=T0, last_alert_at=T0
    )
    ids = [clusters["gpu-a"].pk, clusters["gpu-b"].pk, other.pk]
    from incidents.tasks import collect_evidence_each

    with (
        mock.patch("incidents.tasks.collect_evidence.delay") as collect_one,
        mock.patch("incidents.tasks.collect_evidence_each.apply_async") as again,
    ):
        collect_evidence_each(ids, waited=20)
    assert [call.args for call in collect_one.call_args_list] == [(clusters["gpu-b"].pk,)]
    again.assert_called_once_with(
        ([clusters["gpu-a"].pk, other.pk],), {"waited": 30}, countdown=flow.WAIT_FOR_CORRELATION_SECONDS
    )
    for pk in ids:
        cache.delete(flow.evidence_pending_flag(pk))


@pytest.mark.django_db
def test_without_a_broker_collections_never_wait(settings, clusters):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert flow.evidence_collect_now([clusters["gpu-a"].pk]) == [clusters["gpu-a"].pk]
