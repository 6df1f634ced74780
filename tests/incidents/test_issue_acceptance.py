"""The incidents issue end to end: tasks safe to run twice, what a sender controls escaped on every
page, and the demo's morning of incidents, people and noise, loaded twice."""

from __future__ import annotations

import io
from datetime import datetime

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Q

from incidents.models import Alert, Decision, Incident, IncidentAction
from incidents.tasks import correlate_key, process_delivery
from tests.incidents.conftest import DAY, FLEET, am_alert, am_body, cascade

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def state() -> list[tuple]:
    return sorted(
        Incident.objects.values_list("pk", "title", "status", "root_alert_id", "chain", "updated_at")
    ) + sorted(Alert.objects.values_list("pk", "incident_id", "layer", "failure_mode", "correlated"))


def test_the_delivery_and_correlation_tasks_run_twice_change_nothing_the_second_time(
    make_integration, post_hook, django_capture_on_commit_callbacks
):
    integration = make_integration()
    deliveries = []
    for alert in cascade():
        with django_capture_on_commit_callbacks(execute=False):
            deliveries.append(post_hook(integration, am_body(alert)).json()["delivery"])
    for delivery_id in deliveries:
        with django_capture_on_commit_callbacks(execute=False):
            process_delivery(delivery_id)
    correlate_key("prod-eu")
    first = state()
    assert Incident.objects.count() == 2 and not Alert.objects.filter(incident=None).exists()
    for delivery_id in deliveries:
        with django_capture_on_commit_callbacks(execute=False):
            process_delivery(delivery_id)
    correlate_key("prod-eu")
    correlate_key("prod-eu")
    process_delivery(10**9)  # gone: returns quietly
    assert state() == first


def test_what_a_sender_or_a_person_writes_is_escaped_on_every_page(
    make_integration, deliver, users, api, client
):
    integration = make_integration()
    hostile = am_alert(
        "Evil" + HOSTILE,
        f"{DAY}T02:00:00Z",
        pod="vllm-x" + HOSTILE,
        **{**FLEET, "namespace": HOSTILE},
        annotations={"summary": HOSTILE, "description": HOSTILE, "runbook_url": "javascript:alert(3)"},
    )
    assert deliver(integration, am_body(hostile, *cascade()[1:3])).status_code == 202
    incident = Alert.objects.get(alertname__startswith="Evil").incident
    responder = users("r" + HOSTILE[:20], "responder")
    for body in ({"action": "note", "text": HOSTILE}, {"action": "assign", "username": responder.username}):
        assert api(responder, "post", f"/api/v1/incidents/{incident.pk}/actions/", body).status_code == 200
    client.force_login(responder)
    for path in (
        "/",
        "/?status=all",
        "/alerts/",
        f"/incidents/{incident.pk}/",
        f"/incidents/{incident.pk}/evidence/",
    ):
        page = client.get(path)
        assert page.status_code == 200, path
        html = page.content.decode()
        assert "&lt;script&gt;alert(1)" in html, path
        for raw in ("<script>alert", "<img src=x", "javascript:alert"):
            assert raw not in html, (path, raw)


def test_demo_loads_a_morning_of_incidents_people_and_noise_and_a_second_run_changes_nothing(client):
    out = io.StringIO()
    call_command("demo", stdout=out)
    visible = Incident.objects.visible()
    assert visible.count() >= 5
    assert visible.filter(alerts__isnull=False).distinct().count() >= 5
    assert (
        sum(1 for incident in visible if incident.alerts.count() >= 3) >= 3
    )  # cascades, not only single alerts
    assert IncidentAction.objects.values("by").distinct().count() >= 3 and Decision.objects.exists()
    assert {"acknowledge", "note", "resolve"} <= set(IncidentAction.objects.values_list("action", flat=True))
    applied = int(out.getvalue().split("(")[1].split(" actions applied")[0])
    assert applied == IncidentAction.objects.exclude(body__has_key="from").count()
    counts = (
        Incident.objects.count(),
        Alert.objects.count(),
        IncidentAction.objects.count(),
        Decision.objects.count(),
    )
    again = io.StringIO()
    call_command("demo", stdout=again)
    assert "(0 actions applied)" in again.getvalue()
    assert (
        Incident.objects.count(),
        Alert.objects.count(),
        IncidentAction.objects.count(),
        Decision.objects.count(),
    ) == counts
    client.force_login(IncidentAction.objects.exclude(by=None).first().by)
    triage = client.get("/?status=all").content.decode()
    assert sum(f'href="/incidents/{incident.pk}/"' in triage for incident in visible) == visible.count()


def test_the_demo_opens_on_incidents_in_progress_true_to_the_moment_it_shows(client):
    """Loaded whole, every incident of the morning is over and the triage queue (open incidents)
    shows one certificate warning; the demo stops at a moment when the fleet is busy instead."""
    out = io.StringIO()
    call_command("demo", "--start", f"{DAY}T06:00:00Z", stdout=out)
    as_of = datetime.fromisoformat(f"{DAY}T09:50:00+00:00")
    in_progress = list(Incident.objects.visible().exclude(status=Incident.Status.RESOLVED))
    client.force_login(User.objects.get(username="admin"))
    first_screen = client.get("/").content.decode()
    listed = [
        incident
        for incident in Incident.objects.visible()
        if f'href="/incidents/{incident.pk}/"' in first_screen
    ]
    assert sorted(incident.pk for incident in listed) == sorted(incident.pk for incident in in_progress)
    assert len(listed) >= 4 and sum(incident.alerts.count() > 1 for incident in listed) >= 2
    assert {"open", "acknowledged"} <= {incident.status for incident in listed}
    assert sum(incident.actions.exists() for incident in listed) >= 2  # people are on them
    assert (
        Incident.objects.visible().filter(status=Incident.Status.RESOLVED).count() >= 10
    )  # the morning so far
    assert all(incident.alerts.filter(status=Alert.Status.FIRING).exists() for incident in listed)
    assert not Alert.objects.filter(Q(starts_at__gt=as_of) | Q(ends_at__gt=as_of)).exists()
    assert not IncidentAction.objects.filter(at__gt=as_of).exists()
    assert f"as it stood at {DAY} 09:50 UTC" in out.getvalue()
