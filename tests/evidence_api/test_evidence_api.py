"""Timeline and matrix API, the evidence page's figures, plotly.js served locally, catalog overrides."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

import pytest

from incidents.models import EvidenceGap, EvidenceSeries, MatrixCell
from tests.evidence_api.march import evidence_row
from tests.incidents.conftest import BAD_POD, DAY, FLEET, am_alert, am_body, cascade

pytestmark = pytest.mark.django_db
START = datetime.fromisoformat(f"{DAY}T01:00:00+00:00")  # the cascade's day


def kv_ramp(incident, pod=BAD_POD, signal="kv_pool_usage", start_min=20, peak=0.95):
    """15 s samples from 01:00 to 02:10: green, then up to `peak` from `start_min`."""
    points = []
    for i in range(70 * 4):
        t = START + timedelta(seconds=15 * i)
        minutes = i / 4
        value = 0.5 if minutes < start_min else min(peak, 0.5 + (minutes - start_min) * 0.02)
        points.append((t.timestamp(), value))
    return evidence_row(
        incident,
        signal,
        "vllm:kv_cache_usage_perc",
        {"pod": BAD_POD if pod is None else pod, **FLEET},
        points,
    )


@pytest.fixture
def incident(make_integration, deliver):
    integration = make_integration()
    for alert in cascade():
        assert deliver(integration, am_body(alert)).status_code == 202
    from incidents.models import Alert

    found = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    EvidenceSeries.objects.bulk_create([kv_ramp(found)])
    return found


def patch(client, user, path, body):
    client.force_login(user)
    return client.patch(path, json.dumps(body), content_type="application/json")


def test_timeline_api_lists_alerts_crossings_and_actions_in_time_order(incident, users, api):
    responder = users("resp", "responder")
    assert (
        api(
            responder,
            "post",
            f"/api/v1/incidents/{incident.pk}/actions/",
            {"action": "acknowledge", "at": f"{DAY}T01:50:00Z"},
        ).status_code
        == 200
    )
    assert (
        api(
            responder,
            "post",
            f"/api/v1/incidents/{incident.pk}/actions/",
            {"action": "degrade", "level": "L2", "at": f"{DAY}T02:06:00Z"},
        ).status_code
        == 200
    )
    response = api(users("view", "viewer"), "get", f"/api/v1/incidents/{incident.pk}/timeline/")
    assert response.status_code == 200
    items = response.json()
    assert [i["at"] for i in items] == sorted(i["at"] for i in items) and all(
        i["at"].endswith("Z") for i in items
    )
    kinds = {i["kind"] for i in items}
    assert {"alert_fired", "threshold", "action"} <= kinds
    threshold = next(i for i in items if i["kind"] == "threshold" and i["band"] == "red")
    assert (
        threshold["signal"] == "kv_pool_usage"
        and threshold["value"] >= 0.85
        and threshold["source"] == "metrics"
    )
    assert threshold["at"] == f"{DAY}T01:37:30Z"  # 0.5 + 0.02 * 17.5 = 0.85
    degrade = next(i for i in items if i.get("action") == "degrade")
    assert degrade["by"] == "resp" and "L2" in degrade["title"] and degrade["layer"] == "process"
    for item in items:
        assert {"at", "kind", "layer", "title", "detail", "source"} <= set(item)


def test_matrix_get_suggests_and_patch_keeps_history_for_authors_only(incident, users, api, client):
    path = f"/api/v1/incidents/{incident.pk}/matrix/"
    rows = api(users("view", "viewer"), "get", path).json()
    engine = next(r for r in rows if r["layer"] == "engine")
    assert (
        "fragmentation" in engine["direct_cause"]["text"].lower()
        and engine["direct_cause"]["edited_by"] is None
    )
    assert engine["direct_cause"]["evidence"] and all(
        {"kind", "id"} == set(e) for e in engine["direct_cause"]["evidence"]
    )
    body = {
        "layer": "engine",
        "direct_cause": {"text": "vLLM block allocation conflict", "evidence": [{"kind": "alert", "id": 2}]},
    }
    assert patch(client, users("resp", "responder"), path, body).status_code == 403
    author = users("writer", "author")
    answer = patch(client, author, path, body)
    assert answer.status_code == 200
    edited = next(r for r in answer.json() if r["layer"] == "engine")["direct_cause"]
    assert edited == {
        "text": "vLLM block allocation conflict",
        "evidence": [{"kind": "alert", "id": 2}],
        "edited_by": "writer",
    }
    again = patch(
        client, author, path, [{"layer": "engine", "direct_cause": "block allocation conflict (vLLM)"}]
    )
    assert next(r for r in again.json() if r["layer"] == "engine")["direct_cause"]["evidence"] == [
        {"kind": "alert", "id": 2}
    ]
    assert MatrixCell.objects.filter(incident=incident, layer="engine", column="direct_cause").count() == 2
    new_row = patch(
        client,
        author,
        path,
        {"layer": "process", "process_gap": {"text": "no drill for this", "evidence": []}},
    )
    assert any(
        r["layer"] == "process" and r["process_gap"]["text"] == "no drill for this" for r in new_row.json()
    )
    assert api(users("view2", "viewer"), "get", path).json() == new_row.json()


@pytest.mark.parametrize(
    "body, error",
    [
        ([], "body"),
        ({"layer": "kitchen", "direct_cause": "x"}, "layer"),
        ({"layer": "engine"}, "nothing to edit"),
        ({"layer": "engine", "root": "x"}, "root: unknown field"),
        ({"layer": "engine", "direct_cause": 3}, "direct_cause"),
        ({"layer": "engine", "direct_cause": {"text": None}}, "direct_cause.text"),
        (
            {"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": "rumour", "id": 1}]}},
            "evidence[0].kind",
        ),
        ({"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": "alert"}]}}, "evidence[0]"),
        ({"layer": "engine", "direct_cause": {"text": "x", "evidence": "alert:1"}}, "direct_cause.evidence"),
        (
            [
                {"layer": "engine", "direct_cause": "ok"},
                {"layer": "serving", "system_defect": {"text": "x" * 6000}},
            ],
            "[1]system_defect.text",
        ),
    ],
)
def test_matrix_patch_rejects_bad_bodies_with_a_clear_400_and_stores_nothing(
    incident, users, client, body, error
):
    answer = patch(client, users("writer", "author"), f"/api/v1/incidents/{incident.pk}/matrix/", body)
    assert answer.status_code == 400 and error in answer.json()["error"]
    assert not MatrixCell.objects.exists()


def test_unknown_incident_is_404(users, api):
    assert api(users("view", "viewer"), "get", "/api/v1/incidents/999/timeline/").status_code == 404
    assert api(users("view2", "viewer"), "get", "/api/v1/incidents/999/matrix/").status_code == 404


def test_evidence_page_draws_each_series_with_its_bands_and_the_events_and_shows_missing_evidence(
    incident, users, client
):
    from incidents.evidence_views import evidence_figures
    from incidents.timeline import incident_evidence

    EvidenceGap.objects.create(
        incident=incident,
        signal="ttft_p99",
        error="Prometheus unreachable: connection refused",
        since=START,
        last_tried=START + timedelta(minutes=5),
    )
    evidence = incident_evidence(incident)
    figures = evidence_figures(evidence, evidence.timeline())
    assert len(figures) == 1
    figure = figures[0]
    lines = [t for t in figure["data"] if t["mode"] == "lines"]
    markers = [t for t in figure["data"] if t["mode"] == "markers"]
    assert len(lines) == 1 and len(lines[0]["x"]) == 280
    assert markers and any("LLMContainerOOMKilled" in text for text in markers[0]["text"])
    assert any("KV-cache pool usage entered red" in text for text in markers[0]["text"])
    bands = {shape["name"]: shape for shape in figure["layout"]["shapes"]}
    assert (
        bands["band red"]["y0"] == 0.85
        and bands["band yellow"]["y0"] == 0.70
        and bands["band yellow"]["y1"] == 0.85
    )
    assert figure["layout"]["meta"] == {"signal": "kv_pool_usage", "band": "kv_pool_usage"}
    client.force_login(users("view", "viewer"))
    page = client.get(f"/incidents/{incident.pk}/evidence/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Missing evidence" in html and "Prometheus unreachable" in html and "ttft_p99" in html
    assert 'id="chart-0-data"' in html
    # Every script and stylesheet comes from Rootline itself (no CDN: the page works offline).
    # The sources are checked, not the page's text: a random CSRF token may spell "cdn".
    sources = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]*)"', html)
    assert sources and all(source.startswith("/") and not source.startswith("//") for source in sources), (
        sources
    )
    src = page.context["plotly_src"]
    script = client.get(src)
    assert script.status_code == 200 and script["Content-Type"].startswith("text/javascript")
    assert b"plotly" in b"".join(script.streaming_content)[:2000].lower()
    assert client.get("/assets/plotly-0.0.0.min.js").status_code == 404


def test_evidence_page_needs_a_login_and_a_real_incident(users, client, db):
    assert client.get("/incidents/1/evidence/").status_code == 302
    client.force_login(users("view", "viewer"))
    assert client.get("/incidents/999/evidence/").status_code == 404


def test_a_catalog_override_file_moves_a_band(incident, users, api, settings, tmp_path):
    override = tmp_path / "team.yaml"
    override.write_text("bands:\n  kv_pool_usage:\n    red: 0.928\n    yellow: 0.80\n")
    settings.CATALOG_PATH = str(override)  # what ROOTLINE_CATALOG sets
    items = api(users("view", "viewer"), "get", f"/api/v1/incidents/{incident.pk}/timeline/").json()
    red = next(i for i in items if i["kind"] == "threshold" and i["band"] == "red")
    assert red["at"] == f"{DAY}T01:41:30Z" and red["value"] >= 0.928  # 0.5 + 0.02 * 21.5 = 0.93
    yellow = next(i for i in items if i["kind"] == "threshold" and i["band"] == "yellow")
    assert yellow["at"] == f"{DAY}T01:35:00Z"


def test_timeline_and_matrix_read_in_a_fixed_number_of_queries(incident, django_assert_max_num_queries):
    from incidents.timeline import incident_matrix, incident_timeline

    EvidenceSeries.objects.bulk_create([kv_ramp(incident, pod=f"pod-{n}") for n in range(10)])
    with django_assert_max_num_queries(6):
        incident_timeline(incident)
    with django_assert_max_num_queries(8):
        incident_matrix(incident)


def test_evidence_page_reads_in_a_fixed_number_of_queries(
    incident, users, client, django_assert_max_num_queries
):
    EvidenceSeries.objects.bulk_create([kv_ramp(incident, pod=f"pod-{n}") for n in range(20)])
    client.force_login(users("view", "viewer"))
    client.get("/accounts/profile/")  # a session's first page also reads the person's time zone
    with django_assert_max_num_queries(10):
        assert client.get(f"/incidents/{incident.pk}/evidence/").status_code == 200


def test_evidence_page_figures_show_sender_text_as_text_not_plotly_markup(
    make_integration, deliver, users, client
):
    from incidents.models import Alert

    hostile = '<a href="javascript:alert(1)">x</a><b>bold</b>'
    integration = make_integration()
    deliver(integration, am_body(am_alert("LLMContainerOOMKilled", f"{DAY}T02:00:00Z", pod=BAD_POD, **FLEET)))
    deliver(integration, am_body(am_alert(hostile, f"{DAY}T02:01:00Z", pod=BAD_POD, **FLEET)))
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    EvidenceSeries.objects.bulk_create([kv_ramp(incident, pod=hostile)])
    client.force_login(users("v", "viewer"))
    page = client.get(f"/incidents/{incident.pk}/evidence/").content.decode()
    figures = [
        json.loads(block.split(">", 1)[1].split("</script>", 1)[0])
        for block in page.split('<script id="')[1:]
        if 'type="application/json"' in block.split(">", 1)[0]
    ]
    assert figures
    texts = json.dumps(figures)
    assert "<a href" not in texts and "<b>" not in texts
    assert "&lt;a href" in texts or "&lt;b&gt;" in texts


def test_a_flat_bytes_series_is_drawn_with_room_and_in_bytes_not_billions():
    """A volume's size does not move: a padding of 1 around 5.4e11 gave ticks differing in the
    twelfth digit, and Plotly's default "B" (billions) read as bytes ("536.870912B")."""
    from correlate.series import Series
    from incidents.evidence_views import signal_figure

    size = 536_870_912_000.0
    flat = Series(
        id=1,
        signal="filesystem_size_bytes",
        labels={"instance": "10.192.187.27:9100"},
        points=[(1_796_000_000.0 + 15 * i, size) for i in range(20)],
    )
    axis = signal_figure("filesystem_size_bytes", [flat], None, [])["layout"]["yaxis"]
    low, high = axis["range"]
    assert low < size < high and high - low > size * 0.05
    assert axis["exponentformat"] == "SI" and axis["ticksuffix"] == "B"
    ratio = Series(id=2, signal="kv_cache_usage", points=[(1_796_000_000.0, 0.5), (1_796_000_015.0, 0.9)])
    axis = signal_figure("kv_cache_usage", [ratio], None, [])["layout"]["yaxis"]
    assert "ticksuffix" not in axis and axis["range"][0] < 0.5 and axis["range"][1] > 0.9
