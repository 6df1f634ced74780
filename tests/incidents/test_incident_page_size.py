"""An incident of hundreds of alerts reads as a story on its page: the chain one step per alert
name, the alerts summed up by name, the first PAGE_ALERTS of them listed, the rest counted."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from incidents import selectors
from incidents.models import Alert
from tests.incidents.conftest import am_body, storm_incident_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def storm_incident(make_integration, deliver, settings):
    incident = storm_incident_of(deliver, make_integration(), fragmented=120, killed=100)
    assert incident.alerts.count() == 220 and len(incident.chain) == 220
    return incident


def test_a_long_chain_is_told_one_step_per_alert_name_in_cause_order(storm_incident):
    steps = selectors.chain_steps(storm_incident.chain, storm_incident.pk)
    names = dict(
        Alert.objects.filter(pk__in=[step["first"] for step in steps]).values_list("pk", "alertname")
    )
    assert [(names[step["first"]], step["count"], step["places"]) for step in steps] == [
        ("KVCacheFragmentationHigh", 120, 120),
        ("LLMContainerOOMKilled", 100, 100),
    ]
    assert steps[0]["first"] == storm_incident.chain[0]  # the root leads


def test_the_page_lists_the_first_alerts_and_counts_the_rest(storm_incident, client, monkeypatch):
    monkeypatch.setattr(selectors, "PAGE_ALERTS_SUMMED", 50)
    monkeypatch.setattr(selectors, "PAGE_EDGES", 30)
    client.force_login(User.objects.create_user("viewer"))
    page = selectors.incident_page(storm_incident.pk)
    assert len(page["alerts"]) == 50 and page["alerts_not_shown"] == 170
    assert len(page["edges"]) == 30 and page["edges_not_shown"] == page["edge_count"] - 30 > 0
    assert [(row["alertname"], row["count"], row["firing"]) for row in page["alerts_by_name"]] == [
        ("KVCacheFragmentationHigh", 120, 120),
        ("LLMContainerOOMKilled", 100, 100),
    ]
    html = client.get(f"/incidents/{storm_incident.pk}/").content.decode()
    assert "Alerts (220)" in html and "… and 170 more alerts" in html and html.count("<tr><td><strong>") == 2
    assert "× 120" in html and "× 100" in html and "on 120 places" in html


def test_a_short_chain_lists_every_alert(make_integration, deliver, client):
    from tests.incidents.conftest import cascade

    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    page = selectors.incident_page(incident.pk)
    assert page["chain_steps"] == [] and [alert.pk for alert in page["chain"]] == incident.chain
    assert page["alerts_by_name"] == [] and page["alerts_not_shown"] == 0
