"""What usually comes next, in the app: the API, the incident page, the queue row and the timeline,
from incidents delivered through the webhook (incidents/forecast.py over correlate/forecast.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from correlate.forecast import MIN_SIMILAR, cascade
from incidents.forecast import StepRow, next_effects, stored_cascade
from incidents.models import Alert, Incident
from tests.incidents.conftest import am_alert, am_body

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC).replace(microsecond=0)
ON = {"namespace": "llm", "model_name": "llama-3-70b"}


def moment(days_ago: int, minutes: int) -> datetime:
    """Past stories began 3 hours into their day; today's two minutes ago (its predictions live)."""
    began = NOW - timedelta(days=days_ago, hours=3) if days_ago else NOW - timedelta(minutes=2)
    return began + timedelta(minutes=minutes)


def rfc(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def story(days_ago: int, *, steps: int = 3, resolved: bool = True) -> list[dict]:
    """Fragmentation on one pod, its OOM kill 12 minutes on, the model's TTFT breach 20 minutes on,
    on a cluster of its own; resolved an hour on (or still firing)."""
    cluster, pod = f"c{days_ago}", f"vllm-llama-7d9f8b6c4-p{days_ago:04d}"
    end = {"status": "resolved", "ends": rfc(moment(days_ago, 60))} if resolved else {}
    at = lambda minutes: rfc(moment(days_ago, minutes))  # noqa: E731
    rows = [
        am_alert("KVCacheFragmentationHigh", at(0), cluster=cluster, pod=pod, **ON, **end),
        am_alert("LLMContainerOOMKilled", at(12), cluster=cluster, pod=pod, container="vllm", **ON, **end),
        am_alert("LLMTTFTP99High", at(20), cluster=cluster, **ON, **end),
    ]
    return rows[:steps]


def incident_of(alertname: str, days_ago: int) -> Incident:
    return Alert.objects.get(alertname=alertname, labels__cluster=f"c{days_ago}").incident


@pytest.fixture
def past(deliver, make_integration):
    """Deliver `count` resolved incidents like the story, then the story's first step, still firing."""

    def make(count: int) -> Incident:
        integration = make_integration()
        for days_ago in range(count + 1, 1, -1):
            deliver(integration, am_body(*story(days_ago)))
        deliver(integration, am_body(*story(0, steps=1, resolved=False)))
        return incident_of("KVCacheFragmentationHigh", 0)

    return make


def test_the_api_names_what_followed_in_past_incidents_like_this_one(client, users, past):
    incident = past(MIN_SIMILAR + 1)
    client.force_login(users("v", "viewer"))
    body = client.get(f"/api/v1/incidents/{incident.pk}/next/").json()
    assert [(e["failure_mode"], e["scope"], e["source"]) for e in body[:2]] == [
        ("oom", "pod", "history"),
        ("slo_ttft", "route", "history"),
    ]
    oom = body[0]
    assert (oom["seen"], oom["of"], oom["layer"]) == (MIN_SIMILAR + 1, MIN_SIMILAR + 1, "platform")
    assert oom["lag_s"] == {"p50": 720, "p90": 720}
    assert oom["after"]["failure_mode"] == "kv_fragmentation" and oom["where"].startswith("this pod (")
    assert body[1]["lag_s"]["p50"] == 1200


def test_with_fewer_than_min_similar_past_incidents_the_rules_speak_and_the_page_says_so(client, users, past):
    incident = past(MIN_SIMILAR - 1)
    client.force_login(users("v", "viewer"))
    body = client.get(f"/api/v1/incidents/{incident.pk}/next/").json()
    assert body and {e["source"] for e in body} == {"rules"}
    assert {e["of"] for e in body} == {MIN_SIMILAR - 1}
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "What usually comes next" in page
    assert f"From the rules: only {MIN_SIMILAR - 1} past incidents like this one" in page


def test_with_no_history_at_all_the_page_says_no_history_yet(client, users, past):
    incident = past(0)
    client.force_login(users("v", "viewer"))
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "From the rules, no history yet." in page


def test_the_queue_row_shows_the_likeliest_next_effect(client, users, past):
    incident = past(MIN_SIMILAR)
    client.force_login(users("v", "viewer"))
    page = client.get("/").content.decode()
    row = page[page.index(f'data-incident="{incident.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "next: <strong>oom</strong> on pod ~12 min" in row and f"({MIN_SIMILAR}/{MIN_SIMILAR})" in row


def test_a_prediction_is_dropped_once_its_p90_lag_has_passed(past):
    incident = past(MIN_SIMILAR)
    fresh = next_effects(incident, now=incident.started_at + timedelta(minutes=5))["effects"]
    assert ("oom", "pod") in {(e["failure_mode"], e["scope"]) for e in fresh if e["source"] == "history"}
    later = next_effects(incident, now=incident.started_at + timedelta(minutes=15))
    late = later["effects"]
    assert ("oom", "pod") not in {(e["failure_mode"], e["scope"]) for e in late if e["source"] == "history"}
    assert ("slo_ttft", "route") in {(e["failure_mode"], e["scope"]) for e in late}
    assert ("oom", "pod") in {(e["failure_mode"], e["scope"]) for e in later["expired"]}


def test_the_page_says_what_did_not_come_once_every_prediction_has_expired(client, users, past):
    incident = past(MIN_SIMILAR)
    Incident.objects.filter(pk=incident.pk).update(started_at=incident.started_at - timedelta(hours=3))
    client.force_login(users("v", "viewer"))
    assert client.get(f"/api/v1/incidents/{incident.pk}/next/").json() == []
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "Did not come within its p90 lag, so no longer expected: oom on this pod (" in page
    assert 'class="next-effects"' not in page


def test_a_resolved_incident_has_nothing_next(client, users, past):
    past(MIN_SIMILAR)
    client.force_login(users("v", "viewer"))
    resolved = incident_of("KVCacheFragmentationHigh", 2)
    assert resolved.resolved_at is not None
    assert client.get(f"/api/v1/incidents/{resolved.pk}/next/").json() == []
    assert client.get("/api/v1/incidents/999999/next/").status_code == 404


def test_the_timeline_says_an_effect_was_predicted_and_how_early(client, users, past):
    past(MIN_SIMILAR + 1)
    incident = incident_of("KVCacheFragmentationHigh", 2)  # the newest resolved: 3 had ended before it
    client.force_login(users("v", "viewer"))
    items = client.get(f"/api/v1/incidents/{incident.pk}/timeline/").json()
    fired = {item["title"].split(" ")[0]: item for item in items if item["kind"] == "alert_fired"}
    assert "predicted" not in fired["KVCacheFragmentationHigh"]
    assert fired["LLMContainerOOMKilled"]["predicted"] == {"lead_s": 720, "source": "history", "similar": 3}
    assert fired["LLMTTFTP99High"]["predicted"]["lead_s"] == 1200  # in the top 3 from the first step on
    page = client.get(f"/incidents/{incident.pk}/evidence/").content.decode()
    assert "predicted 12 min early" in page


def test_the_cascade_rebuilt_from_stored_alerts_is_the_one_correlation_stored(past):
    """The migration fills the column for incidents correlated before it from their stored alerts."""
    past(1)
    incident = incident_of("KVCacheFragmentationHigh", 2)
    rows = list(
        Alert.objects.filter(incident=incident).values(
            "id", "starts_at", "false_positive", "layer", "failure_mode", "labels"
        )
    )
    members = [StepRow(row) for row in rows]
    by_key = {member.key: type("Row", (), {"pk": int(member.key)})() for member in members}
    rebuilt = stored_cascade(cascade(members, str(incident.root_alert_id)), by_key)
    assert rebuilt == incident.cascade and len(rebuilt) == 3
