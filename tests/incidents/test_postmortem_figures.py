"""Impact figures from a known metric history: every figure is the number the history gives, with
the query it came from; a metric that is not there gives "not available" and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from incidents.models import Alert, AuditRecord
from incidents.postmortems.export import revision_markdown
from incidents.services.incidents import incident_resolve
from incidents.services.local_series import local_series_import
from incidents.services.postmortems import postmortem_draft
from tests.incidents.conftest import am_alert, am_body

pytestmark = pytest.mark.django_db

POD = "vllm-llama-7d9f8b6c4-x2k9p"
OTHER = "vllm-llama-7d9f8b6c4-a8m4q"
PLACE = {"cluster": "prod-eu", "namespace": "llm", "model_name": "llama-3-70b"}
DAY = (datetime.now(UTC) - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
ONSET = DAY + timedelta(hours=10)  # the first alert
RESOLVED = ONSET + timedelta(hours=1)  # a person resolves it
SCRAPE = 15  # seconds between samples
ROUTE = "httproute/llm/vllm-llama/rule/0"


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def counter(name: str, labels: dict[str, str], per_second, start: datetime, end: datetime) -> list[str]:
    """Samples of a counter whose rate at time t is per_second(t)."""
    lines, value, t = [], 0.0, start
    while t <= end:
        lines.append(f"{name}{_labels(**labels)} {value:.6f} {int(t.timestamp())}")
        value += per_second(t) * SCRAPE
        t += timedelta(seconds=SCRAPE)
    return lines


def gauge(name: str, labels: dict[str, str], value_at, start: datetime, end: datetime) -> list[str]:
    lines, t = [], start
    while t <= end:
        lines.append(f"{name}{_labels(**labels)} {value_at(t)} {int(t.timestamp())}")
        t += timedelta(seconds=SCRAPE)
    return lines


# TTFT per minute: 60 requests within 1 s, 30 more within 2.5 s, 10 more within 10 s.
TTFT_BUCKETS = {"0.5": 0.0, "1.0": 60.0, "2.5": 90.0, "10.0": 100.0, "+Inf": 100.0}


def history(tmp_path):
    start, end = ONSET - timedelta(hours=2), RESOLVED + timedelta(hours=1)
    lines = ["# TYPE envoy_cluster_upstream_rq_xx counter"]
    for code_class, per_minute in (("5", 10), ("2", 500)):
        labels = {"envoy_cluster_name": ROUTE, "envoy_response_code_class": code_class}
        lines += counter("envoy_cluster_upstream_rq_xx", labels, lambda t, n=per_minute: n / 60, start, end)
    lines += ["# TYPE envoy_cluster_upstream_rq counter"]
    lines += counter("envoy_cluster_upstream_rq", {"envoy_cluster_name": ROUTE, "envoy_response_code": "429"},
                     lambda t: 2 / 60, start, end)  # fmt: skip
    lines += counter(
        "envoy_cluster_upstream_rq",
        {"envoy_cluster_name": "httproute/llm/other-model/rule/0", "envoy_response_code": "429"},
        lambda t: 50,
        start,
        end,
    )  # fmt: skip  (another route)
    lines += ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for pod in (POD, OTHER):
        for le, per_minute in TTFT_BUCKETS.items():
            labels = {**PLACE, "pod": pod, "le": le}
            per_second = per_minute / 60 / 2  # the two pods share the model's requests
            lines += counter(
                "vllm:time_to_first_token_seconds_bucket", labels, lambda t, n=per_second: n, start, end
            )
    lines += ["# TYPE vllm:generation_tokens counter"]
    lines += counter("vllm:generation_tokens_total", {**PLACE, "pod": POD},
                     lambda t: 1000.0 if t < ONSET else 400.0, start, end)  # fmt: skip
    lines += ["# TYPE kube_pod_container_status_waiting_reason gauge"]
    waiting = (ONSET + timedelta(minutes=10), ONSET + timedelta(minutes=20))
    lines += gauge("kube_pod_container_status_waiting_reason",
                   {"namespace": "llm", "pod": POD, "container": "vllm", "reason": "CrashLoopBackOff"},
                   lambda t: 1 if waiting[0] <= t < waiting[1] else 0, start, end)  # fmt: skip
    lines += ["# TYPE kube_pod_container_resource_requests gauge"]
    lines += gauge("kube_pod_container_resource_requests",
                   {"namespace": "llm", "pod": POD, "container": "vllm", "resource": "nvidia_com_gpu",
                    "unit": "integer"}, lambda t: 2, start, end)  # fmt: skip
    path = tmp_path / "history.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    return path


@pytest.fixture
def resolved_incident(make_integration, deliver, users, tmp_path):
    local_series_import(path=history(tmp_path))
    integration = make_integration()
    start = ONSET.isoformat().replace("+00:00", "Z")
    deliver(integration, am_body(am_alert("LLMContainerOOMKilled", start, severity="critical", pod=POD,
                                          container="vllm", **PLACE)))  # fmt: skip
    deliver(integration, am_body(am_alert("VLLMRequestQueueHigh", (ONSET + timedelta(minutes=3)).isoformat(),
                                          pod=OTHER, **PLACE)))  # fmt: skip
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    responder = users("r", "responder")
    incident_resolve(incident=incident, user=responder, via=AuditRecord.Via.API, at=RESOLVED)
    incident.refresh_from_db()
    return incident


def test_each_figure_is_what_the_known_history_gives_with_its_query(resolved_incident):
    postmortem, created = postmortem_draft(incident=resolved_incident, user=None, via="system")
    figures = {f["key"]: f for f in postmortem.latest().figures}
    assert figures["duration_s"]["value"] == 3600 and figures["detect_s"]["value"] == 0
    assert figures["resolve_s"]["value"] == 3600 and figures["duration_s"]["source"] == "incident"
    # 10 failed per minute at the gateway for 60 minutes; its 2xx are not counted.
    failed = figures["requests_failed"]
    assert failed["value"] == 600 and failed["source"] == "import"
    assert (
        'envoy_response_code_class="5"' in failed["query"]
        and "httproute/(llm)/(vllm-llama)" in failed["query"]
    )
    assert failed["range"] == {"start": ONSET.isoformat().replace("+00:00", "Z"),
                               "end": RESOLVED.isoformat().replace("+00:00", "Z"), "step": 60.0}  # fmt: skip
    # 2 shed per minute on this route; the other route's 50 per second are not this incident's.
    assert figures["requests_shed"]["value"] == 120
    # 90 of 100 within 2.5 s, 60 within 1 s: 2 s is two thirds into the bucket, so 80 within it.
    ttft = figures["share_over_ttft_objective"]
    assert ttft["value"] == pytest.approx(0.20, abs=1e-4) and ttft["approximate"]
    assert "vllm:time_to_first_token_seconds_bucket" in ttft["query"]
    # 1,000 tokens/s the hour before; after onset the first point's 2-minute rate is half old, half
    # new (700/s), the 59 others 400/s: served 700*60 + 400*60*59 of the 3,600,000 expected.
    assert figures["tokens_not_served"]["value"] == 3_600_000 - (700 * 60 + 400 * 60 * 59)
    # waiting to restart for 10 one-minute steps, its pod requests 2 GPUs.
    assert figures["gpu_hours_lost"]["value"] == pytest.approx(round(10 * 60 * 2 / 3600, 2))


def test_a_missing_metric_is_not_available_with_the_reason(resolved_incident):
    postmortem, _ = postmortem_draft(incident=resolved_incident, user=None, via="system")
    figures = {f["key"]: f for f in postmortem.latest().figures}
    tpot = figures["share_over_tpot_objective"]
    assert tpot["available"] is False and tpot["value"] is None
    assert "vllm:time_per_output_token_seconds_bucket" in tpot["reason"] and "no series" in tpot["reason"]
    assert figures["sli_recovery_s"]["available"] is False
    assert "no TTFT, TPOT or ITL series" in figures["sli_recovery_s"]["reason"]
    text = revision_markdown(postmortem.latest())
    assert "not available" in text and "____" not in text
    assert "600 requests failed" in text


def test_nothing_is_guessed_without_any_metric(make_integration, deliver, users):
    integration = make_integration()
    start = ONSET.isoformat().replace("+00:00", "Z")
    deliver(
        integration, am_body(am_alert("LLMContainerOOMKilled", start, severity="critical", pod=POD, **PLACE))
    )
    incident = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    incident_resolve(incident=incident, user=users("r", "responder"), via="api", at=RESOLVED)
    postmortem, _ = postmortem_draft(incident=incident, user=None, via="system")
    metric = [
        f for f in postmortem.latest().figures if f["source"] != "incident" or f["key"] == "sli_recovery_s"
    ]
    assert metric and all(f["available"] is False and f["value"] is None and f["reason"] for f in metric)


def test_the_rules_packs_recording_rules_are_read_before_the_raw_counters(resolved_incident, tmp_path):
    """Where a team deployed the pack's recording rules, the figure comes from them (already rates)."""
    start, end = ONSET - timedelta(hours=1), RESOLVED + timedelta(hours=1)
    labels = {"envoy_cluster_name": ROUTE, "envoy_response_code_class": "5"}
    lines = ["# TYPE llmops:gateway_upstream_rq:rate5m gauge"]
    lines += gauge("llmops:gateway_upstream_rq:rate5m", labels, lambda t: 0.5, start, end)
    path = tmp_path / "recorded.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    local_series_import(path=path)
    postmortem, _ = postmortem_draft(incident=resolved_incident, user=None, via="system")
    failed = {f["key"]: f for f in postmortem.latest().figures}["requests_failed"]
    assert failed["query"].startswith("llmops:gateway_upstream_rq:rate5m{") and "rate(" not in failed["query"]
    assert failed["value"] == 0.5 * 3600  # half a request a second for the hour
