"""Every real sender's body accepted: groups routed through PagerDuty's Events API by
Alertmanager's and Grafana's notifiers (large ones included), Events API v1, Grafana's legacy
alerting webhook, and `truncatedAlerts`. Recorded and documented bodies in tests/fixtures/."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from correlate import io as engine_io
from correlate import pagerduty
from correlate.ingest import PayloadError, parser_for
from correlate.ingest.common import MAX_ANNOTATION_VALUE, MAX_LABEL_VALUE
from incidents.models import Alert, Delivery

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def parse_one(kind: str, name: str):
    [alert] = parser_for(kind)(body(name), RECEIVED).alerts
    return alert


def webhook_group_common_labels() -> dict[str, str]:
    """What the webhook route says of the same group: the labels all its alerts share."""
    document = json.loads(body("alertmanager/am025_group_large_firing.json"))
    return pagerduty.common_labels(alert["labels"] for alert in document["alerts"])


def test_recorded_large_alertmanager_pagerduty_group_is_read_with_the_webhook_routes_name():
    raw = json.loads(body("events/am025_pd_large_trigger.json"))
    assert len(raw["payload"]["custom_details"]["firing"]) > MAX_LABEL_VALUE  # the body that lost its page
    event = parse_one("events", "events/am025_pd_large_trigger.json")
    common = webhook_group_common_labels()
    assert event.alertname == common["alertname"] == "KubePodCrashLooping"
    assert {key: event.labels[key] for key in common} == common
    assert (event.status, event.starts_at, event.ends_at) == ("firing", RECEIVED, None)
    assert event.fingerprint == raw["dedup_key"]
    assert "firing" not in event.labels and "num_firing" not in event.labels
    assert event.annotations["firing"] == raw["payload"]["custom_details"]["firing"]  # readable on the page
    assert event.annotations["num_firing"] == "24"


def test_the_resolve_of_the_large_group_names_the_same_alert():
    trigger = parse_one("events", "events/am025_pd_large_trigger.json")
    resolve = parse_one("events", "events/am025_pd_large_resolve.json")
    assert (resolve.fingerprint, resolve.alertname) == (trigger.fingerprint, trigger.alertname)
    assert resolve.labels == trigger.labels
    assert (resolve.status, resolve.ends_at) == ("resolved", RECEIVED)
    assert "resolved" in resolve.annotations and "firing" not in resolve.annotations


@pytest.mark.django_db
@pytest.mark.parametrize("prefix", ["events/am025_pd_large", "events/grafana_pagerduty_large_group"])
def test_large_pagerduty_group_through_the_url_fires_then_resolves(prefix, make_integration, deliver):
    integration = make_integration("events")
    trigger = deliver(integration, body(f"{prefix}_trigger.json"))
    assert trigger.status_code == 202, trigger.json()
    assert trigger.json()["accepted"] == 1 and trigger.json()["rejected"] == []
    [alert] = Alert.objects.filter(integration=integration)
    assert (
        alert.status == "firing"
        and alert.alertname == parse_one("events", f"{prefix}_trigger.json").alertname
    )
    resolve = deliver(integration, body(f"{prefix}_resolve.json"))
    assert resolve.status_code == 202, resolve.json()
    [alert] = Alert.objects.filter(integration=integration)
    assert alert.status == "resolved" and alert.ends_at is not None


def test_grafana_pagerduty_events_are_named_by_their_alerts_not_the_placeholder_class():
    one = parse_one("events", "events/grafana_pagerduty_default_one_alert.json")
    assert one.alertname == "alert1" and one.labels["lbl1"] == "val1"
    assert one.labels["class"] == "default"  # kept as sent, just never the name
    two = parse_one("events", "events/grafana_pagerduty_multiple_alerts.json")
    assert two.alertname == "alert1" and "lbl1" not in two.labels  # val1 and val2: not common
    big = parse_one("events", "events/grafana_pagerduty_large_group_trigger.json")
    assert big.alertname == "GPUFramebufferHeadroomLow"
    assert (big.labels["cluster"], big.labels["namespace"]) == ("gpu-prod-us2", "llm-serving")


def test_a_pagerduty_event_without_alert_lists_keeps_its_name_from_the_summary_without_the_count():
    def named(summary: str, **payload) -> str:
        event = {
            "event_action": "trigger",
            "dedup_key": "k",
            "payload": {"summary": summary, "source": "am", **payload},
        }
        [alert] = parser_for("events")(json.dumps(event).encode(), RECEIVED).alerts
        return alert.alertname

    assert (
        named("[FIRING:3] PDAlert prod-eu (api-1:8080 critical)")
        == named("[RESOLVED] PDAlert prod-eu (api-1:8080)")
        == "PDAlert prod-eu"
    )
    assert named("[FIRING:1]  (val1)", **{"class": "default"}) == "(val1)"
    assert named("Disk full on db-1") == "Disk full on db-1"
    assert named("[FIRING:2] X", **{"class": "NodeDown"}) == "NodeDown"


def test_an_over_long_custom_detail_is_kept_as_text_not_refused():
    huge = "x" * (MAX_ANNOTATION_VALUE + 10)
    event = {
        "event_action": "trigger",
        "dedup_key": "k1",
        "payload": {
            "summary": "s",
            "source": "src",
            "custom_details": {"alertname": "VLLMKVCacheFull", "pod": "vllm-0", "dump": huge},
        },
    }
    [alert] = parser_for("events")(json.dumps(event).encode(), RECEIVED).alerts
    assert alert.alertname == "VLLMKVCacheFull" and alert.labels["pod"] == "vllm-0"
    assert "dump" not in alert.labels
    assert alert.annotations["dump"].startswith("x" * 100) and "[truncated," in alert.annotations["dump"]


def test_group_alert_labels_reads_the_template_text_and_nothing_else():
    text = (
        "Labels:\n - alertname = A\n - msg = line one\nline two\nAnnotations:\n - summary = s\n"
        "Source: http://x\n"
        "Labels:\n - alertname = A\n - msg = other\nAnnotations:\n"
    )
    assert pagerduty.group_alert_labels(text) == [
        {"alertname": "A", "msg": "line one\nline two"},
        {"alertname": "A", "msg": "other"},
    ]
    assert pagerduty.common_labels(pagerduty.group_alert_labels(text)) == {"alertname": "A"}
    assert pagerduty.group_alert_labels("5") == [] and pagerduty.group_labels({"firing": "just text"}) == {}


def test_the_engine_file_reader_names_pagerduty_events_as_the_webhook_does():
    raw = json.loads(body("events/am025_pd_large_trigger.json"))
    raw["payload"]["timestamp"] = "2026-11-29T12:00:00Z"  # the file reader needs event times
    [alert] = engine_io.alerts_from_body(raw)
    strict = parse_one("events", "events/am025_pd_large_trigger.json")
    assert alert.alertname == strict.alertname
    assert {key: alert.labels[key] for key in webhook_group_common_labels()} == webhook_group_common_labels()
    assert "firing" not in alert.labels


# --- Events API v1 -------------------------------------------------------------------------


def test_events_api_v1_from_alertmanager_is_read_as_v2():
    trigger = parse_one("events", "events/am025_pagerduty_v1_trigger.json")
    v2 = parse_one("events", "events/am025_pd_large_trigger.json")
    assert (trigger.fingerprint, trigger.alertname, trigger.status) == (
        v2.fingerprint,
        v2.alertname,
        "firing",
    )
    resolve = parse_one("events", "events/am025_pagerduty_v1_resolve.json")
    assert (resolve.fingerprint, resolve.status) == (trigger.fingerprint, "resolved")


def test_events_api_v1_errors_name_v1_fields():
    with pytest.raises(PayloadError, match=r"^event_type: expected one of trigger"):
        parser_for("events")(
            json.dumps({"service_key": "k", "event_type": "page", "description": "d"}).encode(), RECEIVED
        )
    with pytest.raises(PayloadError, match=r"^description: missing"):
        parser_for("events")(
            json.dumps({"service_key": "k", "event_type": "trigger", "incident_key": "i"}).encode(), RECEIVED
        )
    with pytest.raises(PayloadError, match=r"^incident_key: missing"):
        parser_for("events")(json.dumps({"service_key": "k", "event_type": "resolve"}).encode(), RECEIVED)


@pytest.mark.django_db
def test_events_api_v1_authenticates_by_its_service_key(make_integration, deliver, post_hook):
    integration = make_integration("events", token="0123456789abcdef0123456789abcdef")
    response = deliver(integration, body("events/am025_pagerduty_v1_trigger.json"), token="")
    assert response.status_code == 202, response.json()
    assert Alert.objects.get(integration=integration).status == "firing"
    other = make_integration("events")
    assert post_hook(other, body("events/am025_pagerduty_v1_trigger.json"), token="").status_code == 401
    response = deliver(integration, body("events/am025_pagerduty_v1_resolve.json"), token="")
    assert response.status_code == 202
    assert Alert.objects.get(integration=integration).status == "resolved"


# --- Grafana legacy alerting ---------------------------------------------------------------


def test_grafana_legacy_docs_body_is_one_alert_named_by_its_rule():
    alert = parse_one("grafana", "grafana/grafana_legacy_docs_alerting.json")
    assert alert.alertname == "Panel Title alert" and alert.labels["tag name"] == "tag value"
    assert (alert.status, alert.starts_at, alert.event_action) == ("firing", RECEIVED, "trigger")
    assert alert.generator_url.startswith("http://localhost:3000/d/hZ7BuVbWz/")
    assert json.loads(alert.annotations["values"]) == [{"metric": "Count", "tags": {}, "value": 1}]
    ok = parse_one("grafana", "grafana/grafana_legacy_ok.json")
    assert (ok.fingerprint, ok.status) == (alert.fingerprint, "resolved")


@pytest.mark.django_db
def test_grafana_legacy_alerting_then_ok_through_the_url_resolves_one_occurrence(make_integration, deliver):
    integration = make_integration("grafana")
    assert deliver(integration, body("grafana/grafana_legacy_fleet_alerting.json")).status_code == 202
    alert = Alert.objects.get(integration=integration)
    assert (alert.alertname, alert.labels["cluster"], alert.status) == (
        "KVCacheFragmentationHigh",
        "gpu-prod-eu1",
        "firing",
    )
    ok = json.loads(body("grafana/grafana_legacy_fleet_alerting.json")) | {
        "state": "ok",
        "title": "[OK] KVCacheFragmentationHigh",
    }
    assert deliver(integration, json.dumps(ok).encode()).status_code == 202
    assert Alert.objects.get(integration=integration).status == "resolved"


@pytest.mark.parametrize("state", ["pending", "paused"])
def test_grafana_legacy_quiet_states_store_nothing(state):
    document = json.loads(body("grafana/grafana_legacy_docs_alerting.json")) | {"state": state}
    result = parser_for("grafana")(json.dumps(document).encode(), RECEIVED)
    assert result.alerts == [] and result.rejected == []


def test_grafana_legacy_unknown_state_says_which_format_it_read():
    document = json.loads(body("grafana/grafana_legacy_docs_alerting.json")) | {"state": "exploded"}
    with pytest.raises(PayloadError, match="Grafana legacy alerting"):
        parser_for("grafana")(json.dumps(document).encode(), RECEIVED)


# --- bodies sent to the wrong kind, and versions -------------------------------------------


def test_a_body_for_another_kind_names_the_integration_it_belongs_to():
    with pytest.raises(PayloadError, match="`events` integration"):
        parser_for("alertmanager")(body("events/am025_pd_large_trigger.json"), RECEIVED)
    with pytest.raises(PayloadError, match="`grafana` integration"):
        parser_for("alertmanager")(body("grafana/grafana_legacy_docs_alerting.json"), RECEIVED)
    with pytest.raises(PayloadError, match="`alertmanager` or `grafana` integration"):
        parser_for("events")(body("alertmanager/am025_group_firing.json"), RECEIVED)
    document = json.loads(body("alertmanager/am025_group_firing.json")) | {"version": "3"}
    with pytest.raises(PayloadError, match=r'^version: expected "4"'):
        parser_for("alertmanager")(json.dumps(document).encode(), RECEIVED)


# --- truncatedAlerts -----------------------------------------------------------------------


def metric(text: str, name: str) -> float:
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


@pytest.mark.django_db
def test_truncated_alerts_are_recorded_on_the_delivery_and_shown(make_integration, deliver, client):
    integration = make_integration("alertmanager")
    raw = body("alertmanager/am025_truncated_max_alerts.json")
    assert json.loads(raw)["truncatedAlerts"] == 3
    response = deliver(integration, raw)
    assert response.status_code == 202 and response.json()["accepted"] == 2
    assert Delivery.objects.get(pk=response.json()["delivery"]).truncated_alerts == 3
    assert deliver(integration, body("alertmanager/am025_group_firing.json")).status_code == 202
    client.force_login(User.objects.create_user("viewer"))
    page = client.get("/alerts/").content.decode()
    assert "left <strong>3 alerts</strong> out of 1 body" in page
    assert "(3 cut by the sender)" in page
    text = client.get("/metrics").content.decode()
    assert metric(text, "rootline_delivery_truncated_alerts") == 3
    assert metric(text, "rootline_delivery_truncated_bodies") == 1


@pytest.mark.parametrize("value", [None, -1, "3", 2.5, True, 2**40])
def test_a_truncated_count_that_is_not_a_count_is_read_as_zero(value):
    document = json.loads(body("alertmanager/am025_truncated_max_alerts.json")) | {"truncatedAlerts": value}
    result = parser_for("alertmanager")(json.dumps(document).encode(), RECEIVED)
    assert result.truncated == 0 and len(result.alerts) == 2


def test_grafana_truncated_alerts_are_counted_too():
    document = json.loads(body("grafana/grafana_v1_firing.json")) | {"truncatedAlerts": 4}
    assert parser_for("grafana")(json.dumps(document).encode(), RECEIVED).truncated == 4
