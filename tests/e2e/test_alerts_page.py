"""The alerts page as a person uses it: sign in, see what arrived, nothing a sender wrote runs."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def test_sign_in_lands_on_alerts_and_sender_text_is_escaped(
    live_server, page, screenshot, make_integration, deliver
):
    User.objects.create_user("oncall", password="correct horse battery")
    integration = make_integration("alertmanager")
    body = {
        "version": "4",
        "alerts": [
            {
                "status": "firing",
                "startsAt": "2026-11-29T01:45:00Z",
                "fingerprint": "frag1",
                "labels": {
                    "alertname": "KVCacheFragmentationHigh",
                    "pod": "vllm-llama-5d8f-x1",
                    "cluster": "prod-eu",
                },
                "annotations": {"summary": "KV fragmentation 31% on vllm-llama-5d8f-x1"},
            },
            {
                "status": "firing",
                "startsAt": "2026-11-29T02:00:00Z",
                "fingerprint": "evil",
                "labels": {"alertname": HOSTILE, "pod": HOSTILE},
                "annotations": {"summary": HOSTILE},
            },
        ],
    }
    assert deliver(integration, json.dumps(body)).status_code == 202
    deliver(integration, b'{"alerts": [{"labels": {"alertname": "x"}, "startsAt": "never"}]}')

    page.goto(live_server.url + "/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "oncall")
    page.fill("#id_password", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")
    page.goto(live_server.url + "/alerts/")
    screenshot("alerts-page")

    assert page.locator("h1").inner_text().startswith("Alerts")
    assert page.get_by_text("KVCacheFragmentationHigh").count() == 1
    assert page.get_by_text("KV fragmentation 31% on vllm-llama-5d8f-x1").is_visible()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("tbody script").count() == 0 and page.locator("tbody img").count() == 0
    assert page.get_by_text("<script>window.__pwned = 1</script>", exact=False).count() >= 1
    rejected_row = page.locator("tr", has_text="rejected")
    assert "alerts[0].startsAt" in rejected_row.inner_text()


def test_a_cut_group_and_a_large_pagerduty_group_are_shown_at_desktop_and_phone_widths(
    live_server, browser, make_integration, deliver, client
):
    from pathlib import Path

    from tests.e2e.conftest import SCREENSHOTS

    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    User.objects.create_user("oncall", password="correct horse battery")
    webhook, events = make_integration("alertmanager"), make_integration("events")
    assert (
        deliver(webhook, (fixtures / "alertmanager/am025_truncated_max_alerts.json").read_bytes()).status_code
        == 202
    )
    assert deliver(events, (fixtures / "events/am025_pd_large_trigger.json").read_bytes()).status_code == 202
    for name, viewport in (
        ("desktop", {"width": 1360, "height": 900}),
        ("phone", {"width": 390, "height": 844}),
    ):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.goto(live_server.url + "/accounts/login/?next=/alerts/")
        page.fill("#id_username", "oncall")
        page.fill("#id_password", "correct horse battery")
        page.click("button[type=submit]")
        page.wait_for_url(live_server.url + "/alerts/")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"alerts-truncated-{name}.png"), full_page=True)
        notice = page.locator(".behind", has_text="never sent")
        assert notice.is_visible() and "3 alerts" in notice.inner_text()
        assert page.locator("td", has_text="(3 cut by the sender)").count() == 1
        assert page.get_by_text("KubePodCrashLooping", exact=True).count() == 1
        context.close()
