"""The on-call screens in Debian's Chromium: the queue's order, filters, keys and refresh; the
incident page's lanes, merge and split; a viewer's read-only page; a phone at night."""

from __future__ import annotations

import json
import re

import pytest

from incidents.models import Alert, Incident, IncidentAction
from tests.e2e.conftest import person, sign_in
from tests.incidents.conftest import DAY, am_alert, am_body, cascade

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def lone_alert(name: str, starts: str, severity: str, **labels) -> bytes:
    return am_body(am_alert(name, starts, severity=severity, **labels))


def queue_ids(page) -> list[int]:
    return [int(row) for row in page.locator("table.queue tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.incident)"
    )]  # fmt: skip


@pytest.fixture
def three_incidents(make_integration, deliver):
    """An older critical, a newer warning and a newest info, on two clusters."""
    integration = make_integration()
    deliver(integration, lone_alert("GPUXidErrors", f"{DAY}T01:00:00Z", "critical", cluster="prod-eu",
                                    node="gpu-node-1", gpu="0"))  # fmt: skip
    deliver(integration, lone_alert("VLLMQueueHigh", f"{DAY}T03:00:00Z", "warning", cluster="prod-us",
                                    namespace="llm", model_name="qwen-72b"))  # fmt: skip
    deliver(integration, lone_alert("NodeDiskFilling", f"{DAY}T04:00:00Z", "info", cluster="prod-us",
                                    node="cpu-node-3"))  # fmt: skip
    by_name = {a.alertname: a.incident for a in Alert.objects.select_related("incident")}
    return integration, by_name


def test_the_queue_puts_severity_first_and_keeps_its_filters_in_the_url(live_server, page, three_incidents):
    _, by_name = three_incidents
    person("oncall", "responder")
    sign_in(page, live_server, "oncall")
    critical, warning, info = (by_name[n].pk for n in ("GPUXidErrors", "VLLMQueueHigh", "NodeDiskFilling"))
    assert queue_ids(page) == [critical, warning, info]  # the critical is oldest, yet first
    age = page.locator("tr.sev-row-critical .cell-age").inner_text()
    assert re.fullmatch(r"\d+ h( \d+ min)?|\d+ d( \d+ h)?", age), age

    page.select_option("select[name=cluster]", "prod-us")
    page.wait_for_url(re.compile(r".*cluster=prod-us.*"))
    assert queue_ids(page) == [warning, info]
    page.fill("#queue-search", "disk")
    page.press("#queue-search", "Enter")
    page.wait_for_url(re.compile(r".*q=disk.*"))
    page.reload()
    assert queue_ids(page) == [info]
    assert page.input_value("#queue-search") == "disk"
    assert page.locator("select[name=cluster]").input_value() == "prod-us"


def test_keys_choose_and_acknowledge_an_incident(live_server, page, three_incidents):
    _, by_name = three_incidents
    person("oncall", "responder")
    sign_in(page, live_server, "oncall")
    page.keyboard.press("j")
    page.keyboard.press("j")  # the second row: the warning
    assert page.locator("tr.chosen").get_attribute("data-incident") == str(by_name["VLLMQueueHigh"].pk)
    page.keyboard.press("a")
    page.wait_for_selector(".flash")
    page.wait_for_load_state("load")  # the new page's scripts run before its keys are pressed
    assert Incident.objects.get(pk=by_name["VLLMQueueHigh"].pk).status == "acknowledged"
    assert IncidentAction.objects.get(action="acknowledge").by.username == "oncall"
    assert page.url.startswith(live_server.url + "/")  # back on the queue, not the incident page
    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "queue-search"
    page.keyboard.press("Escape")
    page.locator("body").click()
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/incidents/\d+/$"))


def test_an_incident_from_the_webhook_appears_without_a_reload(live_server, page, make_integration, deliver):
    integration = make_integration()
    person("oncall", "responder")
    sign_in(page, live_server, "oncall")
    assert page.locator("table.queue").count() == 0
    page.evaluate("window.notReloaded = true")
    deliver(integration, lone_alert("LLMTTFTP99High", f"{DAY}T05:00:00Z", "critical", cluster="prod-eu",
                                    namespace="llm", model_name="llama-3-70b"))  # fmt: skip
    page.wait_for_selector("table.queue tbody tr", timeout=6000)
    assert "LLMTTFTP99High" in page.locator("table.queue").inner_text()
    assert page.evaluate("window.notReloaded") is True


def test_merge_and_split_from_the_page_land_on_the_timeline(live_server, page, make_integration, deliver):
    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    person("oncall", "responder")
    cascade_incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    disk = Alert.objects.get(alertname="NodeDiskFilling").incident
    assert cascade_incident.pk != disk.pk
    sign_in(page, live_server, "oncall")
    page.on("dialog", lambda dialog: dialog.accept())

    page.goto(f"{live_server.url}/incidents/{disk.pk}/")
    lanes = page.locator(".lanes")
    assert lanes.count() == 0  # one alert: nothing to draw
    page.select_option("select[name=into]", str(cascade_incident.pk))
    page.click("button:has-text('Merge')")
    page.wait_for_url(f"{live_server.url}/incidents/{cascade_incident.pk}/")
    assert Alert.objects.get(alertname="NodeDiskFilling").incident_id == cascade_incident.pk

    assert page.locator(".lanes .step.root").count() == 1
    assert "KVCacheFragmentationHigh" in page.locator(".lanes .step.root title").text_content()
    lane_names = page.locator(".lanes .lane text").evaluate_all("texts => texts.map(t => t.textContent)")
    assert [n.lower() for n in lane_names][:1] == ["engine"] and "platform" in [n.lower() for n in lane_names]
    assert page.locator(".lanes .edge").count() >= 3

    ttft = Alert.objects.get(alertname="LLMTTFTP99High")
    page.check(f"input.split-pick[value='{ttft.pk}']")
    page.click("button:has-text('Split ticked alerts')")
    assert page.locator(".flash").inner_text() == "split recorded"
    assert Alert.objects.get(pk=ttft.pk).incident_id != cascade_incident.pk
    page.goto(f"{live_server.url}/incidents/{cascade_incident.pk}/")
    timeline = page.locator(".card-people").inner_text()
    assert "oncall merge" in timeline and "oncall split" in timeline


def test_a_viewer_sees_no_action_and_the_api_refuses_one(live_server, page, browser, three_incidents):
    _, by_name = three_incidents
    person("watcher", "viewer")
    sign_in(page, live_server, "watcher")
    assert page.locator("form.ack-form").count() == 0
    incident = by_name["GPUXidErrors"]
    page.goto(f"{live_server.url}/incidents/{incident.pk}/")
    assert page.locator(".card-act").count() == 0
    assert page.locator("button:has-text('Acknowledge')").count() == 0
    answer = page.request.post(
        f"{live_server.url}/api/v1/incidents/{incident.pk}/actions/",
        data=json.dumps({"action": "acknowledge"}),
        headers={"Content-Type": "application/json", "X-CSRFToken": _cookie(page, "csrftoken")},
    )
    assert answer.status == 403
    assert Incident.objects.get(pk=incident.pk).status == "open"


def test_a_phone_at_night_has_no_sideways_scroll_and_a_dark_theme(
    live_server, browser, make_integration, deliver, screenshot_dir
):
    integration = make_integration()
    long_value = "x" * 300
    for alert in cascade():
        alert["labels"]["team_annotation"] = long_value
        deliver(integration, am_body(alert))
    promql = "sum(rate(" + "a" * 280 + "[5m]))"
    deliver(integration, lone_alert("GPUXidErrors", f"{DAY}T01:00:00Z", "critical", cluster=long_value,
                                    node="gpu-node-1", gpu="0", expr_note=promql))  # fmt: skip
    person("oncall", "responder")
    context = browser.new_context(viewport=PHONE, color_scheme="dark", has_touch=True, is_mobile=True)
    page = context.new_page()
    sign_in(page, live_server, "oncall")
    cascade_incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    for path in ("/", f"/incidents/{cascade_incident.pk}/", "/alerts/"):
        page.goto(live_server.url + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (path, width)
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert _luminance(background) < 0.1, (path, background)
        small = page.evaluate(
            """() => Array.from(document.querySelectorAll(
                   'main button, main select, main input[type=search]'))
                 .filter(e => e.offsetParent !== null && e.getBoundingClientRect().height < 44)
                 .map(e => e.outerHTML.slice(0, 80))"""
        )
        assert not [s for s in small if "small" not in s], (path, small)
    page.goto(live_server.url + f"/incidents/{cascade_incident.pk}/")
    page.screenshot(path=str(screenshot_dir / "incident-phone-dark.png"), full_page=True)
    page.goto(live_server.url + "/")
    page.screenshot(path=str(screenshot_dir / "queue-phone-dark.png"), full_page=True)
    context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_or_critical_accessibility_violation(
    live_server, browser, make_integration, deliver, scheme
):
    from axe_playwright_python.sync_playwright import Axe

    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    person("oncall", "responder")
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    for viewport in ({"width": 1360, "height": 900}, PHONE):
        context = browser.new_context(viewport=viewport, color_scheme=scheme)
        page = context.new_page()
        sign_in(page, live_server, "oncall")
        for path in ("/", f"/incidents/{incident.pk}/", "/alerts/", f"/incidents/{incident.pk}/evidence/"):
            page.goto(live_server.url + path)
            found = Axe().run(page).response["violations"]
            bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in found
                   if v["impact"] in ("serious", "critical")]  # fmt: skip
            assert not bad, (scheme, viewport["width"], path, bad)
        context.close()


def _luminance(css_color: str) -> float:
    red, green, blue = (int(x) / 255 for x in re.findall(r"\d+", css_color)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def _cookie(page, name: str) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == name)


def test_an_incident_with_evidence_missing_says_so_at_desktop_and_phone_width(
    live_server, browser, make_integration, deliver, screenshot_dir
):
    """Prometheus timed out (tests/drills/test_prometheus_faults.py): the on-call sees at the top
    of the incident that its charts are partial, and why, without a sideways scroll on a phone."""
    from django.utils import timezone

    from incidents.models import EvidenceGap

    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    reason = (
        "Prometheus at http://prometheus-k8s.monitoring.svc.cluster.local:9090/very/long/path/with/no/breaks"
        " did not answer within 4 s (ROOTLINE_PROMETHEUS_TIMEOUT_MS) <b>not bold</b>"
    )
    now = timezone.now()
    for signal in ("kv_pool_usage", "kv_fragmentation", "queue_wait", "ttft_p99", "restarts", "oom_killed"):
        EvidenceGap.objects.create(incident=incident, signal=signal, error=reason, since=now, last_tried=now)
    person("oncall", "responder")
    for name, viewport, scheme in (
        ("incident-evidence-missing-desktop", {"width": 1360, "height": 900}, "light"),
        ("incident-evidence-missing-phone", PHONE, "dark"),
    ):
        context = browser.new_context(viewport=viewport, color_scheme=scheme)
        page = context.new_page()
        sign_in(page, live_server, "oncall")
        page.goto(live_server.url + f"/incidents/{incident.pk}/")
        line = page.locator(".evidence-missing")
        assert line.is_visible()
        text = line.inner_text()
        assert "Evidence incomplete: 6 signals could not be collected" in text
        assert "did not answer within 4 s" in text and "<b>not bold</b>" in text  # escaped, not markup
        assert line.bounding_box()["y"] < viewport["height"]  # above the fold
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        page.screenshot(path=str(screenshot_dir / f"{name}.png"), full_page=False)
        page.click(".evidence-missing a")
        assert page.locator("#gaps").is_visible()
        context.close()
