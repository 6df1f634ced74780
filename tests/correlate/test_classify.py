import pytest

from correlate.catalog import load_catalog
from correlate.classify import Classifier, name_words, rule_expressions
from correlate.testing import make_alert, make_change

CLASSIFIER = Classifier(load_catalog(use_env=False))


def classify(alert):
    return CLASSIFIER.classify(alert)


@pytest.mark.parametrize(
    "value, mode",
    [("F1", "oom"), ("f2", "preemption"), ("F3", "timeout"), ("F4", "kv_fragmentation"),
     ("F5", "hot_instance"), ("F6", "numeric"), ("OOM", "oom"), ("gpu_error", "gpu_error")],
)
def test_explicit_failure_mode_label_wins_with_synonyms(value, mode):
    alert = make_alert("SomethingVague", "01:00", failure_mode=value)
    assert classify(alert).failure_mode == mode


@pytest.mark.parametrize(
    "value, layer",
    [("engine-scheduler", "engine"), ("Scheduler", "engine"), ("serving-routing", "serving"),
     ("routing", "serving"), ("gateway", "serving"), ("GPU", "hardware"), ("node-hw", "hardware"),
     ("k8s", "platform"), ("Kubernetes", "platform"), ("process", "process")],
)
def test_explicit_layer_label_is_read_through_synonyms(value, layer):
    alert = make_alert("KVCacheFragmentationHigh", "01:00", layer=value)
    result = classify(alert)
    assert result.layer == layer
    assert result.failure_mode == "kv_fragmentation"


@pytest.mark.parametrize("value", ["unknown", "none", "other", "", "None"])
def test_labels_that_say_nothing_defer_to_the_catalog(value):
    alert = make_alert("LLMContainerOOMKilled", "01:00", failure_mode=value, layer=value)
    result = classify(alert)
    assert (result.layer, result.failure_mode) == ("platform", "oom")


@pytest.mark.parametrize(
    "name, mode",
    [("LLMTTFTSLOBreach", "slo_ttft"), ("TimePerOutputTokenSLO", "slo_tpot"), ("StreamingITLJitterSLO", "slo_itl")],
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
    ],
)
def test_real_alert_names_are_recognised(name, mode, layer):
    result = classify(make_alert(name, "01:00"))
    assert (result.failure_mode, result.layer) == (mode, layer), result


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
        ("histogram_quantile(0.99, sum by(le)(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2", "slo_ttft"),
        ("up{job=\"vllm\"} == 0", "target_down"),
    ],
)
def test_vague_names_fall_back_to_the_rule_expression(expr, mode):
    assert classify(make_alert("Rule17", "01:00", expr=expr)).failure_mode == mode


def test_metric_named_in_annotations_classifies_when_name_and_url_say_nothing():
    alert = make_alert("PageTeamB", "01:00", annotations={"description": "sglang:num_retracted_reqs above 0 on pod x"})
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
    assert name_words("vllm:kv_cache-usage") == "vllm kv cache usage"


def test_rule_expression_is_url_decoded_from_generator_url():
    url = "http://p:9090/graph?g0.expr=llm_kv_cache_fragmentation_ratio+%3E+0.25&g0.tab=1"
    assert rule_expressions(url) == "llm_kv_cache_fragmentation_ratio > 0.25"
