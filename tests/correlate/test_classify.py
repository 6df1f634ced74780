import pytest

from correlate.catalog import load_catalog
from correlate.classify import Classifier, name_words, required_literal, rule_expressions
from correlate.testing import make_alert, make_change

CLASSIFIER = Classifier(load_catalog(use_env=False))


def classify(alert):
    return CLASSIFIER.classify(alert)


@pytest.mark.parametrize(
    "value, mode",
    [
        ("F1", "oom"),
        ("f2", "preemption"),
        ("F3", "timeout"),
        ("F4", "kv_fragmentation"),
        ("F5", "hot_instance"),
        ("F6", "numeric"),
        ("OOM", "oom"),
        ("gpu_error", "gpu_error"),
    ],
)
def test_explicit_failure_mode_label_wins_with_synonyms(value, mode):
    alert = make_alert("SomethingVague", "01:00", failure_mode=value)
    assert classify(alert).failure_mode == mode


@pytest.mark.parametrize(
    "value, layer",
    [
        ("engine-scheduler", "engine"),
        ("Scheduler", "engine"),
        ("serving-routing", "serving"),
        ("routing", "serving"),
        ("gateway", "serving"),
        ("GPU", "hardware"),
        ("node-hw", "hardware"),
        ("k8s", "platform"),
        ("Kubernetes", "platform"),
        ("process", "process"),
    ],
)
def test_explicit_layer_label_is_read_through_synonyms(value, layer):
    alert = make_alert("KVCacheFragmentationHigh", "01:00", layer=value)
    result = classify(alert)
    assert result.layer == layer
    assert result.failure_mode == "kv_fragmentation"


@pytest.mark.parametrize(
    "labels, layer, mode",
    [
        ({"layer": "inference"}, "engine", "other"),
        ({"layer": "Model-Server"}, "engine", "other"),
        ({"layer": "Infrastructure"}, "platform", "other"),
        ({"layer": "ingress"}, "serving", "other"),
        ({"failure_mode": "memory"}, "platform", "oom"),
        ({"failure_mode": "NaN/Inf"}, "engine", "numeric"),
        ({"failure_mode": "hardware"}, "hardware", "gpu_error"),
        ({"failure_mode": "ghost-requests"}, "serving", "timeout"),
        ({"failure_mode": "saturation"}, "engine", "queueing"),
    ],
)
def test_teams_own_words_for_layers_and_modes(labels, layer, mode):
    result = classify(make_alert("SomethingVague", "01:00", **labels))
    assert (result.layer, result.failure_mode) == (layer, mode)


@pytest.mark.parametrize("value", ["unknown", "none", "other", "", "None"])
def test_labels_that_say_nothing_defer_to_the_catalog(value):
    alert = make_alert("LLMContainerOOMKilled", "01:00", failure_mode=value, layer=value)
    result = classify(alert)
    assert (result.layer, result.failure_mode) == ("platform", "oom")


@pytest.mark.parametrize(
    "name, mode",
    [
        ("LLMTTFTSLOBreach", "slo_ttft"),
        ("TimePerOutputTokenSLO", "slo_tpot"),
        ("StreamingITLJitterSLO", "slo_itl"),
    ],
)
def test_slo_label_lets_the_name_decide_which_slo(name, mode):
    assert classify(make_alert(name, "01:00", failure_mode="SLO")).failure_mode == mode


@pytest.mark.parametrize(
    "name, mode, layer",
    [
        ("LLMContainerOOMKilled", "oom", "platform"),
        ("KubePodOOMKilled", "oom", "platform"),
        ("LLMGpuFramebufferExhausted", "oom", "hardware"),
        ("GPUMemoryHigh", "oom", "hardware"),
        ("LLMKVCachePoolUtilizationCritical", "oom", "engine"),
        ("VllmKVCacheUsageHigh", "oom", "engine"),
        ("LLMKVFragmentationHigh", "kv_fragmentation", "engine"),
        ("LLMVllmPreemptingWithFreeKV", "kv_fragmentation", "engine"),
        ("LLMTrtllmPausedWithFreeKV", "kv_fragmentation", "engine"),
        ("LLMVllmPreemptionsHigh", "preemption", "engine"),
        ("LLMSglangRetractions", "preemption", "engine"),
        ("LLMTritonTrtllmPausedRequests", "preemption", "engine"),
        ("LLMVllmHighAbortRatio", "timeout", "serving"),
        ("LLMEngineRunningWithoutCompletions", "timeout", "serving"),
        ("LLMGatewayUpstreamTimeouts", "timeout", "serving"),
        ("LLMTritonCanceledOrRejected", "timeout", "serving"),
        ("LLMHotReplicaTokens", "hot_instance", "serving"),
        ("LLMEppQueueImbalance", "hot_instance", "serving"),
        ("LLMRouterQpsSkew", "hot_instance", "serving"),
        ("LLMNaNLogitsDetected", "numeric", "engine"),
        ("LLMRepetitionFinishSpike", "numeric", "engine"),
        ("LLMGpuXidMemoryError", "gpu_error", "hardware"),
        ("DCGMXidErrors", "gpu_error", "hardware"),
        ("LLMGpuEccDoubleBitErrors", "gpu_error", "hardware"),
        ("LLMGpuRowRemapFailure", "gpu_error", "hardware"),
        ("GPUSMUtilImbalance", "gpu_error", "hardware"),
        ("LLMEngineContainerCrashLoop", "restart", "engine"),
        ("KubePodCrashLooping", "restart", "platform"),
        ("KubeContainerWaiting", "restart", "platform"),
        ("TargetDown", "target_down", "platform"),
        ("DcgmExporterDown", "target_down", "platform"),
        ("VllmMetricsAbsent", "target_down", "platform"),
        ("LLMTTFTp99High", "slo_ttft", "serving"),
        ("HighTimeToFirstToken", "slo_ttft", "serving"),
        ("LLMTPOTp99High", "slo_tpot", "serving"),
        ("LLMInterTokenLatencyJitter", "slo_itl", "serving"),
        ("LLMVllmBatchFillLow", "queueing", "engine"),
        ("VllmRequestsWaitingHigh", "queueing", "engine"),
        ("LLMQueueWaitHigh", "queueing", "engine"),
        ("LLMSpecDecodeAcceptanceLow", "spec_decode", "engine"),
        ("SpeculativeDecodingAcceptanceDrop", "spec_decode", "engine"),
        ("LLMGateway5xxRate", "error_rate", "serving"),
        ("EnvoyUpstreamErrorRateHigh", "error_rate", "serving"),
        # kube-prometheus, awesome-prometheus-alerts and teams' own names that were unknown/other
        # a rollout that did not go through is the change itself, announced by kube-state-metrics
        ("KubeDeploymentRolloutStuck", "change", "process"),
        ("KubeStatefulSetGenerationMismatch", "change", "process"),
        ("KubeStatefulSetUpdateNotRolledOut", "change", "process"),
        ("KubeDaemonSetRolloutStuck", "change", "process"),
        ("KubernetesPodNotHealthy", "restart", "platform"),
        ("InferencePoolNoReadyPods", "restart", "platform"),
        ("InferencePoolReadyEndpointsLow", "restart", "platform"),
        ("NodeMemoryHighUtilization", "oom", "platform"),
        ("NodeHasMemoryPressure", "oom", "platform"),
        ("DCGMGpuFellOffBus", "gpu_error", "hardware"),
        ("GpuHighTemperature", "gpu_error", "hardware"),
        ("DecodeSpeedLow", "slo_tpot", "serving"),
        ("NaNDetected", "numeric", "engine"),
        ("SGLangBusyNotFinishing", "timeout", "serving"),
    ],
)
def test_real_alert_names_are_recognised(name, mode, layer):
    result = classify(make_alert(name, "01:00"))
    assert (result.failure_mode, result.layer) == (mode, layer), result


@pytest.mark.parametrize(
    "name, mode",
    [
        ("KubeNodeNotReady", "node_not_ready"),
        ("NodeNotReady", "node_not_ready"),
        ("KubernetesNodeNotReady", "node_not_ready"),
        ("KubernetesNodeReady", "node_not_ready"),
        ("KubeNodeUnreachable", "node_not_ready"),
        ("KubeNodeReadinessFlapping", "node_not_ready"),
        # kubelet targets gone from Prometheus (no node label) is a scrape problem; a pod is no node
        ("KubeletDown", "target_down"),
        ("KubePodNotReady", "restart"),
        ("NodeExporterDown", "target_down"),
    ],
)
def test_a_node_that_stops_posting_status_is_a_node_failure_not_a_restart(name, mode):
    result = classify(make_alert(name, "01:00", node="gpu-node-3"))
    assert (result.failure_mode, result.layer) == (mode, "platform"), result


@pytest.mark.parametrize(
    "expr, mode",
    [
        ("max by (pod)(vllm:kv_cache_usage_perc) > 0.85", "oom"),
        ("DCGM_FI_DEV_FB_FREE < 1024", "oom"),
        ("sum by (pod)(rate(vllm:num_preemptions_total[5m])) > 0.1", "preemption"),
        ("llmops:kv_cache_fragmentation:ratio > 0.25", "kv_fragmentation"),
        ("max_over_time(DCGM_FI_DEV_XID_ERRORS[10m]) > 0", "gpu_error"),
        ("increase(vllm:corrupted_requests_total[5m]) > 0", "numeric"),
        ('kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"} == 1', "restart"),
        (
            "histogram_quantile(0.99, sum by(le)(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2",
            "slo_ttft",
        ),
        ('up{job="vllm"} == 0', "target_down"),
        ("kube_statefulset_status_replicas_ready != kube_statefulset_status_replicas", "restart"),
        ('kube_node_status_condition{condition="Ready",status="true"} == 0', "node_not_ready"),
        ('kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1', "oom"),
        ("sglang:token_usage > 0.92", "oom"),
        ('nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"} > 0.9', "oom"),
        (
            'nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests"} > 0',
            "preemption",
        ),
        # running with no completions is ghost work (F3), not a queue
        (
            "sum by (pod) (vllm:num_requests_running) > 0 and on (pod) "
            "sum by (pod) (increase(vllm:request_success_total[10m])) == 0",
            "timeout",
        ),
        ("sglang:num_running_reqs > 0 and rate(sglang:num_requests_total[10m]) == 0", "timeout"),
        ("sum by (pod) (vllm:num_requests_running) > 64", "queueing"),
    ],
)
def test_vague_names_fall_back_to_the_rule_expression(expr, mode):
    assert classify(make_alert("Rule17", "01:00", expr=expr)).failure_mode == mode


def test_metric_named_in_annotations_classifies_when_name_and_url_say_nothing():
    alert = make_alert(
        "PageTeamB", "01:00", annotations={"description": "sglang:num_retracted_reqs above 0 on pod x"}
    )
    assert classify(alert).failure_mode == "preemption"


def test_unknown_alerts_stay_unknown_other():
    result = classify(make_alert("HostDiskWillFillIn4Hours", "01:00", annotations={"summary": "disk"}))
    assert (result.layer, result.failure_mode) == ("unknown", "other")


def test_change_events_and_marked_alerts_are_process_change():
    assert classify(make_change("Deploy vllm-llama v2", "01:00")).failure_mode == "change"
    marked = make_alert("ArgoSync", "01:00", rootline_kind="change")
    assert (classify(marked).layer, classify(marked).failure_mode) == ("process", "change")


def test_name_words_split_camel_case_and_separators():
    assert name_words("LLMContainerOOMKilled") == "llm container oom killed"
    assert name_words("NaNDetected") == "nan detected"
    assert name_words("LLMNaNLogitsDetected") == "llm nan logits detected"
    assert name_words("NaNs") == "nans"
    assert name_words("vllm:kv_cache-usage") == "vllm kv cache usage"


def test_rule_expression_is_url_decoded_from_generator_url():
    url = "http://p:9090/graph?g0.expr=llm_kv_cache_fragmentation_ratio+%3E+0.25&g0.tab=1"
    assert rule_expressions(url) == "llm_kv_cache_fragmentation_ratio > 0.25"


def test_rule_expression_is_read_from_a_grafana_explore_link_as_vmalert_sends_it():
    import json
    from dataclasses import replace
    from urllib.parse import quote

    from correlate.timing import onset_of

    left = {
        "datasource": "VictoriaMetrics",
        "queries": [
            {"expr": 'avg_over_time(llm_kv_cache_fragmentation_ratio{pod="p"}[15m]) > 0.25', "refId": "A"}
        ],
        "range": {"from": "now-1h", "to": "now"},
    }
    url = "https://grafana.example.com/explore?orgId=1&left=" + quote(json.dumps(left))
    assert rule_expressions(url) == 'avg_over_time(llm_kv_cache_fragmentation_ratio{pod="p"}[15m]) > 0.25'
    panes = {"a1b": {"datasource": "prom", "queries": [{"refId": "A", "expr": "sglang:token_usage > 0.9"}]}}
    assert (
        rule_expressions("https://g/explore?schemaVersion=1&panes=" + quote(json.dumps(panes)))
        == "sglang:token_usage > 0.9"
    )
    alert = replace(make_alert("trt-rule-3", "05:16"), generator_url=url)
    assert classify(alert).failure_mode == "kv_fragmentation"
    assert (alert.starts_at - onset_of(alert)).total_seconds() == 900
    assert rule_expressions("http://vmalert:8880/vmalert/alert?group_id=1&alert_id=2") == ""


def test_an_answer_cached_by_name_is_only_one_the_name_decided():
    # Answers decided by the alert name and explicit labels are cached by those alone (a storm's
    # annotations name each pod); one that read the rule URL or annotations never is.
    classifier = Classifier(load_catalog(use_env=False))
    oom = [
        make_alert("LLMContainerOOMKilled", "01:00", annotations={"description": f"pod {n} was killed"})
        for n in range(3)
    ]
    assert {classifier.classify(a).failure_mode for a in oom} == {"oom"}
    assert len(classifier._by_name) == 1
    vague = [
        make_alert("PageTeamB", "01:00", annotations={"description": "sglang:num_retracted_reqs above 0"}),
        make_alert("PageTeamB", "01:00", annotations={"description": "nothing to see"}),
        make_alert("PageTeamB", "01:00", expr="DCGM_FI_DEV_FB_FREE < 1024"),
        make_alert(
            "SomethingSlow", "01:00", failure_mode="slo", expr="vllm:time_per_output_token_seconds_bucket"
        ),
        make_alert(
            "SomethingSlow", "01:00", failure_mode="slo", expr="vllm:time_to_first_token_seconds_bucket"
        ),
        # a name the catalog knows, marked as an SLO breach: which SLO is read from the rule
        make_alert("LLMContainerOOMKilled", "01:00", failure_mode="slo", expr="llm:tpot_p99 > 0.2"),
        make_alert("LLMContainerOOMKilled", "01:00", failure_mode="slo", expr="llm:ttft_p99 > 2"),
    ]
    assert [classifier.classify(a).failure_mode for a in vague] == [
        Classifier(load_catalog(use_env=False)).classify(a).failure_mode for a in vague
    ]
    assert [classifier.classify(a).failure_mode for a in vague][:3] == ["preemption", "other", "oom"]
    assert [classifier.classify(a).failure_mode for a in vague][-2:] == ["slo_tpot", "slo_ttft"]
    assert len(classifier._by_name) == 1


def test_a_shared_classifier_answers_as_a_fresh_one_for_every_alert():
    import random

    catalog = load_catalog(use_env=False)
    names = [
        "LLMContainerOOMKilled",
        "Rule17",
        "PageTeamB",
        "KVCacheFragmentationHigh",
        "SomethingVague",
        "LLMTTFTp99High",
    ]
    exprs = ["", "DCGM_FI_DEV_FB_FREE < 1024", "llmops:kv_cache_fragmentation:ratio > 0.25", "up == 0"]
    notes = [{}, {"description": "sglang:num_retracted_reqs above 0"}, {"summary": "disk"}]
    labels = [
        {},
        {"failure_mode": "F1"},
        {"failure_mode": "slo"},
        {"layer": "gateway"},
        {"failure_mode": "unknown"},
    ]
    rng = random.Random(4)
    shared = Classifier(catalog)
    for _ in range(400):
        alert = make_alert(
            rng.choice(names),
            "01:00",
            expr=rng.choice(exprs),
            annotations=rng.choice(notes),
            **rng.choice(labels),
        )
        assert shared.classify(alert) == Classifier(catalog).classify(alert)


@pytest.mark.parametrize(
    "labels, mode",
    [
        ({"sloth_service": "codegen", "sloth_slo": "tpot-p99", "sloth_id": "codegen-tpot-p99"}, "slo_tpot"),
        ({"sloth_service": "codegen", "sloth_slo": "ttft-p99", "sloth_id": "codegen-ttft-p99"}, "slo_ttft"),
        ({"sloth_service": "codegen", "sloth_slo": "requests-availability"}, "error_rate"),
        ({"slo": "chat-itl-jitter"}, "slo_itl"),  # Pyrra
        (
            {"sloth_slo": "gpu-hours"},
            "error_rate",
        ),  # names no SLO the catalog knows: the alert's name decides
    ],
)
def test_a_generated_burn_rate_alert_is_the_slo_its_generator_names(labels, mode):
    """Sloth and Pyrra name every burn-rate alert alike; their labels say which SLO burns. The
    classifier's cache by name must keep two such SLOs apart."""
    classifier = Classifier(load_catalog(use_env=False))
    alert = make_alert("SlothErrorBudgetBurnRate", "02:00", namespace="codegen", **labels)
    assert classifier.classify(alert).failure_mode == mode
    assert (
        classifier.classify(make_alert("SlothErrorBudgetBurnRate", "02:01", namespace="codegen")).failure_mode
        == "error_rate"
    )


@pytest.mark.parametrize(
    "name, mode",
    [
        ("NodeClockSkewDetected", "other"),
        ("NodeTimeSkew", "other"),
        ("ClockSkew", "other"),
        ("RouterLoadSkewHigh", "hot_instance"),
        ("LLMRequestSkew", "hot_instance"),
    ],
)
def test_a_clock_skew_is_no_hot_instance_but_a_load_skew_is(name, mode):
    """node-exporter's NodeClockSkewDetected (the node's clock drifts) matched the hot-instance
    word `skew`, and a storm's clock-skew noise was read as a hot replica."""
    assert classify(make_alert(name, "01:00")).failure_mode == mode


def every_pattern_searched(kind, text):
    """The first matcher with a pattern of `kind` found in `text`, every pattern searched."""
    for matcher in CLASSIFIER.catalog.matchers:
        if any(p.search(text) for p in getattr(matcher, kind)):
            return matcher
    return None


MATCHED_TEXTS = [
    "llm container oom killed",
    "LLMContainerOOMKilled",
    "kv cache fragmentation high",
    "KV CACHE Fragmentation",
    "vllm:num_preemptions_total",
    "VLLM:NUM_PREEMPTIONS_TOTAL",
    "DCGM_FI_DEV_XID_ERRORS",
    "dcgm fi dev xid errors",
    "node clock skew detected",
    "clock skew",
    "time skew",
    "replica skew on the gateway",
    "thermal throttling",
    "trt llm engine crashed",
    "sglang worker not ready",
    "kube pod crash looping",
    "target down",
    "ttft p99 high",
    "has been firing for dcgm-exporter-k2x4p in gpu-eu-06 for more than 2 minutes.",
    "Gateway 5xx rate above 2% for 10m",
    'rate(http_requests_total{code=~"5.."}[5m])',
    "eagle draft acceptance low",
    "medusa",
    "Ko\u212aillED",
    "\u017fglang \u017ferver down",
    "gpu ｘid",
    "",
    " ",
    "oo",
    "kil",
]


@pytest.mark.parametrize("kind", ["names", "metrics"])
def test_pattern_shortcut_finds_the_same_matcher_as_searching_every_pattern(kind):
    """The search skips a pattern when ASCII text lacks the characters every match of it holds
    (`required_literal`); it must still answer as searching every pattern in order would, for text
    each pattern finds, in other cases, cut short, and not ASCII (where case folding is not lower())."""
    patterns = CLASSIFIER._names if kind == "names" else CLASSIFIER._metrics
    texts = list(MATCHED_TEXTS)
    for matcher in CLASSIFIER.catalog.matchers:
        for pattern in getattr(matcher, kind):
            literal = required_literal(pattern)
            texts += [
                literal,
                literal.upper(),
                literal[:-1],
                f"alpha {literal} omega",
                literal.replace(" ", "_"),
            ]
    checked = 0
    for text in texts:
        expected = every_pattern_searched(kind, text)
        assert patterns._search(text) is expected, text
        checked += expected is not None
    assert checked > 100  # the texts do reach most matchers


def test_required_literal_is_held_by_every_match_and_absent_where_unsure():
    import re

    assert required_literal(re.compile(r"kv ?cache (frag|fragmentation)", re.I)) == "cache "
    assert required_literal(re.compile(r"(?<!clock )(?<!time )skew", re.I)) == "skew"
    assert required_literal(re.compile(r"eagle|medusa", re.I)) == ""  # either alternative can match alone
    assert required_literal(re.compile(r"GPU_\w+_ERRORS")) == "_errors"
    assert required_literal(re.compile(r"x?y")) == ""  # one character is no shortcut
