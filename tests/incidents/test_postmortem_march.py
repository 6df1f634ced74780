"""The March incident of DOMAIN.md (`simulate --scenario march-oom`), loaded as the demo loads a
scenario: its postmortem is drafted from the facts the morning left, published, and exported."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from incidents.models import Incident, Postmortem
from incidents.postmortems.export import revision_markdown, shown_revision

pytestmark = pytest.mark.django_db


@pytest.fixture
def march(client):
    call_command("demo", "--scenario", "march-oom", stdout=io.StringIO())
    incident = Incident.objects.get(severity="critical", status="resolved")
    return incident, Postmortem.objects.get(incidents=incident)


def test_the_march_draft_holds_its_timeline_matrix_and_computed_figures(march):
    incident, postmortem = march
    first = postmortem.revisions.get(number=1)
    sections = {s["key"]: s["markdown"] for s in first.sections}
    timeline = sections["timeline"]
    assert "GPU framebuffer used ratio entered red (85.0%)" in timeline.replace("\\", "")  # memory above 85%
    assert "a false positive" in timeline  # the fragmentation alert judged so
    assert timeline.count("OOMKilled fired") >= 2  # key nodes OOM one after another
    assert "set degradation L" in timeline  # the degradation plan
    for moment in ("ONSET", "DETECTED", "ACKNOWLEDGED", "MITIGATED", "RESOLVED"):
        assert f"**{moment}**" in timeline
    matrix = sections["root-cause"]
    rows = [line for line in matrix.splitlines() if line.startswith("| ") and not line.startswith("| Layer")]
    layers = [row.split("|")[1].strip() for row in rows if not row.startswith("| ---")]
    assert {"hardware", "engine", "process"} <= set(layers)
    assert "threshold changed without review" in matrix and "judged false positive" in matrix
    figures = {f["key"]: f for f in first.figures}
    for key in ("duration_s", "detect_s", "share_over_ttft_objective"):
        assert figures[key]["available"], (key, figures[key]["reason"])
    assert figures["detect_s"]["value"] > 0  # the crossing came before the alert
    shed_or_failed = [figures[k] for k in ("requests_failed", "requests_shed") if figures[k]["available"]]
    assert shed_or_failed, (figures["requests_failed"]["reason"], figures["requests_shed"]["reason"])
    for figure in [figures["share_over_ttft_objective"], *shed_or_failed]:
        assert figure["query"] and figure["range"]["step"] > 0 and isinstance(figure["value"], int | float)
    assert "____" not in revision_markdown(first)


def test_the_published_march_postmortem_exports_as_its_published_revision(march, client, django_user_model):
    incident, postmortem = march
    assert postmortem.status == "published" and postmortem.latest().published
    viewer = django_user_model.objects.create_user("reader")
    client.force_login(viewer)
    answer = client.get(f"/api/v1/incidents/{incident.pk}/postmortem.md", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200 and answer["Content-Type"] == "text/markdown; charset=utf-8"
    assert answer.content.decode() == revision_markdown(shown_revision(postmortem))
    assert answer.content.decode() == revision_markdown(postmortem.latest_published())


def test_accepting_the_march_suggestions_gives_the_three_horizons_and_their_due_dates(march, client):
    from datetime import timedelta

    from django.contrib.auth.models import User

    from incidents.models import RemediationItem
    from incidents.services.remediation import remediation_update

    incident, _ = march
    every = list(RemediationItem.objects.filter(incident=incident))  # the demo accepted a few already
    titles = [s.title for s in every]
    for start in (
        "Add fragmentation monitoring",
        "Dynamic KV block allocation",
        "Change management for alert",
    ):
        assert any(t.startswith(start) for t in titles), (start, titles)
    assert any("defragmenter" in t for t in titles) and any("failure drills" in t for t in titles)
    suggestions = [s for s in every if s.suggested]
    lead = User.objects.create_superuser("lead", "lead@example.com", "x")
    horizons = set()
    for item in suggestions:
        accepted = remediation_update(
            item=item, user=lead, via="api", body={"suggested": False, "owner": "lead"}
        )
        days = {"24h": 1, "1w": 7, "1m": 30}[accepted.horizon]
        assert abs(accepted.due_at - accepted.created_at - timedelta(days=days)) < timedelta(seconds=5)
        horizons.add(accepted.horizon)
    assert horizons == {"24h", "1w", "1m"}
    checked = RemediationItem.objects.filter(
        incident=incident, title__startswith="Dynamic KV block allocation"
    ).get()
    assert "[7d]" in checked.check_expr and checked.source["mode"] == "kv_fragmentation"
