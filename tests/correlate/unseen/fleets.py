"""The scenarios: each a function building one fleet's afternoon, registered in SCENARIOS."""
from __future__ import annotations

from collections.abc import Callable

from unseen.payloads import Scenario, Story

SCENARIOS: dict[str, Callable[[], Scenario]] = {}


def scenario(build: Callable[[], Scenario]) -> Callable[[], Scenario]:
    SCENARIOS[build.__name__] = build
    return build


def _ksm(cluster: dict[str, str], namespace: str, **labels: str) -> dict[str, str]:
    """kube-state-metrics target labels as kube-prometheus-stack attaches them (honorLabels)."""
    return {**cluster, "namespace": namespace, "job": "kube-state-metrics", "endpoint": "http",
            "instance": "10.52.3.17:8080", "service": "prometheus-kube-state-metrics", **labels}


@scenario
def sglang_statefulset_fragmentation() -> Scenario:
    """SGLang StatefulSet (`llama-70b-0`), cluster as `k8s_cluster`, namespace as `kubernetes_namespace`:
    fragmentation (fires last: 'for more than 15 minutes') -> token pool -> OOMKilled -> crash loop
    -> statefulset mismatch -> siblings queue -> TTFT at the gateway. An eval job fails just before."""
    s = Story("sglang_statefulset_fragmentation", __doc__ or "")
    where = {"k8s_cluster": "gke-inference-eu"}
    model = {"model_name": "meta-llama/Llama-3.1-70B-Instruct"}
    engine = {**where, "kubernetes_namespace": "serving", "service": "llama-70b", "job": "llama-70b",
              "endpoint": "metrics", **model}
    s.fire("job_failed", "KubeJobFailed", "01:41",
           labels=_ksm(where, "serving", job_name="eval-llama-70b-29123", condition="true", severity="warning"),
           expr='kube_job_failed{job="kube-state-metrics",namespace=~".*"} > 0')
    s.fire("token_usage", "LlamaServingMemory", "01:52", labels={**engine, "kubernetes_pod_name": "llama-70b-0",
           "severity": "Warning"}, expr='max by (kubernetes_pod_name) (sglang:token_usage{model_name=~".*70B.*"}) > 0.92',
           resolved="02:01")
    s.fire("oom", "KubernetesContainerOomKiller", "02:01",
           labels={**where, "namespace": "monitoring", "pod": "kube-state-metrics-6f7d9c8b5-q2w4e",
                   "exported_namespace": "serving", "exported_pod": "llama-70b-0", "container": "sglang",
                   "job": "kube-state-metrics", "severity": "warning"},
           expr='(kube_pod_container_status_restarts_total - kube_pod_container_status_restarts_total offset 10m >= 1) '
                'and ignoring (reason) min_over_time(kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}[10m]) == 1')
    s.fire("crashloop", "KubePodCrashLooping", "02:03",
           labels=_ksm(where, "serving", pod="llama-70b-0", container="sglang", reason="CrashLoopBackOff",
                       uid="4f1c2a9e-9b1d-4d6e-8a51-0c3f2b7d9e11", severity="warning"),
           expr='max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1',
           annotations={"description": 'Pod serving/llama-70b-0 (sglang) is in waiting state (reason: "CrashLoopBackOff").',
                        "summary": "Pod is crash looping."})
    s.fire("frag", "llama-serving-kv-frag", "02:06", labels={**engine, "kubernetes_pod_name": "llama-70b-0",
           "severity": "page"}, expr='llmops:kv_cache_fragmentation:ratio{kubernetes_pod_name=~"llama-70b-.*"} > 0.25',
           annotations={"description": "KV cache fragmentation on llama-70b-0 has been above 25% for more than 15 minutes."})
    s.fire("sts_mismatch", "KubeStatefulSetReplicasMismatch", "02:09",
           labels=_ksm(where, "serving", statefulset="llama-70b", pod="prometheus-kube-state-metrics-7d9f8-x2k4p",
                       container="kube-state-metrics", severity="warning"),
           expr='(kube_statefulset_status_replicas_ready{job="kube-state-metrics"} != kube_statefulset_status_replicas{job="kube-state-metrics"})')
    s.fire("queue_1", "SGLangQueueBacklog", "02:08", labels={**engine, "kubernetes_pod_name": "llama-70b-1", "severity": "warning"},
           expr="sum by (kubernetes_pod_name) (sglang:num_queue_reqs) > 32")
    s.fire("queue_2", "SGLangQueueBacklog", "02:10", labels={**engine, "kubernetes_pod_name": "llama-70b-2", "severity": "warning"},
           expr="sum by (kubernetes_pod_name) (sglang:num_queue_reqs) > 32")
    s.fire("ttft", "InferenceTTFTBudgetBurn", "02:12",
           labels={**where, "kubernetes_namespace": "serving", "route": "llama-70b", "severity": "critical"},
           expr='histogram_quantile(0.99, sum by (le, model_name) (rate(sglang:time_to_first_token_seconds_bucket[5m]))) > 2')
    s.incident("frag", "token_usage", "oom", "crashloop", "sts_mismatch", "queue_1", "queue_2", "ttft")
    s.noise("job_failed")
    return s.build()


@scenario
def triton_xid_crash() -> Scenario:
    """Triton + TensorRT-LLM: an Xid 79 seen by dcgm-exporter (its own pod in `pod`, the workload in
    `exported_pod`) -> metrics target down -> crash loop -> the sibling queues -> first-response SLO.
    Triton's `model` label is the repository name (`ensemble`) in every deployment; a second
    deployment's queue blip and a GPU temperature warning on another node are unrelated."""
    s = Story("triton_xid_crash", __doc__ or "")
    where = {"cluster": "aks-westus3-gpu"}
    pod = "triton-mixtral-8x7b-5f6d7c8b9-k2x7p"
    sibling = "triton-mixtral-8x7b-5f6d7c8b9-p9m3z"
    dcgm = {**where, "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter", "service": "nvidia-dcgm-exporter",
            "job": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics", "modelName": "NVIDIA H100 80GB HBM3"}
    triton = {**where, "namespace": "inference", "service": "triton-mixtral-8x7b", "job": "triton-mixtral-8x7b",
              "endpoint": "metrics", "model": "ensemble", "version": "1"}
    s.fire("xid", "NvidiaGpuCritical", "03:00",
           labels={**dcgm, "pod": "nvidia-dcgm-exporter-7xk2p", "instance": "10.40.7.3:9400", "Hostname": "gpu-node-07",
                   "gpu": "3", "device": "nvidia3", "UUID": "GPU-5d7e0c1a-8f3b-4e2d-9c6a-1b2c3d4e5f60",
                   "err_code": "79", "err_msg": "GPU has fallen off the bus", "exported_namespace": "inference",
                   "exported_pod": pod, "exported_container": "triton", "severity": "critical"},
           expr="DCGM_FI_DEV_XID_ERRORS > 0", resolved="03:20")
    s.fire("target_down", "TargetDown", "03:02",
           labels={**where, "job": "triton-mixtral-8x7b", "namespace": "inference", "service": "triton-mixtral-8x7b",
                   "severity": "warning"},
           expr="100 * (count(up == 0) BY (cluster, job, namespace, service) / count(up) BY (cluster, job, namespace, service)) > 10",
           annotations={"description": "50% of the triton-mixtral-8x7b/triton-mixtral-8x7b targets in inference namespace are down."})
    s.fire("crashloop", "KubePodCrashLooping", "03:05",
           labels=_ksm(where, "inference", pod=pod, container="triton", reason="CrashLoopBackOff", severity="warning"),
           expr='max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1')
    s.fire("temp", "GpuTemperatureWarning", "03:04",
           labels={**dcgm, "pod": "nvidia-dcgm-exporter-m4q8z", "instance": "10.40.2.9:9400", "Hostname": "gpu-node-02",
                   "gpu": "1", "UUID": "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", "severity": "warning"},
           expr="DCGM_FI_DEV_GPU_TEMP > 83")
    s.fire("queue", "TritonQueueLatencyHigh", "03:06",
           labels={**triton, "pod": sibling, "instance": "10.40.7.21:8002", "severity": "warning"},
           expr="rate(nv_inference_queue_duration_us[5m]) / clamp_min(rate(nv_inference_request_success[5m]), 1) / 1e6 > 0.3")
    s.fire("other_queue", "TritonQueueLatencyHigh", "03:07",
           labels={**where, "namespace": "inference", "service": "triton-llama3-8b", "job": "triton-llama3-8b",
                   "endpoint": "metrics", "model": "ensemble", "version": "1", "pod": "triton-llama3-8b-7b6c5d4f8-zz9rk",
                   "instance": "10.40.5.11:8002", "severity": "warning"},
           expr="rate(nv_inference_queue_duration_us[5m]) / clamp_min(rate(nv_inference_request_success[5m]), 1) / 1e6 > 0.3",
           resolved="03:11")
    s.fire("first_response", "TritonFirstResponseSlow", "03:09",
           labels={**triton, "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, model) (rate(nv_inference_first_response_histogram_ms_bucket[5m]))) > 2000")
    s.incident("xid", "target_down", "crashloop", "queue", "first_response")
    s.noise("temp", "other_queue")
    return s.build()


@scenario
def generator_url_only() -> Scenario:
    """Rules named by ticket (`PLAT-1182`): only the generatorURL says what they watch. vLLM on a
    Deployment; labels `kubernetes_pod_name`, `kubernetes_namespace`, `cluster_name`. KV pool ->
    OOMKilled -> restarts -> scrape down -> sibling queues -> TTFT; the KV alert resolves as its
    pod dies. A node disk alert fires just before."""
    s = Story("generator_url_only", __doc__ or "")
    where = {"cluster_name": "onprem-a100-1", "kubernetes_namespace": "genai"}
    pod = "vllm-qwen2-72b-6b8d9f7c5-h4k8m"
    sibling = "vllm-qwen2-72b-6b8d9f7c5-t7n2q"
    engine = {**where, "model_name": "Qwen/Qwen2-72B-Instruct", "app": "vllm-qwen2-72b"}
    s.fire("disk", "PLAT-1300", "09:58",
           labels={**where, "instance": "gpu-node-2:9100", "job": "node-exporter", "mountpoint": "/var/lib/containerd",
                   "severity": "info"},
           expr='node_filesystem_avail_bytes{mountpoint="/var/lib/containerd"} / node_filesystem_size_bytes < 0.1')
    s.fire("kv", "PLAT-1182", "10:00", labels={**engine, "kubernetes_pod_name": pod, "severity": "P2"},
           expr="max by (kubernetes_pod_name) (vllm:gpu_cache_usage_perc) > 0.95", resolved="10:04")
    s.fire("oom", "PLAT-1190", "10:03",
           labels={"cluster_name": "onprem-a100-1", "namespace": "genai", "pod": pod, "container": "vllm",
                   "reason": "OOMKilled", "severity": "P1"},
           expr='kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1')
    s.fire("restarts", "PLAT-1191", "10:04",
           labels={"cluster_name": "onprem-a100-1", "namespace": "genai", "pod": pod, "container": "vllm", "severity": "P2"},
           expr="increase(kube_pod_container_status_restarts_total[15m]) > 2")
    s.fire("down", "PLAT-1187", "10:05", labels={**engine, "kubernetes_pod_name": pod, "job": "vllm", "severity": "P3"},
           expr='up{job="vllm"} == 0', resolved="10:12")
    s.fire("queue", "PLAT-1185", "10:07", labels={**engine, "kubernetes_pod_name": sibling, "severity": "P3"},
           expr="sum by (kubernetes_pod_name) (vllm:num_requests_waiting) > 20", resolved="10:20")
    s.fire("ttft", "PLAT-1184", "10:09", labels={**where, "model_name": "Qwen/Qwen2-72B-Instruct", "severity": "P1"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2")
    s.incident("kv", "oom", "restarts", "down", "queue", "ttft")
    s.noise("disk")
    return s.build()


@scenario
def sglang_hot_prefix() -> Scenario:
    """A hot prefix on one SGLang replica; the skew rule averages 20 minutes so it fires last.
    The hot pod queues, its TTFT rises, then the gateway's (llm-d EPP) TTFT for the model."""
    s = Story("sglang_hot_prefix", __doc__ or "")
    where = {"cluster": "eks-prod-use1", "namespace": "assist"}
    hot = "sglang-qwen25-32b-7c8d9f6b5-abcd2"
    model = {"model_name": "Qwen/Qwen2.5-32B-Instruct"}
    engine = {**where, **model, "service": "sglang-qwen25-32b", "engine_type": "unified", "tp_rank": "0"}
    s.fire("queue", "SGLangRequestsQueued", "14:08", labels={**engine, "pod": hot, "severity": "warning"},
           expr="sum by (pod) (sglang:num_queue_reqs) > 16")
    s.fire("pod_ttft", "SGLangTTFTHigh", "14:12", labels={**engine, "pod": hot, "severity": "P2"},
           expr="histogram_quantile(0.99, sum by (le, pod) (rate(sglang:time_to_first_token_seconds_bucket[5m]))) > 2")
    s.fire("gw_ttft", "EppTTFTSLO", "14:15",
           labels={**where, "model_name": "qwen25-32b", "target_model_name": "Qwen/Qwen2.5-32B-Instruct", "job": "llm-d-epp",
                   "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(llm_d_epp_request_ttft_seconds_bucket[5m]))) > 2")
    s.fire("skew", "QwenPodImbalance", "14:22", labels={**engine, "pod": hot, "severity": "warning"},
           expr="avg_over_time((sum by (pod) (rate(sglang:generation_tokens_total[5m])) / on() group_left "
                "avg(sum by (pod) (rate(sglang:generation_tokens_total[5m]))))[20m:1m]) > 2")
    s.incident("skew", "queue", "pod_ttft", "gw_ttft")
    return s.build()


@scenario
def triton_preemption_itl() -> Scenario:
    """TensorRT-LLM under Triton: requests paused for KV (preemption) -> ITL jitter and TPOT at the
    gateway; severities `CRITICAL` and `sev2`. A clock alarm on the same node fires a minute before."""
    s = Story("triton_preemption_itl", __doc__ or "")
    where = {"cluster": "gke-llm-prod", "namespace": "llm"}
    pod = "trtllm-llama-3-70b-84c9d7f6b-wq2zx"
    s.fire("clock", "NodeClockNotSynchronising", "06:30",
           labels={**where, "instance": "gpu-node-11:9100", "job": "node-exporter", "severity": "warning"},
           expr="min_over_time(node_timex_sync_status[5m]) == 0 and node_timex_maxerror_seconds >= 16")
    s.fire("paused", "TrtllmSchedulerPausing", "06:31",
           labels={**where, "pod": pod, "service": "trtllm-llama-3-70b", "model": "tensorrt_llm", "version": "1",
                   "node": "gpu-node-11", "severity": "CRITICAL"},
           expr='max_over_time(nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests"}[5m]) > 0')
    s.fire("itl", "LLMStreamingJitter", "06:34",
           labels={**where, "model_name": "meta-llama/Llama-3-70B-Instruct", "job": "llm-d-epp", "severity": "sev2"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(llm_d_epp_request_streaming_itl_seconds_bucket[5m]))) "
                "- histogram_quantile(0.5, sum by (le, model_name) (rate(llm_d_epp_request_streaming_itl_seconds_bucket[5m]))) > 0.03")
    s.fire("tpot", "LLMDecodeSlow", "06:36",
           labels={**where, "model_name": "meta-llama/Llama-3-70B-Instruct", "job": "llm-d-epp", "severity": "CRITICAL"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(llm_d_epp_request_ntpot_seconds_bucket[5m]))) > 0.08")
    s.incident("paused", "itl", "tpot")
    s.noise("clock")
    return s.build()


@scenario
def two_models_common_prefix() -> Scenario:
    """Two vLLM Deployments whose names share a prefix (`llama-3-8b` and `llama-3-8b-instruct`) in
    one namespace, in trouble at once: KV pool -> OOMKilled -> crash loop -> sibling queue -> TTFT
    on the base model; preemption -> ITL -> TPOT on the instruct model."""
    s = Story("two_models_common_prefix", __doc__ or "")
    where = {"cluster": "prod-fra", "namespace": "chat"}
    a1, a2 = "llama-3-8b-6d8f9c7b5-abcde", "llama-3-8b-6d8f9c7b5-fghjk"
    b1 = "llama-3-8b-instruct-7c9d8f6b4-mnpqr"
    base = {**where, "model_name": "meta-llama/Meta-Llama-3-8B", "service": "llama-3-8b"}
    instruct = {**where, "model_name": "meta-llama/Meta-Llama-3-8B-Instruct", "service": "llama-3-8b-instruct"}
    s.fire("a_kv", "VLLMKVCacheAlmostFull", "20:00", labels={**base, "pod": a1, "severity": "warning"},
           expr="vllm:kv_cache_usage_perc > 0.9", resolved="20:03")
    s.fire("b_preempt", "VLLMPreemptionStorm", "20:02", labels={**instruct, "pod": b1, "severity": "warning"},
           expr="sum by (pod) (rate(vllm:num_preemptions_total[5m])) > 0.5")
    s.fire("a_oom", "ContainerOOMKilled", "20:03",
           labels=_ksm(where, "chat", pod=a1, container="vllm", reason="OOMKilled", severity="critical"),
           expr='kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1')
    s.fire("a_crash", "KubePodCrashLooping", "20:04",
           labels=_ksm(where, "chat", pod=a1, container="vllm", reason="CrashLoopBackOff", severity="warning"),
           expr='max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1')
    s.fire("b_itl", "VLLMITLJitter", "20:05", labels={**instruct, "severity": "warning"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:inter_token_latency_seconds_bucket[5m]))) > 0.1")
    s.fire("a_queue", "VLLMRequestsWaiting", "20:07", labels={**base, "pod": a2, "severity": "warning"},
           expr="vllm:num_requests_waiting > 10")
    s.fire("b_tpot", "VLLMTPOTHigh", "20:08", labels={**instruct, "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:request_time_per_output_token_seconds_bucket[5m]))) > 0.08")
    s.fire("a_ttft", "VLLMTTFTHigh", "20:09", labels={**base, "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2")
    s.incident("a_kv", "a_oom", "a_crash", "a_queue", "a_ttft")
    s.incident("b_preempt", "b_itl", "b_tpot")
    return s.build()


@scenario
def envoy_gateway_ghosts() -> Scenario:
    """Clients hang up at the Envoy Gateway (`httproute/<ns>/<route>/rule/0` cluster names) while
    the vLLM engines keep generating: ghost requests -> the engines queue -> gateway TTFT."""
    s = Story("envoy_gateway_ghosts", __doc__ or "")
    where = {"cluster": "prod-ams", "namespace": "llm"}
    pod = "vllm-mistral-7b-5d4c8f9b7-r8t2k"
    engine = {**where, "model_name": "mistralai/Mistral-7B-Instruct-v0.3", "service": "vllm-mistral-7b"}
    gateway = {**where, "envoy_cluster_name": "httproute/llm/mistral-7b/rule/0", "job": "envoy-gateway"}
    s.fire("disconnects", "GatewayClientResets", "11:20", labels={**gateway, "severity": "warning"},
           expr="sum by (envoy_cluster_name) (rate(envoy_http_downstream_cx_destroy_remote_active_rq[5m])) > 0.5")
    s.fire("running", "VllmBusyWithoutFinishing", "11:24", labels={**engine, "pod": pod, "severity": "warning"},
           expr="sum by (pod) (vllm:num_requests_running) > 0 and on (pod) sum by (pod) (increase(vllm:request_success_total[10m])) == 0")
    s.fire("queue", "VllmQueueWait", "11:26", labels={**engine, "pod": pod, "severity": "warning"},
           expr='1 - sum by (pod) (rate(vllm:request_queue_time_seconds_bucket{le="0.3"}[5m])) / sum by (pod) (rate(vllm:request_queue_time_seconds_count[5m])) > 0.01')
    s.fire("gw_ttft", "GatewayTTFTBreach", "11:29", labels={**gateway, "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, envoy_cluster_name) (rate(envoy_cluster_upstream_rq_time_bucket[5m]))) > 2000",
           annotations={"summary": "time to first token p99 above 2s on mistral-7b"})
    s.incident("disconnects", "running", "queue", "gw_ttft")
    return s.build()


@scenario
def rollout_with_decoy() -> Scenario:
    """Argo CD syncs an embedding service (decoy) and then the chat model; the chat model's new pods
    crash-loop, the Deployment's replicas mismatch, the old pods queue and TTFT breaches. Change
    events name the cluster as `k8s_cluster`."""
    s = Story("rollout_with_decoy", __doc__ or "")
    where = {"cluster": "gke-inference-eu"}
    new1, new2 = "vllm-gemma-27b-85f7c9d6b4-2xkqp", "vllm-gemma-27b-85f7c9d6b4-9mzrt"
    old = "vllm-gemma-27b-6c8b7d9f5-lw4tn"
    engine = {**where, "namespace": "apps", "model_name": "google/gemma-2-27b-it", "service": "vllm-gemma-27b"}
    s.change("decoy", "Sync embed-bge-m3 to rev 4f2a91c", "16:00", source="argocd",
             k8s_cluster="gke-inference-eu", namespace="apps", deployment="embed-bge-m3", revision="4f2a91c")
    s.change("rollout", "Sync vllm-gemma-27b to rev 9c1d7e0", "16:04", source="argocd",
             k8s_cluster="gke-inference-eu", namespace="apps", deployment="vllm-gemma-27b", revision="9c1d7e0")
    s.fire("crash_1", "KubePodCrashLooping", "16:09",
           labels=_ksm(where, "apps", pod=new1, container="vllm", reason="CrashLoopBackOff", severity="warning"),
           expr='max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1')
    s.fire("crash_2", "KubePodCrashLooping", "16:10",
           labels=_ksm(where, "apps", pod=new2, container="vllm", reason="CrashLoopBackOff", severity="warning"),
           expr='max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1')
    s.fire("mismatch", "KubeDeploymentReplicasMismatch", "16:14",
           labels=_ksm(where, "apps", deployment="vllm-gemma-27b", pod="prometheus-kube-state-metrics-7d9f8-x2k4p",
                       container="kube-state-metrics", severity="warning"),
           expr='(kube_deployment_spec_replicas{job="kube-state-metrics"} > kube_deployment_status_replicas_available{job="kube-state-metrics"})')
    s.fire("queue", "GemmaQueueDepth", "16:12", labels={**engine, "pod": old, "severity": "warning"},
           expr="avg by (pod) (vllm:num_requests_waiting) > 8")
    s.fire("ttft", "GemmaTTFT", "16:15", labels={**engine, "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2")
    s.incident("rollout", "crash_1", "crash_2", "mismatch", "queue", "ttft")
    s.noise("decoy")
    return s.build()


@scenario
def labelled_nan_and_spec_decode() -> Scenario:
    """Teams that label their rules: `failure_mode: NaN/Inf` style values, `layer: Engine`, and
    values that say nothing (`n/a`). NaN logits -> garbage (repetition) -> error rate on one model;
    on another model in the cluster, speculative-decoding acceptance drops -> TPOT."""
    s = Story("labelled_nan_and_spec_decode", __doc__ or "")
    where = {"cluster": "dc1", "namespace": "ml-serving"}
    phi = {**where, "model": "phi-3-medium", "deployment": "phi3-medium-vllm"}
    pod = "phi3-medium-vllm-6f5d9c8b7-kk2vx"
    s.fire("nan", "ModelOutputCorrupt", "13:00", labels={**phi, "pod": pod, "layer": "Engine", "failure_mode": "NaN",
           "severity": "critical"}, expr="increase(vllm:corrupted_requests_total[5m]) > 0")
    s.fire("garbage", "PhiRepetitionFinishes", "13:03", labels={**phi, "pod": pod, "layer": "engine",
           "failure_mode": "n/a", "severity": "warning"},
           expr='sum(rate(vllm:request_success_total{finished_reason="repetition"}[10m])) / sum(rate(vllm:request_success_total[10m])) > 0.05')
    s.fire("errors", "Phi3ErrorBudget", "13:06", labels={**phi, "layer": "serving-routing", "failure_mode": "availability",
           "severity": "warning"}, expr='sum(rate(http_requests_total{status="5xx"}[5m])) / sum(rate(http_requests_total[5m])) > 0.02')
    gemma = {**where, "model": "gemma-2-9b", "deployment": "gemma2-9b-eagle"}
    s.fire("spec", "DraftModelHealth", "13:10", labels={**gemma, "pod": "gemma2-9b-eagle-5b7c6d8f9-tt5xm",
           "failure_mode": "speculative decoding", "severity": "warning"},
           expr="sum(rate(vllm:spec_decode_num_accepted_tokens_total[10m])) / sum(rate(vllm:spec_decode_num_draft_tokens_total[10m])) < 0.65")
    s.fire("tpot", "Gemma9bSlowDecode", "13:07", labels={**gemma, "failure_mode": "SLO", "layer": "unknown", "severity": "warning"},
           expr="histogram_quantile(0.99, sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket[5m]))) > 0.08")
    s.incident("nan", "garbage", "errors")
    s.incident("spec", "tpot")
    return s.build()


@scenario
def config_change_framebuffer() -> Scenario:
    """A Helm values change raises SGLang's `mem_fraction_static`; framebuffer headroom vanishes on
    the GPUs of two pods (DCGM, `hostname` lower-case, `exported_pod`), both crash with a CUDA OOM
    (exit reason Error) and restart; an alert threshold edit elsewhere is unrelated."""
    s = Story("config_change_framebuffer", __doc__ or "")
    where = {"cluster": "coreweave-ord1"}
    p1, p2 = "sglang-deepseek-v3-0", "sglang-deepseek-v3-1"
    s.change("config", "helm upgrade sglang-deepseek-v3: mem_fraction_static 0.85 -> 0.93", "18:00", source="helm",
             cluster="coreweave-ord1", namespace="deepseek", statefulset="sglang-deepseek-v3", change_type="config")
    s.change("threshold", "Raise threshold of LLMQueueWaitHigh 0.3s -> 0.5s (PR #412)", "18:02", source="github",
             cluster="coreweave-ord1", namespace="observability", alertname="LLMQueueWaitHigh", change_type="alert rule")
    for tag, pod, host, gpu, minute in (("fb_1", p1, "h100-ord1-a07", "0", "18:06"), ("fb_2", p2, "h100-ord1-a09", "2", "18:07")):
        s.fire(tag, "GPUFramebufferLow", minute,
               labels={**where, "namespace": "gpu-operator", "pod": f"dcgm-exporter-{gpu}x8kq", "container": "dcgm-exporter",
                       "job": "dcgm-exporter", "service": "dcgm-exporter", "hostname": host, "gpu": gpu,
                       "UUID": f"GPU-aa{gpu}c1a-8f3b-4e2d-9c6a-1b2c3d4e5f6{gpu}", "exported_namespace": "deepseek",
                       "exported_pod": pod, "exported_container": "sglang", "severity": "critical"},
               expr="DCGM_FI_DEV_FB_FREE < 1024")
    for tag, pod, minute in (("exit_1", p1, "18:09"), ("exit_2", p2, "18:10")):
        s.fire(tag, "KubeContainerTerminatedWithError", minute,
               labels=_ksm(where, "deepseek", pod=pod, container="sglang", reason="Error", severity="warning"),
               expr='kube_pod_container_status_last_terminated_reason{reason="Error"} == 1 and on (namespace, pod, container) '
                    'increase(kube_pod_container_status_restarts_total[10m]) > 0')
    s.incident("config", "fb_1", "fb_2", "exit_1", "exit_2")
    s.noise("threshold")
    return s.build()


@scenario
def node_lost_gpu_off_the_bus() -> Scenario:
    """A GPU falls off the bus (dcgm-exporter maps it to the pod) -> the node goes NotReady (ksm's
    `node` label, kube-state-metrics' own pod in `pod`) -> the pod is NotReady -> replicas mismatch
    -> TTFT of the model. A Grafana-managed rule (no expression in its URL) watches the model; a
    thermal warning on another GPU of a different node is unrelated."""
    s = Story("node_lost_gpu_off_the_bus", __doc__ or "")
    where = {"cluster": "bm-gpu-2"}
    pod = "vllm-llama-405b-fp8-76d5c9b8f-8qkzv"
    s.fire("xid", "DCGMGpuFellOffBus", "08:00",
           labels={**where, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-t5n8w", "container": "nvidia-dcgm-exporter",
                   "service": "nvidia-dcgm-exporter", "job": "nvidia-dcgm-exporter", "Hostname": "b200-node-14", "gpu": "6",
                   "UUID": "GPU-77e0c1a0-8f3b-4e2d-9c6a-1b2c3d4e5f66", "err_code": "79", "exported_namespace": "frontier",
                   "exported_pod": pod, "exported_container": "vllm", "severity": "critical"},
           expr='DCGM_FI_DEV_XID_ERRORS{err_code="79"} > 0', resolved="08:03")
    s.fire("node", "KubeNodeNotReady", "08:02",
           labels=_ksm(where, "monitoring", node="b200-node-14", condition="Ready", status="true",
                       pod="prometheus-kube-state-metrics-7d9f8-x2k4p", container="kube-state-metrics", severity="warning"),
           expr='kube_node_status_condition{job="kube-state-metrics",condition="Ready",status="true"} == 0')
    s.fire("pod_not_ready", "KubePodNotReady", "08:05",
           labels={**where, "namespace": "frontier", "pod": pod, "severity": "warning"},
           expr='sum by (namespace, pod, cluster) (max by (namespace, pod, cluster) (kube_pod_status_phase{job="kube-state-metrics", phase=~"Pending|Unknown|Failed"}) > 0)')
    s.fire("mismatch", "KubeDeploymentReplicasMismatch", "08:08",
           labels=_ksm(where, "frontier", deployment="vllm-llama-405b-fp8", container="kube-state-metrics", severity="warning"),
           expr='(kube_deployment_spec_replicas{job="kube-state-metrics"} > kube_deployment_status_replicas_available{job="kube-state-metrics"})')
    s.fire("thermal", "GpuHighTemperature", "07:57",
           labels={**where, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-h2k9d", "container": "nvidia-dcgm-exporter",
                   "service": "nvidia-dcgm-exporter", "job": "nvidia-dcgm-exporter", "Hostname": "b200-node-03", "gpu": "2",
                   "severity": "warning"},
           expr="DCGM_FI_DEV_GPU_TEMP > 85", resolved="08:30")
    s.fire("ttft", "Llama 405B slow answers", "08:10",
           labels={**where, "namespace": "frontier", "model_name": "meta-llama/Llama-3.1-405B-Instruct-FP8",
                   "grafana_folder": "LLM", "__alert_rule_uid__": "fe3k9q1x", "severity": "high"},
           generator_url="https://grafana.example.com/alerting/grafana/fe3k9q1x/view?orgId=1",
           annotations={"summary": "p99 time to first token above 2s",
                        "description": "vllm:time_to_first_token_seconds p99 for Llama-3.1-405B-Instruct-FP8 is 3.4s"})
    s.incident("xid", "node", "pod_not_ready", "mismatch", "ttft")
    s.noise("thermal")
    return s.build()


@scenario
def otel_and_prometheus_mixed() -> Scenario:
    """One cluster, two pipelines: kube-state-metrics through Prometheus (`cluster`, `namespace`,
    `pod`) and engine metrics through an OpenTelemetry collector (`k8s_cluster_name`,
    `k8s_namespace_name`, `k8s_pod_name`, `k8s_deployment_name`). One SGLang pod's token pool fills
    -> it retracts requests -> its ITL rises; the pod is then OOMKilled and crash-loops."""
    s = Story("otel_and_prometheus_mixed", __doc__ or "")
    pod = "sglang-mixtral-8x22b-6c9d7f5b8-ppq4m"
    otel = {"k8s_cluster_name": "prod-sg", "k8s_namespace_name": "mixtral", "k8s_pod_name": pod,
            "k8s_deployment_name": "sglang-mixtral-8x22b", "k8s_node_name": "h200-sg-02",
            "model_name": "mistralai/Mixtral-8x22B-Instruct-v0.1", "service_name": "sglang"}
    s.fire("kv", "SGLangKVFull", "22:00", labels={**otel, "severity": "critical"}, expr="sglang:token_usage > 0.92")
    s.fire("retract", "SGLangRetractions", "22:01", labels={**otel, "severity": "warning"},
           expr="max_over_time(sglang:num_retracted_reqs[5m]) > 0")
    s.fire("itl", "SGLangITLp99", "22:03", labels={**otel, "severity": "warning"},
           expr="histogram_quantile(0.99, sum by (le, k8s_pod_name) (rate(sglang:inter_token_latency_seconds_bucket[5m]))) > 0.1")
    s.fire("oom", "KubeContainerOOMKilled", "22:07",
           labels=_ksm({"cluster": "prod-sg"}, "mixtral", pod=pod, container="sglang", reason="OOMKilled", severity="critical"),
           expr='kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1')
    s.fire("crash", "KubePodCrashLooping", "22:09",
           labels=_ksm({"cluster": "prod-sg"}, "mixtral", pod=pod, container="sglang", reason="CrashLoopBackOff", severity="warning"),
           expr='max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1')
    s.incident("kv", "retract", "itl", "oom", "crash")
    return s.build()


@scenario
def team_names_ghosts_and_nan() -> Scenario:
    """A team's own alert names: `NaNDetected`, `EngineWedged`-style names, `ClientHangups`.
    Two troubles on one model's replicas 40 minutes apart: client hang-ups -> engine running
    without finishing -> queue -> TTFT; later NaN on one replica -> garbage -> 5xx."""
    s = Story("team_names_ghosts_and_nan", __doc__ or "")
    where = {"cluster": "prod-nyc", "namespace": "copilot"}
    p1, p2 = "codellama-34b-0", "codellama-34b-1"
    engine = {**where, "model_name": "codellama/CodeLlama-34b-Instruct-hf", "service": "codellama-34b"}
    s.fire("hangups", "ClientHangups", "15:00",
           labels={**where, "destination_service_name": "codellama-34b", "severity": "warning"},
           expr='sum(rate(istio_requests_total{destination_service_name="codellama-34b", response_flags="DC"}[5m])) > 2')
    s.fire("busy", "SGLangBusyNotFinishing", "15:04", labels={**engine, "pod": p1, "severity": "warning"},
           expr="sum by (pod) (sglang:num_running_reqs) > 0 and on (pod) sum by (pod) (increase(sglang:num_requests_total[10m])) == 0")
    s.fire("queue", "CodeLlamaQueue", "15:06", labels={**engine, "pod": p2, "severity": "warning"},
           expr="sum by (pod) (sglang:num_queue_reqs) > 12")
    s.fire("ttft", "CodeLlamaFirstTokenSlow", "15:08", labels={**engine, "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(sglang:time_to_first_token_seconds_bucket[5m]))) > 2")
    s.fire("nan", "NaNDetected", "15:50", labels={**engine, "pod": p2, "severity": "critical"},
           annotations={"description": "logits contain NaN on codellama-34b-1"})
    s.fire("garbage", "CodeLlamaGibberishRate", "15:53", labels={**engine, "severity": "warning"},
           expr="sum(rate(llm_output_quality_failures_total[10m])) > 1")
    s.fire("errors", "CodeLlamaHTTP5xx", "15:55",
           labels={**where, "destination_service_name": "codellama-34b", "severity": "critical"},
           expr='sum(rate(istio_requests_total{destination_service_name="codellama-34b", response_code=~"5.."}[5m])) > 1')
    s.incident("hangups", "busy", "queue", "ttft")
    s.incident("nan", "garbage", "errors")
    return s.build()


@scenario
def cd_tools_name_the_workload_their_way() -> Scenario:
    """Change events as Argo CD and Helm notifications name what they changed: an Argo CD
    `application` (a decoy sync of an embedding service) and a Helm `release` (max-num-seqs doubled
    on an SGLang StatefulSet) -> both replicas' token pools fill -> they retract requests -> ITL."""
    s = Story("cd_tools_name_the_workload_their_way", __doc__ or "")
    where = {"cluster": "oci-fra-gpu", "namespace": "chat"}
    engine = {**where, "model_name": "meta-llama/Llama-3.1-8B-Instruct", "service": "sglang-llama-8b"}
    s.change("decoy", "Argo CD synced embed-bge-m3 (Synced, Healthy)", "12:00", source="argocd",
             cluster="oci-fra-gpu", namespace="chat", application="embed-bge-m3", sync_revision="77ab01e")
    s.change("helm", "helm upgrade sglang-llama-8b --set maxRunningRequests=512", "12:03", source="helm-controller",
             cluster="oci-fra-gpu", namespace="chat", release="sglang-llama-8b", chart="sglang-0.4.2")
    s.fire("kv_0", "SGLangTokenPoolHigh", "12:09", labels={**engine, "pod": "sglang-llama-8b-0", "severity": "warning"},
           expr="sglang:token_usage > 0.9")
    s.fire("kv_1", "SGLangTokenPoolHigh", "12:10", labels={**engine, "pod": "sglang-llama-8b-1", "severity": "warning"},
           expr="sglang:token_usage > 0.9")
    s.fire("retract", "SGLangRetractions", "12:11", labels={**engine, "pod": "sglang-llama-8b-0", "severity": "warning"},
           expr="rate(sglang:num_retracted_requests_total[5m]) > 0.1")
    s.fire("itl", "ChatITLJitter", "12:14",
           labels={**where, "model_name": "meta-llama/Llama-3.1-8B-Instruct", "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, model_name) (rate(sglang:inter_token_latency_seconds_bucket[5m]))) "
                "- histogram_quantile(0.5, sum by (le, model_name) (rate(sglang:inter_token_latency_seconds_bucket[5m]))) > 0.03")
    s.incident("helm", "kv_0", "kv_1", "retract", "itl")
    s.noise("decoy")
    return s.build()


@scenario
def threshold_edit_storm_and_ecc_nan() -> Scenario:
    """A reviewer-less PR lowers the SGLang queue rule's threshold (the change names the alert it
    edits as `alertname`): three busy replicas alert within a minute. Meanwhile, on another model,
    double-bit ECC errors on one GPU (DCGM, pod mapped, `hostname`) -> NaN logits on its pod ->
    garbage finishes."""
    s = Story("threshold_edit_storm_and_ecc_nan", __doc__ or "")
    where = {"cluster": "prod-tyo"}
    qwen = {**where, "namespace": "qa", "model_name": "Qwen/Qwen2.5-14B-Instruct", "service": "sglang-qwen14b"}
    s.change("edit", "Lower threshold of SGLangQueueBacklog from 32 to 4 (PR #981, not reviewed)", "09:00",
             source="github", cluster="prod-tyo", namespace="qa", alertname="SGLangQueueBacklog", change_type="alert rule")
    for tag, pod, minute in (("q0", "sglang-qwen14b-0", "09:02"), ("q1", "sglang-qwen14b-1", "09:02"), ("q2", "sglang-qwen14b-2", "09:03")):
        s.fire(tag, "SGLangQueueBacklog", minute, labels={**qwen, "pod": pod, "severity": "warning"},
               expr="sum by (pod) (sglang:num_queue_reqs) > 4")
    pod = "vllm-yi-34b-5c7d9b8f6-wx4rt"
    s.fire("ecc", "GPUDoubleBitErrors", "09:05",
           labels={**where, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-99kzq", "container": "nvidia-dcgm-exporter",
                   "service": "nvidia-dcgm-exporter", "job": "nvidia-dcgm-exporter", "hostname": "a100-tyo-31", "gpu": "4",
                   "UUID": "GPU-9a8b7c6d-5e4f-3a2b-1c0d-9e8f7a6b5c4d", "exported_namespace": "yi", "exported_pod": pod,
                   "exported_container": "vllm", "severity": "critical"},
           expr="increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0")
    s.fire("nan", "YiCorruptedRequests", "09:07",
           labels={**where, "namespace": "yi", "pod": pod, "model_name": "01-ai/Yi-1.5-34B-Chat", "severity": "critical"},
           expr="increase(vllm:corrupted_requests_total[5m]) > 0")
    s.fire("garbage", "YiRepetition", "09:09",
           labels={**where, "namespace": "yi", "model_name": "01-ai/Yi-1.5-34B-Chat", "severity": "warning"},
           expr='sum(rate(vllm:request_success_total{finished_reason="repetition"}[10m])) / sum(rate(vllm:request_success_total[10m])) > 0.05')
    s.incident("edit", "q0", "q1", "q2")
    s.incident("ecc", "nan", "garbage")
    return s.build()


@scenario
def kserve_models_served_from_a_path() -> Scenario:
    """Two KServe InferenceServices (Knative pods `<isvc>-predictor-00001-deployment-<hash>-<id>`)
    run vLLM without --served-model-name, so every series says model_name="/mnt/models". At the
    same time: one isvc's KV pool fills -> OOMKilled -> TTFT; the other's pod preempts -> TPOT."""
    s = Story("kserve_models_served_from_a_path", __doc__ or "")
    where = {"cluster": "rhoai-prod", "namespace": "models"}
    granite = "granite-8b-predictor-00001-deployment-6d5c9f8b7-tq2xz"
    mistral = "mistral-nemo-12b-predictor-00002-deployment-7f8d6c5b9-jn4kw"
    s.fire("g_kv", "VLLMKVCacheHigh", "17:00", labels={**where, "pod": granite, "model_name": "/mnt/models",
           "serving_kserve_io_inferenceservice": "granite-8b", "severity": "warning"}, expr="vllm:kv_cache_usage_perc > 0.9")
    s.fire("m_preempt", "VLLMPreempting", "17:01", labels={**where, "pod": mistral, "model_name": "/mnt/models",
           "serving_kserve_io_inferenceservice": "mistral-nemo-12b", "severity": "warning"},
           expr="rate(vllm:num_preemptions_total[5m]) > 0.2")
    s.fire("g_oom", "KubeContainerOOMKilled", "17:03",
           labels=_ksm(where, "models", pod=granite, container="kserve-container", reason="OOMKilled", severity="critical"),
           expr='kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1')
    s.fire("m_tpot", "VLLMTPOTHigh", "17:05", labels={**where, "pod": mistral, "model_name": "/mnt/models",
           "serving_kserve_io_inferenceservice": "mistral-nemo-12b", "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, pod) (rate(vllm:request_time_per_output_token_seconds_bucket[5m]))) > 0.08")
    s.fire("g_ttft", "VLLMTTFTHigh", "17:07", labels={**where, "model_name": "/mnt/models",
           "serving_kserve_io_inferenceservice": "granite-8b", "severity": "critical"},
           expr="histogram_quantile(0.99, sum by (le, serving_kserve_io_inferenceservice, model_name) "
                "(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2")
    s.incident("g_kv", "g_oom", "g_ttft")
    s.incident("m_preempt", "m_tpot")
    return s.build()


def _explore(expr: str) -> str:
    """vmalert's -external.alert.source pointed at Grafana Explore: the query sits in `left=` JSON."""
    import json
    from urllib.parse import quote

    left = {"datasource": "VictoriaMetrics", "queries": [{"expr": expr, "refId": "A"}], "range": {"from": "now-1h", "to": "now"}}
    return "https://grafana.corp.example/explore?orgId=1&left=" + quote(json.dumps(left), safe="")


@scenario
def vmalert_explore_links() -> Scenario:
    """A VictoriaMetrics shop: vmalert links each alert to Grafana Explore, so the rule's PromQL is
    JSON inside `left=`; rule names say nothing (`trt-rule-3`). TensorRT-LLM under Triton:
    fragmentation (a 15-minute average, fires last) -> KV blocks exhausted -> the engine exits
    with a CUDA OOM and restarts -> the sibling queues."""
    s = Story("vmalert_explore_links", __doc__ or "")
    where = {"cluster": "vm-prod-2", "namespace": "trt", "alertgroup": "trtllm.rules"}
    pod, sibling = "triton-llama-70b-7d8c9b6f5-2kq8d", "triton-llama-70b-7d8c9b6f5-ws7nn"
    triton = {**where, "model": "tensorrt_llm", "version": "1", "service": "triton-llama-70b"}
    s.fire("kv", "trt-rule-1", "05:05", labels={**triton, "pod": pod, "severity": "warning"},
           generator_url=_explore('nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"} > 0.95'))
    s.fire("restarts", "trt-rule-7", "05:08", labels={**where, "pod": pod, "container": "triton", "severity": "critical"},
           generator_url=_explore('kube_pod_container_status_last_terminated_reason{reason="Error"} == 1 and on (pod) '
                                  'increase(kube_pod_container_status_restarts_total[10m]) > 0'))
    s.fire("queue", "trt-rule-2", "05:10", labels={**triton, "pod": sibling, "severity": "warning"},
           generator_url=_explore("nv_inference_pending_request_count > 20"))
    s.fire("frag", "trt-rule-3", "05:16", labels={**triton, "pod": pod, "severity": "warning"},
           generator_url=_explore("avg_over_time(llm_kv_cache_fragmentation_ratio[15m]) > 0.25"))
    s.incident("frag", "kv", "restarts", "queue")
    return s.build()
