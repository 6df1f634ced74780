"""Evidence from a real Prometheus (Debian's 2.42) holding the story's history, backfilled with
promtool; and the local store answering the same queries with the same series."""

from __future__ import annotations

import math

import pytest
from django.core.management import call_command

from incidents.evidence.points import finite, unpack_points
from incidents.models import EvidenceGap, EvidenceSeries
from incidents.services.evidence import evidence_collect
from incidents.timeline import incident_evidence
from tests.conftest import free_port
from tests.evidence.conftest import at, write_openmetrics

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def series(incident, signal: str, **labels) -> list[EvidenceSeries]:
    rows = EvidenceSeries.objects.filter(incident=incident, signal=signal).order_by("id")
    return [row for row in rows if all(row.labels.get(k) == v for k, v in labels.items())]


def points(row: EvidenceSeries) -> list[tuple[float, float]]:
    return finite(unpack_points(row.points))


def first_above(row: EvidenceSeries, threshold: float) -> float | None:
    return next((t for t, v in points(row) if v > threshold), None)


def test_collect_stores_the_story_from_backfilled_prometheus(backfilled_prometheus, story_incident, settings):
    settings.PROMETHEUS_URL = backfilled_prometheus
    incident = story_incident()

    result = evidence_collect(incident_id=incident.pk)

    assert result.gaps == [] and result.series > 20
    assert set(EvidenceSeries.objects.filter(incident=incident).values_list("source", flat=True)) == {
        "prometheus"
    }
    (fragmentation,) = series(incident, "kv_fragmentation", pod="pod-2")
    assert fragmentation.step_seconds == 15
    assert fragmentation.start.timestamp() >= at(45 - 60).timestamp()
    assert fragmentation.point_count <= 1000
    crossing = first_above(fragmentation, 0.25)
    assert at(30).timestamp() <= crossing <= at(30.5).timestamp()
    # The first red crossing, kept on the incident for the weekly review, is its durations' onset.
    incident.refresh_from_db()
    assert incident.first_red_at is not None and incident.first_red_at <= at(31)
    assert incident_evidence(incident).durations().onset == min(incident.first_red_at, incident.started_at)
    assert all(v > 0.25 for t, v in points(fragmentation) if at(31).timestamp() <= t < at(60).timestamp())
    for pod in ("pod-0", "pod-1", "pod-3"):
        (other,) = series(incident, "kv_fragmentation", pod=pod)
        assert max(v for _, v in points(other)) < 0.15

    # Every pod exports its KV pool: the bands go there, and no framebuffer ratio is kept.
    assert {row.labels["pod"] for row in series(incident, "kv_pool_usage")} == {
        "pod-0",
        "pod-1",
        "pod-2",
        "pod-3",
    }
    assert series(incident, "framebuffer_ratio") == []
    (headroom,) = series(incident, "framebuffer_headroom", pod="pod-2")
    assert min(v for _, v in points(headroom)) < 2048  # under the yellow line before the OOM

    (restarts,) = series(incident, "restarts", pod="pod-2")
    assert [v for t, v in points(restarts) if t < at(60).timestamp()] == [0.0] * len(
        [t for t, _ in points(restarts) if t < at(60).timestamp()]
    )
    assert first_above(restarts, 0.5) == at(60).timestamp()
    (oom,) = series(incident, "oom_killed", pod="pod-2")
    assert points(oom)[0][0] == at(60).timestamp()

    (ttft,) = series(incident, "ttft_p99")
    assert ttft.labels == {"namespace": "llm-serving", "model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    assert (
        "histogram_quantile(0.99, sum by (le, namespace, model_name) "
        "(rate(vllm:time_to_first_token_seconds_bucket{" in ttft.query
    )
    baseline = [v for t, v in points(ttft) if t < at(30).timestamp()]
    spike = [v for t, v in points(ttft) if at(62).timestamp() <= t <= at(75).timestamp()]
    assert max(baseline) < 2.0 < max(spike)

    (preemptions,) = series(incident, "preemptions", pod="pod-2")
    assert preemptions.query.startswith("rate(vllm:num_preemptions_total{")
    assert max(v for t, v in points(preemptions) if t < at(30).timestamp()) < 0.1
    assert max(v for t, v in points(preemptions) if at(50).timestamp() <= t < at(60).timestamp()) > 0.15


def test_the_local_store_answers_as_prometheus_does(
    backfilled_prometheus, story_file, story_incident, settings
):
    settings.PROMETHEUS_URL = backfilled_prometheus
    remote = story_incident()
    evidence_collect(incident_id=remote.pk)
    call_command("import_metrics", str(story_file))
    settings.PROMETHEUS_URL = None
    local = story_incident()
    evidence_collect(incident_id=local.pk)

    def keyed(incident):
        return {
            (row.signal, row.query, row.labels_key): row
            for row in EvidenceSeries.objects.filter(incident=incident)
        }

    from_prometheus, from_store = keyed(remote), keyed(local)
    assert set(from_store) == set(from_prometheus)
    assert {row.source for row in from_store.values()} == {"import"}
    for key, row in from_prometheus.items():
        theirs, ours = unpack_points(row.points), unpack_points(from_store[key].points)
        assert [t for t, _ in ours] == [t for t, _ in theirs], key
        for (_, a), (_, b) in zip(theirs, ours, strict=True):
            assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9), (
                key,
                a,
                b,
            )


def test_prometheus_down_records_a_gap_that_a_later_refresh_fills_and_clears(
    backfilled_prometheus, story_incident, settings
):
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    incident = story_incident()

    first = evidence_collect(incident_id=incident.pk)
    again = evidence_collect(incident_id=incident.pk)

    assert first.series == 0 and "kv_fragmentation" in first.gaps and again.gaps == first.gaps
    gap = EvidenceGap.objects.get(incident=incident, signal="kv_fragmentation")
    assert "unreachable" in gap.error and settings.PROMETHEUS_URL in gap.error
    assert gap.since < gap.last_tried  # since: the first failure, kept by the second

    settings.PROMETHEUS_URL = backfilled_prometheus
    filled = evidence_collect(incident_id=incident.pk)

    assert not EvidenceGap.objects.filter(incident=incident).exists()
    assert "kv_fragmentation" in filled.cleared
    (fragmentation,) = series(incident, "kv_fragmentation", pod="pod-2")
    assert fragmentation.source == "prometheus"


def test_a_refused_query_is_a_gap_for_its_signal_only(
    backfilled_prometheus, story_incident, settings, monkeypatch
):
    from incidents.evidence import queries

    settings.PROMETHEUS_URL = backfilled_prometheus
    broken = tuple(
        ("preemptions", queries.RATE, "vllm:num_preemptions_total", (("pod", "=~", "(unclosed"),), "pod")
        if entry[0] == "preemptions"
        else entry
        for entry in queries.UNBANDED
    )
    monkeypatch.setattr(queries, "UNBANDED", broken)  # Prometheus answers 400: error parsing regexp
    incident = story_incident()

    result = evidence_collect(incident_id=incident.pk)

    assert "preemptions" in result.gaps and "kv_fragmentation" not in result.gaps
    assert "refused the query" in EvidenceGap.objects.get(incident=incident, signal="preemptions").error
    assert series(incident, "kv_fragmentation", pod="pod-2")


def test_prometheus_first_and_the_local_store_for_what_it_lacks(
    backfilled_prometheus, story_incident, settings, tmp_path
):
    settings.PROMETHEUS_URL = backfilled_prometheus
    labels = 'namespace="llm-serving",pod="pod-0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
    lines = ["# TYPE vllm:request_queue_time_seconds histogram"]
    for minute in range(0, 121):
        t = at(minute).timestamp()
        count = minute * 60
        lines += [
            f'vllm:request_queue_time_seconds_bucket{{{labels},le="0.3"}} {count} {t:.0f}',
            f'vllm:request_queue_time_seconds_bucket{{{labels},le="+Inf"}} {count} {t:.0f}',
            f"vllm:request_queue_time_seconds_sum{{{labels}}} {count * 0.05:.3f} {t:.0f}",
            f"vllm:request_queue_time_seconds_count{{{labels}}} {count} {t:.0f}",
        ]
    call_command("import_metrics", str(write_openmetrics(tmp_path / "queue.om", lines)))
    incident = story_incident()

    evidence_collect(incident_id=incident.pk)

    (queue,) = series(incident, "queue_wait")
    assert queue.source == "import"
    assert all(math.isclose(v, 0.05) for _, v in points(queue))
    assert {
        row.source for row in EvidenceSeries.objects.filter(incident=incident).exclude(signal="queue_wait")
    } == {"prometheus"}
