"""The testbed's live story end to end: a scripted exporter, Debian's Prometheus evaluating real
rules every second, Debian's Alertmanager delivering to a running Rootline. The cascade
(fragmentation, then GPU memory, then the OOM kill) must end as one incident rooted at the
fragmentation alert."""

from __future__ import annotations

import os
import subprocess

import pytest

from incidents.models import Alert, Incident
from tests.conftest import ROOT, require_binary, wait_until

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
LIVE_ALERTS = ROOT / "testbed" / "live_alerts.sh"


def test_live_cascade_from_real_alertmanager_is_one_incident_rooted_at_fragmentation(
    live_server, make_integration, processing, tmp_path
):
    env = {**os.environ, "PROM": require_binary("prometheus"), "AM": require_binary("alertmanager")}
    integration = make_integration("alertmanager")
    env.update(
        {
            "RECEIVER_URL": live_server.url + integration.path,
            "RECEIVER_BEARER": integration.plain_token,
            "WORK": str(tmp_path),
            "TIMEOUT": "90",
        }
    )
    run = subprocess.run(
        ["bash", str(LIVE_ALERTS)],
        cwd=LIVE_ALERTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert 'notifications_failed_total{integration="webhook"} 0' in run.stdout

    names = {"KVCacheFragmentationHigh", "GPUMemoryHigh", "LLMPodOOMKilled"}
    wait_until(
        lambda: (
            set(Alert.objects.filter(correlated=True, status="resolved").values_list("alertname", flat=True))
            >= names
        ),
        timeout=60,
        what="the three alerts fired, resolved and correlated",
    )
    incidents = {alert.incident_id for alert in Alert.objects.filter(alertname__in=names)}
    assert len(incidents) == 1 and None not in incidents
    incident = Incident.objects.get(pk=incidents.pop())
    assert incident.root_alert.alertname == "KVCacheFragmentationHigh"
    chain = list(Alert.objects.filter(pk__in=incident.chain).values_list("pk", "alertname"))
    order = [dict(chain)[pk] for pk in incident.chain]
    assert order.index("KVCacheFragmentationHigh") < order.index("LLMPodOOMKilled")
    assert incident.status == "resolved"
