"""The evidence page in a real browser: the March incident's charts drawn by the locally served
plotly.js (bands and event markers), the timeline below them, the missing evidence shown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User

from incidents.models import EvidenceGap
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_triage import sign_in
from tests.evidence_api.march import metrics_importable, replay, simulate, store_evidence_from_om

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_evidence_page_draws_the_march_charts_with_bands_events_and_gaps(
    live_server, page, screenshot, make_integration, django_capture_on_commit_callbacks, tmp_path
):
    folder = simulate(tmp_path, 1)
    with_collector = metrics_importable()
    incident = replay(folder, make_integration, django_capture_on_commit_callbacks, metrics=with_collector)
    if not with_collector:
        store_evidence_from_om(incident, folder / "metrics.om")
    EvidenceGap.objects.update_or_create(
        incident=incident,
        signal="kv_pool_usage",
        defaults={
            "error": "no series: the pods export no KV-pool metric",
            "since": incident.started_at,
            "last_tried": incident.started_at + timedelta(minutes=5),
        },
    )
    User.objects.create_user("author", password="postmortem 42").groups.add(
        Group.objects.get_or_create(name="viewer")[0]
    )
    requests_failed = []
    page.on("requestfailed", lambda request: requests_failed.append(request.url))
    sign_in(page, live_server, "author", "postmortem 42")
    page.goto(f"{live_server.url}/incidents/{incident.pk}/evidence/")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15_000)
    charts = page.locator(".js-plotly-plot")
    assert charts.count() == page.locator("div.chart").count() >= 3
    first = charts.first
    assert first.locator(".scatterlayer .trace").count() >= 2  # series plus the event markers
    assert first.locator(".shapelayer path").count() >= 3  # green / yellow / red bands and lines
    assert "framebuffer" in (first.locator(".gtitle").text_content() or "").lower()
    assert page.locator("table.timeline tr.kind-threshold").count() >= 3
    assert page.locator("table.timeline tr.kind-change").count() == 1
    assert "Missing evidence" in page.locator(".gaps").inner_text()
    assert "GPU memory exhausted" in page.locator("table.matrix").inner_text()
    assert not [url for url in requests_failed if "plotly" in url]
    assert all(
        url.startswith(live_server.url)
        for url in page.evaluate("Array.from(document.scripts).map(s => s.src).filter(Boolean)")
    )
    screenshot("evidence-page")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name, element in (("evidence-chart", first), ("evidence-matrix", page.locator("table.matrix"))):
        element.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), clip=element.bounding_box())
