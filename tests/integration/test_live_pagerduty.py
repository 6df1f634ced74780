"""A real Alertmanager's `pagerduty_configs` (its defaults: one event per group, named by a summary
with the firing count inside, the alert list in `custom_details.firing`) and its webhook, both
pointed at a live Rootline: a group of 60 alerts is accepted on both routes, named alike, and
resolved by its resolve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from correlate.ingest.common import MAX_LABEL_VALUE
from incidents.models import Alert, Delivery
from tests.conftest import require_binary, wait_until
from tests.support.alertmanager import Alertmanager, make_alert

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

GROUP = 60


def crash_looping(index: int, starts_at: datetime, ends_at: datetime | None = None) -> dict:
    pod = f"vllm-qwen72b-6d9c{index:03d}-k{index % 7}z"
    labels = {
        "cluster": "live-pd",
        "namespace": "llm-serving",
        "pod": pod,
        "container": "vllm",
        "job": "kube-state-metrics",
        "instance": "10.42.0.9:8080",
        "severity": "warning",
    }
    annotations = {
        "description": f'Pod llm-serving/{pod} (vllm) is in waiting state (reason: "CrashLoopBackOff").',
        "runbook_url": "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/kubepodcrashlooping",
        "summary": "Pod is crash looping.",
    }
    return make_alert(
        "KubePodCrashLooping",
        labels,
        annotations,
        starts_at=starts_at,
        ends_at=ends_at or starts_at + timedelta(hours=1),
    )


def test_a_60_alert_group_through_pagerduty_configs_is_accepted_named_and_resolved(
    live_server, make_integration, processing
):
    binary = require_binary("alertmanager")
    webhook = make_integration("alertmanager")
    events = make_integration("events")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    group = [crash_looping(index, start + timedelta(seconds=index)) for index in range(GROUP)]
    with Alertmanager(
        live_server.url + webhook.path,
        webhook.plain_token,
        binary=binary,
        pagerduty_url=live_server.url + events.path,
        routing_key=events.plain_token,
        pagerduty_defaults=True,
        group_by=("alertname", "cluster", "namespace"),
    ) as alertmanager:
        alertmanager.post_alerts(group)
        wait_until(
            lambda: Alert.objects.filter(integration=webhook, status="firing").count() == GROUP,
            timeout=90,
            what="60 alerts by the webhook",
        )
        # Alertmanager may flush the group before all 60 are in it, then triggers again with the rest
        event = wait_until(
            lambda: Alert.objects.filter(
                integration=events, status="firing", annotations__num_firing=str(GROUP)
            ).first(),
            timeout=90,
            what="the PagerDuty event of the whole group",
        )
        ended = datetime.now(UTC) - timedelta(seconds=1)
        alertmanager.post_alerts(
            [crash_looping(index, start + timedelta(seconds=index), ended) for index in range(GROUP)]
        )
        wait_until(
            lambda: Alert.objects.filter(integration=events, status="resolved").exists(),
            timeout=90,
            what="the PagerDuty resolve",
        )
        wait_until(
            lambda: not Alert.objects.filter(integration=webhook, status="firing").exists(),
            timeout=90,
            what="the webhook resolves",
        )
        assert alertmanager.metric("alertmanager_notifications_failed_total", integration="pagerduty") == 0
    assert (
        event.alertname
        == "KubePodCrashLooping"
        == Alert.objects.filter(integration=webhook).first().alertname
    )
    assert (event.labels["cluster"], event.labels["namespace"]) == ("live-pd", "llm-serving")
    assert len(event.annotations["firing"]) > MAX_LABEL_VALUE  # the detail that cost the page before
    assert Alert.objects.filter(integration=events).count() == 1
    deliveries = Delivery.objects.filter(
        integration=events
    )  # a trigger (or two: a flush before all 60 were in) and its resolve
    assert deliveries.count() >= 2 and not deliveries.exclude(status="processed").exists()
