"""The alerts page as a person uses it: sign in, see what arrived, nothing a sender wrote runs."""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def test_sign_in_lands_on_alerts_and_sender_text_is_escaped(live_server, page, screenshot, make_integration, deliver):
    User.objects.create_user("oncall", password="correct horse battery")
    integration = make_integration("alertmanager")
    body = {"version": "4", "alerts": [
        {"status": "firing", "startsAt": "2026-11-29T01:45:00Z", "fingerprint": "frag1",
         "labels": {"alertname": "KVCacheFragmentationHigh", "pod": "vllm-llama-5d8f-x1", "cluster": "prod-eu"},
         "annotations": {"summary": "KV fragmentation 31% on vllm-llama-5d8f-x1"}},
        {"status": "firing", "startsAt": "2026-11-29T02:00:00Z", "fingerprint": "evil",
         "labels": {"alertname": HOSTILE, "pod": HOSTILE}, "annotations": {"summary": HOSTILE}},
    ]}
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
