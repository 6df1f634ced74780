"""Triage at 2 a.m.: the queue shows the cascade as one incident rooted at fragmentation, the
incident page shows the chain, and acknowledging it from the page works."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User

from incidents.models import Alert, IncidentAction
from tests.incidents.conftest import am_body, cascade

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def sign_in(page, live_server, username: str, password: str) -> None:
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")


def test_triage_queue_and_incident_page_let_a_responder_acknowledge(
    live_server, page, screenshot, make_integration, deliver
):
    responder = User.objects.create_user("oncall", password="night shift 42")
    responder.groups.add(Group.objects.get_or_create(name="responder")[0])
    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident

    sign_in(page, live_server, "oncall", "night shift 42")
    screenshot("triage-queue")
    row = page.locator("tr", has_text=f"#{incident.pk}")
    assert "KVCacheFragmentationHigh" in row.inner_text() and "open" in row.inner_text()

    row.locator("a").first.click()
    page.wait_for_url(f"{live_server.url}/incidents/{incident.pk}/")
    chain = page.locator("ol.chainlist li").all_inner_texts()
    assert "KVCacheFragmentationHigh" in chain[0]
    # Placed by when its condition began ("for 15 minutes"), so the chain reads in time order.
    assert chain[0].startswith("01:30:00") and "(fired 01:45:00)" in chain[0], chain[0]
    assert any("LLMContainerOOMKilled" in item for item in chain[1:])
    page.click("button:has-text('Acknowledge')")
    page.wait_for_url(f"{live_server.url}/incidents/{incident.pk}/")
    assert page.locator(".flash").inner_text() == "acknowledge recorded"
    page.fill("input[name=text]", "<script>alert(1)</script> checking pod-2")
    page.click("button:has-text('Note')")
    screenshot("incident-page")
    assert (
        "<script>alert(1)</script> checking pod-2"
        in page.locator(".card", has_text="What people did").inner_text()
    )
    assert list(IncidentAction.objects.filter(incident=incident).values_list("action", "by__username")) == [
        ("acknowledge", "oncall"),
        ("note", "oncall"),
    ]


def test_a_viewer_sees_no_action_buttons(live_server, page, make_integration, deliver):
    User.objects.create_user("watcher", password="read only 42").groups.add(
        Group.objects.get_or_create(name="viewer")[0]
    )
    integration = make_integration()
    deliver(integration, am_body(*cascade()[:2]))
    incident = Alert.objects.get(alertname="KVCacheFragmentationHigh").incident
    sign_in(page, live_server, "watcher", "read only 42")
    page.goto(f"{live_server.url}/incidents/{incident.pk}/")
    assert page.locator("button:has-text('Acknowledge')").count() == 0
    assert "KVCacheFragmentationHigh" in page.locator("h1").inner_text() + page.content()


def test_an_incident_whose_ranking_is_held_says_so(live_server, page, screenshot, make_integration, deliver):
    """During a storm a big incident's alerts are current while its root and chain wait for the
    next ranking (at most a few seconds): the page says so rather than look settled."""
    User.objects.create_user("watcher", password="read only 42").groups.add(
        Group.objects.get_or_create(name="viewer")[0]
    )
    deliver(make_integration(), am_body(*cascade()))
    incident = Alert.objects.get(alertname="KVCacheFragmentationHigh").incident
    sign_in(page, live_server, "watcher", "read only 42")
    page.goto(f"{live_server.url}/incidents/{incident.pk}/")
    assert page.locator(".ranking-held").count() == 0
    incident.ranking_held = True
    incident.save(update_fields=["ranking_held"])
    page.goto(f"{live_server.url}/incidents/{incident.pk}/")
    assert "re-ranked every few seconds" in page.locator(".card", has_text="Root cause").inner_text()
    screenshot("incident-ranking-held")
    page.goto(f"{live_server.url}/?status=all")
    row = page.locator("tr", has_text=f"#{incident.pk}")
    assert "re-ranking: alerts still arriving" in row.inner_text()
    screenshot("triage-ranking-held")
    incident.ranking_held = False
    incident.save(update_fields=["ranking_held"])
    page.goto(f"{live_server.url}/?status=all")
    assert page.locator(".ranking-held").count() == 0


def test_the_queue_says_rootline_is_behind_while_alerts_wait_for_correlation(
    live_server, page, screenshot, make_integration, deliver
):
    """In a storm stronger than the machine, what is stored waits for correlation: the queue says
    how many alerts are not in an incident yet, so the on-call knows the picture is not whole."""
    from datetime import timedelta

    from django.utils import timezone

    User.objects.create_user("oncall", password="night shift 42")
    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    waited = timezone.now() - timedelta(seconds=37)
    for number in range(1200):
        Alert.objects.create(
            fingerprint=f"storm{number}",
            starts_at=waited,
            status="firing",
            integration=integration,
            labels={"alertname": "LLMQueueWaitHigh", "pod": f"vllm-{number}", "cluster": "gpu-eu-01"},
            received_at=waited,
            correlation_key="gpu-eu-01",
        )
    sign_in(page, live_server, "oncall", "night shift 42")
    notice = page.locator("[role=status].behind")
    assert notice.is_visible()
    said = re.search(
        r"1,200 alerts received are not in an incident yet \(the oldest has waited (\d+) s\)",
        notice.inner_text(),
    )
    assert said is not None and 37 <= int(said.group(1)) < 120  # 37 s when stored, plus the sign-in
    assert (
        page.locator("tr", has_text="KVCacheFragmentationHigh").count() == 1
    )  # the incidents already made are still listed
    screenshot("triage-behind")
    page.goto(live_server.url + "/alerts/")
    assert "1,200 alerts received" in page.locator("[role=status].behind").inner_text()


def test_a_storms_incident_page_sums_its_alerts_up_by_name_and_lists_the_first(
    live_server, page, screenshot, make_integration, deliver
):
    """An incident of hundreds of alerts: the page sums them up by name, lists the first 200 and
    says how many more the API holds, instead of rendering every row (0.7 s for 943 alerts)."""
    from incidents import selectors
    from tests.incidents.conftest import storm_incident_of

    User.objects.create_user("oncall", password="night shift 42")
    incident = storm_incident_of(deliver, make_integration(), fragmented=130, killed=110)
    assert incident.alerts.count() == 240
    sign_in(page, live_server, "oncall", "night shift 42")
    page.goto(f"{live_server.url}/incidents/{incident.pk}/")
    card = page.locator(".card", has_text="Alerts (240)")
    by_name = card.locator("table.by-name tbody tr").all_inner_texts()
    assert by_name[0].split("\t")[0] == "KVCacheFragmentationHigh" and "\t130\t130\t" in by_name[0], by_name
    assert by_name[1].split("\t")[0] == "LLMContainerOOMKilled" and "\t110\t110\t" in by_name[1], by_name
    assert card.locator("table:not(.by-name) tbody tr").count() == selectors.PAGE_ALERTS_SUMMED
    assert f"… and {240 - selectors.PAGE_ALERTS_SUMMED} more alerts" in card.inner_text()
    steps = (
        page.locator(".card", has_text="Chain, cause before effect")
        .locator("ol.chainlist li")
        .all_inner_texts()
    )
    assert len(steps) == 2, steps  # one line per name, not 240
    assert "KVCacheFragmentationHigh" in steps[0] and "× 130" in steps[0] and "on 130 places" in steps[0], (
        steps
    )
    assert "LLMContainerOOMKilled" in steps[1] and "× 110" in steps[1], steps
    screenshot("incident-storm")
    page.set_viewport_size({"width": 1360, "height": 1000})
    page.screenshot(path=str(screenshot("incident-storm").with_name("incident-storm-top.png")))
