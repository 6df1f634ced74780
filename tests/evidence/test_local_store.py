"""`import_metrics` and the local series store: idempotent imports, merges, refused files, and
evidence built from the store when PROMETHEUS_URL is unset (the simulator's march-oom story)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from io import StringIO
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from incidents.evidence.local import LocalSource, bucket_quantile
from incidents.evidence.points import finite, unpack_points
from incidents.evidence.queries import EvidenceQuery
from incidents.models import Alert, Delivery, EvidenceGap, EvidenceSeries, Incident, LocalSeries
from incidents.services.evidence import evidence_collect
from tests.evidence.conftest import at, write_openmetrics

pytestmark = pytest.mark.django_db


def import_metrics(path) -> dict:
    out = StringIO()
    call_command("import_metrics", str(path), stdout=out)
    return json.loads(out.getvalue())


def snapshot() -> list[tuple]:
    return sorted(
        (r.pk, r.metric, r.labels_key, bytes(r.points), r.point_count, r.start, r.end)
        for r in LocalSeries.objects.all()
    )


def test_import_metrics_twice_changes_nothing(story_file):
    first = import_metrics(story_file)
    before = snapshot()
    second = import_metrics(story_file)

    assert first["created"] == first["series"] == 81 and first["samples"] == 38585
    assert second == {**first, "created": 0, "unchanged": 81}
    assert snapshot() == before


def test_a_later_import_merges_into_the_same_series(tmp_path):
    a = write_openmetrics(tmp_path / "a.om", ["# TYPE x gauge", 'x{pod="p"} 1 100', 'x{pod="p"} 2 115'])
    b = write_openmetrics(
        tmp_path / "b.om", ["# TYPE x gauge", 'x{pod="p"} 3 115', 'x{pod="p"} 4 130', 'x{pod="q"} 9 130']
    )
    import_metrics(a)
    result = import_metrics(b)

    assert (result["created"], result["updated"]) == (1, 1)
    row = LocalSeries.objects.get(metric="x", labels={"pod": "p"})
    assert unpack_points(row.points) == [(100.0, 1.0), (115.0, 3.0), (130.0, 4.0)]
    assert (row.start.timestamp(), row.end.timestamp(), row.point_count) == (100.0, 130.0, 3)


@pytest.mark.parametrize(
    "lines, message",
    [
        (["x 1 100"], "does not end with # EOF"),
        (["x 1", "# EOF"], "without a timestamp"),
        (["x 1 1763600000000", "# EOF"], "looks like milliseconds"),
        (["x{pod=unquoted} 1 100", "# EOF"], "line 1: not a sample"),
    ],
)
def test_import_metrics_refuses_what_promtool_refuses(tmp_path, lines, message):
    path = tmp_path / "bad.om"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match=message):
        call_command("import_metrics", str(path))
    assert not LocalSeries.objects.exists()


def test_labels_with_escapes_and_exemplars_are_read(tmp_path):
    path = write_openmetrics(
        tmp_path / "e.om",
        [
            "# TYPE c counter",
            'c_total{path="a\\"b\\\\c",le="+Inf"} 5 100 # {trace_id="x"} 1 99',
            'c_total{path="a\\"b\\\\c",le="+Inf"} NaN 115',
        ],
    )
    import_metrics(path)
    row = LocalSeries.objects.get(metric="c_total")
    assert row.labels == {"path": 'a"b\\c', "le": "+Inf"}
    assert unpack_points(row.points)[0] == (100.0, 5.0) and math.isnan(unpack_points(row.points)[1][1])


def test_import_metrics_asks_for_evidence_of_incidents_it_covers(
    story_file, story_incident, django_capture_on_commit_callbacks
):
    incident = story_incident()
    with mock.patch("incidents.flow.evidence_enqueue_now") as enqueue:
        with django_capture_on_commit_callbacks(execute=True):
            import_metrics(story_file)
    enqueue.assert_called_once_with([incident.pk], asked=False)  # an import is no person asking


def test_prometheus_unset_builds_evidence_from_the_local_store(story_file, story_incident, settings):
    settings.PROMETHEUS_URL = None
    import_metrics(story_file)
    incident = story_incident()

    result = evidence_collect(incident_id=incident.pk)

    assert result.series > 20
    row = EvidenceSeries.objects.get(incident=incident, signal="kv_fragmentation", labels__pod="pod-2")
    assert row.source == "import"
    crossing = next(t for t, v in finite(unpack_points(row.points)) if v > 0.25)
    assert at(30).timestamp() <= crossing <= at(30.5).timestamp()
    # Signals nobody could answer: a gap that says why.
    gap = EvidenceGap.objects.get(incident=incident, signal="queue_wait")
    assert gap.error == "PROMETHEUS_URL is not set"


def test_prometheus_unset_and_nothing_imported_records_gaps_and_does_not_crash(story_incident, settings):
    settings.PROMETHEUS_URL = None
    incident = story_incident()

    result = evidence_collect(incident_id=incident.pk)

    assert result.series == 0
    assert {"kv_fragmentation", "kv_pool_usage", "ttft_p99"} <= set(
        EvidenceGap.objects.filter(incident=incident).values_list("signal", flat=True)
    )


def test_march_oom_evidence_is_built_from_the_imported_metrics(
    tmp_path, make_integration, settings, django_capture_on_commit_callbacks
):
    """The March incident: no engine exports a KV pool, so the GPU-memory bands go to the
    framebuffer ratio, which crosses 85% at 01:30 (T+30m) on the first pod to OOM."""
    from incidents.tasks import correlate_key, process_delivery

    settings.PROMETHEUS_URL = None
    call_command(
        "simulate", scenario="march-oom", start="2026-03-14T00:00:00Z", out=str(tmp_path), stdout=StringIO()
    )
    alerts, events = make_integration("alertmanager"), make_integration("events")
    with django_capture_on_commit_callbacks(execute=False):
        call_command(
            "import_alerts", str(tmp_path / "alerts.jsonl"), integration=alerts.pk, stdout=StringIO()
        )
        call_command(
            "import_alerts", str(tmp_path / "changes.jsonl"), integration=events.pk, stdout=StringIO()
        )
        for delivery in Delivery.objects.filter(status="pending").order_by("id"):
            process_delivery(delivery.pk)
        for key in sorted(
            set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True))
        ):
            correlate_key(key)
    import_metrics(tmp_path / "metrics.om")
    incident = next(i for i in Incident.objects.visible() if "oom" in i.failure_modes)

    evidence_collect(incident_id=incident.pk)

    ratios = EvidenceSeries.objects.filter(incident=incident, signal="framebuffer_ratio")
    assert ratios.count() == 4 and {r.source for r in ratios} == {"import"}
    assert not EvidenceSeries.objects.filter(incident=incident, signal="kv_pool_usage").exists()
    crossings = sorted(
        t for r in ratios if (t := next((t for t, v in finite(unpack_points(r.points)) if v > 0.85), None))
    )
    assert datetime.fromtimestamp(crossings[0], UTC) == datetime(2026, 3, 14, 1, 30, tzinfo=UTC)
    assert len(crossings) == 3  # the three pods that OOM; the fourth stays under
    assert EvidenceSeries.objects.filter(incident=incident, signal="oom_killed").count() == 3
    assert EvidenceSeries.objects.filter(incident=incident, signal="ttft_p99").get().source == "import"


def test_bucket_quantile_interpolates_as_prometheus_does():
    buckets = [(0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (math.inf, 100.0)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * (40 / 50))
    assert bucket_quantile(0.99, buckets) == 1.0  # rank in +Inf: the highest finite bound
    assert math.isnan(bucket_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]))


def test_local_rate_extrapolates_and_survives_counter_resets(tmp_path):
    lines = ["# TYPE c counter"] + [
        f'c_total{{pod="p"}} {v} {100 + 15 * i}' for i, v in enumerate([0, 15, 30, 45, 5, 20, 35])
    ]
    import_metrics(write_openmetrics(tmp_path / "c.om", lines))
    query = EvidenceQuery("x", "rate", "c_total", (("pod", "=", "p"),), window=60)

    (series,) = LocalSource().range(query, 190, 190, 15)

    assert series.labels == {"pod": "p"}
    # [130, 190]: 30 -> 45, reset to 0 then 5, -> 20 -> 35: an increase of 15 + 5 + 15 + 15 = 50 in 60 s
    assert series.points == [(190.0, pytest.approx(50 / 60))]


def test_alerts_first_then_metrics_fills_the_evidence_through_the_task(
    story_file, story_incident, settings, django_capture_on_commit_callbacks
):
    settings.PROMETHEUS_URL = None
    settings.CELERY_TASK_ALWAYS_EAGER = True  # no broker: the enqueued task runs in this process
    incident = story_incident()
    with django_capture_on_commit_callbacks(execute=True):
        import_metrics(story_file)
    assert EvidenceSeries.objects.filter(incident=incident, signal="kv_fragmentation").count() == 4
