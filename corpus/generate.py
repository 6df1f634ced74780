#!/usr/bin/env python3
"""Writes the held-out corpus of Alertmanager webhook streams (corpus/fleets/).

Stdlib only, deterministic.  Each fleet is a story: conditions (the underlying problems) begin
and end at given minutes; Prometheus rule evaluation turns them into alert occurrences
(startsAt = the evaluation tick at which the rule's `for:` has held, endsAt = the tick at which
the condition stopped holding); a small Alertmanager model groups them (group_by,
group_wait, group_interval, repeat_interval, nflog dedup) and writes the webhook bodies in
delivery order.  The truth of every fleet is written by the fleet function itself, from the
story, as the occurrences are created.

    python3 corpus/generate.py
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.parse
from datetime import UTC, datetime

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fleets")
NS = 1_000_000_000

# ----------------------------------------------------------------------------------------------
# Prometheus / Alertmanager primitives
# ----------------------------------------------------------------------------------------------


def fingerprint(labels: dict) -> str:
    """prometheus/common model.LabelSet.Fingerprint: FNV-1a 64 over sorted names and values,
    each followed by the separator byte 0xff."""
    h = 14695981039346656037
    for name in sorted(labels):
        for part in (name, labels[name]):
            for b in part.encode():
                h ^= b
                h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
            h ^= 0xFF
            h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rfc3339nano(t_ns: int) -> str:
    """Go's time.Time JSON form (RFC3339Nano, UTC): trailing zeros of the fraction dropped."""
    sec, frac = divmod(t_ns, NS)
    s = datetime.fromtimestamp(sec, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        s += "." + ("%09d" % frac).rstrip("0")
    return s + "Z"


ZERO_TIME = "0001-01-01T00:00:00Z"


def stable_int(*parts) -> int:
    return int(hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def pod_suffix(*parts, n=5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    x = stable_int(*parts)
    out = ""
    for _ in range(n):
        x, r = divmod(x, len(alphabet))
        out += alphabet[r]
    return out


def rs_hash(*parts) -> str:
    x = stable_int("rs", *parts)
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    out = ""
    for _ in range(10 if x % 2 else 9):
        x, r = divmod(x, len(alphabet))
        out += alphabet[r]
    return out


def ip(*parts) -> str:
    x = stable_int("ip", *parts)
    return "10.%d.%d.%d" % (40 + x % 20, (x >> 8) % 250 + 1, (x >> 16) % 250 + 2)


# ----------------------------------------------------------------------------------------------
# Rules
# ----------------------------------------------------------------------------------------------


class Rule:
    """An alerting rule as loaded by Prometheus: its group interval fixes the evaluation ticks."""

    def __init__(self, name, expr, for_s, labels, summary, description, source, group,
                 interval=30, adapted=""):
        self.name = name
        self.expr = expr
        self.for_s = for_s
        self.labels = dict(labels)
        self.summary = summary
        self.description = description
        self.source = source
        self.group = group
        self.interval = interval
        self.adapted = adapted
        self.by = None

    def variant(self, **kw):
        r = Rule(self.name, self.expr, self.for_s, self.labels, self.summary, self.description,
                 self.source, self.group, self.interval, self.adapted)
        r.by = self.by
        for k, v in kw.items():
            if k == "extra_labels":
                r.labels.update(v)
            else:
                setattr(r, k, v)
        return r


def render(template: str, labels: dict) -> str:
    out = template
    for k, v in labels.items():
        out = out.replace(f"{{{{ $labels.{k} }}}}", v)
    return out


# Sources (owner/repo:path) --------------------------------------------------------------------
MIXIN_APPS = "kubernetes-monitoring/kubernetes-mixin:alerts/apps_alerts.libsonnet"
MIXIN_KUBELET = "kubernetes-monitoring/kubernetes-mixin:alerts/kubelet.libsonnet"
MIXIN_RES = "kubernetes-monitoring/kubernetes-mixin:alerts/resource_alerts.libsonnet"
MIXIN_STORAGE = "kubernetes-monitoring/kubernetes-mixin:alerts/storage_alerts.libsonnet"
KP_GENERAL = "prometheus-operator/kube-prometheus:manifests/kubePrometheus-prometheusRule.yaml"
KP_RELOADER = "prometheus-operator/kube-prometheus:manifests/prometheusOperator-prometheusRule.yaml"
NODE_MIXIN = "prometheus/node_exporter:docs/node-mixin/alerts/alerts.libsonnet"
LLMD = "llm-d/llm-d:docs/monitoring/prometheus-alerting-rules.yaml"
AWESOME = "samber/awesome-prometheus-alerts:_data/rules.yml"
DCGM = "NVIDIA/dcgm-exporter:etc/default-counters.csv"
VLLM_METRICS = "vllm-project/vllm:vllm/v1/metrics/loggers.py"
SGL_METRICS = "sgl-project/sglang:python/sglang/srt/metrics/collector.py"
TRT_METRICS = "NVIDIA/TensorRT-LLM:examples/serve/prometheus_metrics.py"
TRITON_METRICS = "triton-inference-server/server:docs/user_guide/metrics.md"
ENVOY_STATS = "envoyproxy/envoy:docs/root/configuration/upstream/cluster_manager/cluster_stats.rst"
ENVOY_HCM = "envoyproxy/envoy:docs/root/configuration/http/http_conn_man/stats.rst"
EPP_METRICS = "llm-d/llm-d-router:pkg/epp/metrics/llm_d_router_metrics.go"
PSTACK_ROUTER = "vllm-project/production-stack:src/vllm_router/services/metrics_service/__init__.py"
KSM_DOCS = "kubernetes/kube-state-metrics:docs/metrics/workload/pod-metrics.md"

OWN = "own rule (team-written) over metrics documented in "


def R(*a, **k):
    return Rule(*a, **k)


RULES = {
    # ---- kubernetes-mixin / kube-prometheus ---------------------------------------------------
    "KubePodCrashLooping": R(
        "KubePodCrashLooping",
        'max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"}[5m]) >= 1',
        900, {"severity": "warning"}, "Pod is crash looping.",
        'Pod {{ $labels.namespace }}/{{ $labels.pod }} ({{ $labels.container }}) is in waiting state (reason: "CrashLoopBackOff").',
        MIXIN_APPS, "kubernetes-apps"),
    "KubePodNotReady": R(
        "KubePodNotReady",
        'sum by (namespace, pod, cluster) (max by (namespace, pod, cluster) (kube_pod_status_phase{job="kube-state-metrics", phase=~"Pending|Unknown|Failed"}) * on (namespace, pod, cluster) group_left (owner_kind) topk by (namespace, pod, cluster) (1, max by (namespace, pod, owner_kind, cluster) (kube_pod_owner{owner_kind!="Job"}))) > 0',
        900, {"severity": "warning"}, "Pod has been in a non-ready state for more than 15 minutes.",
        "Pod {{ $labels.namespace }}/{{ $labels.pod }} has been in a non-ready state for longer than 15 minutes.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeDeploymentGenerationMismatch": R(
        "KubeDeploymentGenerationMismatch",
        'kube_deployment_status_observed_generation{job="kube-state-metrics"} != kube_deployment_metadata_generation{job="kube-state-metrics"}',
        900, {"severity": "warning"}, "Deployment generation mismatch due to possible roll-back",
        "Deployment generation for {{ $labels.namespace }}/{{ $labels.deployment }} does not match, this indicates that the Deployment has failed but has not been rolled back.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeDeploymentReplicasMismatch": R(
        "KubeDeploymentReplicasMismatch",
        '(kube_deployment_spec_replicas{job="kube-state-metrics"} > kube_deployment_status_replicas_available{job="kube-state-metrics"}) and (changes(kube_deployment_status_replicas_updated{job="kube-state-metrics"}[10m]) == 0)',
        900, {"severity": "warning"}, "Deployment has not matched the expected number of replicas.",
        "Deployment {{ $labels.namespace }}/{{ $labels.deployment }} has not matched the expected number of replicas for longer than 15 minutes.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeDeploymentRolloutStuck": R(
        "KubeDeploymentRolloutStuck",
        'kube_deployment_status_condition{condition="Progressing", status="false", job="kube-state-metrics"} != 0',
        900, {"severity": "warning"}, "Deployment rollout is not progressing.",
        "Rollout of deployment {{ $labels.namespace }}/{{ $labels.deployment }} is not progressing for longer than 15 minutes.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeStatefulSetReplicasMismatch": R(
        "KubeStatefulSetReplicasMismatch",
        '(kube_statefulset_status_replicas_ready{job="kube-state-metrics"} != kube_statefulset_status_replicas{job="kube-state-metrics"}) and (changes(kube_statefulset_status_replicas_updated{job="kube-state-metrics"}[10m]) == 0)',
        900, {"severity": "warning"}, "StatefulSet has not matched the expected number of replicas.",
        "StatefulSet {{ $labels.namespace }}/{{ $labels.statefulset }} has not matched the expected number of replicas for longer than 15 minutes.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeHpaMaxedOut": R(
        "KubeHpaMaxedOut",
        'kube_horizontalpodautoscaler_status_current_replicas{job="kube-state-metrics"} == kube_horizontalpodautoscaler_spec_max_replicas{job="kube-state-metrics"}',
        900, {"severity": "warning"}, "HPA is running at max replicas",
        "HPA {{ $labels.namespace }}/{{ $labels.horizontalpodautoscaler }} has been running at max replicas for longer than 15 minutes.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeJobFailed": R(
        "KubeJobFailed", 'kube_job_failed{job="kube-state-metrics"} > 0', 900,
        {"severity": "warning"}, "Job failed to complete.",
        "Job {{ $labels.namespace }}/{{ $labels.job_name }} failed to complete. Removing failed job after investigation should clear this alert.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeContainerWaiting": R(
        "KubeContainerWaiting",
        'sum by (namespace, pod, container, cluster) (kube_pod_container_status_waiting_reason{job="kube-state-metrics"}) > 0',
        3600, {"severity": "warning"}, "Pod container waiting longer than 1 hour",
        "pod/{{ $labels.pod }} in namespace {{ $labels.namespace }} on container {{ $labels.container }} has been in waiting state for longer than 1 hour.",
        MIXIN_APPS, "kubernetes-apps"),
    "KubeNodeNotReady": R(
        "KubeNodeNotReady",
        'kube_node_status_condition{job="kube-state-metrics",condition="Ready",status="true"} == 0',
        900, {"severity": "warning"}, "Node is not ready.",
        "{{ $labels.node }} has been unready for more than 15 minutes.",
        MIXIN_KUBELET, "kubernetes-system-kubelet"),
    "KubeNodeUnreachable": R(
        "KubeNodeUnreachable",
        '(kube_node_spec_taint{job="kube-state-metrics",key="node.kubernetes.io/unreachable",effect="NoSchedule"} unless ignoring(key,value) kube_node_spec_taint{job="kube-state-metrics",key=~"ToBeDeletedByClusterAutoscaler|cloud.google.com/impending-node-termination|aws-node-termination-handler/spot-itn"}) == 1',
        900, {"severity": "warning"}, "Node is unreachable.",
        "{{ $labels.node }} is unreachable and some workloads may be rescheduled.",
        MIXIN_KUBELET, "kubernetes-system-kubelet"),
    "CPUThrottlingHigh": R(
        "CPUThrottlingHigh",
        'sum(increase(container_cpu_cfs_throttled_periods_total{container!="", job="kubelet", metrics_path="/metrics/cadvisor"}[5m])) without (id, metrics_path, name, image, endpoint, job, node) / sum(increase(container_cpu_cfs_periods_total{job="kubelet", metrics_path="/metrics/cadvisor"}[5m])) without (id, metrics_path, name, image, endpoint, job, node) > ( 25 / 100 )',
        900, {"severity": "info"}, "Processes experience elevated CPU throttling.",
        "26.4% throttling of CPU in namespace {{ $labels.namespace }} for container {{ $labels.container }} in pod {{ $labels.pod }}.",
        MIXIN_RES, "kubernetes-resources"),
    "KubeQuotaAlmostFull": R(
        "KubeQuotaAlmostFull",
        'kube_resourcequota{job="kube-state-metrics", type="used"} / ignoring(instance, job, type) (kube_resourcequota{job="kube-state-metrics", type="hard"} > 0) > 0.9 < 1',
        900, {"severity": "info"}, "Namespace quota is going to be full.",
        "Namespace {{ $labels.namespace }} is using 92% of its {{ $labels.resource }} quota.",
        MIXIN_RES, "kubernetes-resources"),
    "KubePersistentVolumeFillingUp": R(
        "KubePersistentVolumeFillingUp",
        '(kubelet_volume_stats_available_bytes{job="kubelet", metrics_path="/metrics"} / kubelet_volume_stats_capacity_bytes{job="kubelet", metrics_path="/metrics"}) < 0.03 and kubelet_volume_stats_used_bytes{job="kubelet", metrics_path="/metrics"} > 0',
        60, {"severity": "critical"}, "PersistentVolume is filling up.",
        "The PersistentVolume claimed by {{ $labels.persistentvolumeclaim }} in Namespace {{ $labels.namespace }} is only 2.1% free.",
        MIXIN_STORAGE, "kubernetes-storage"),
    "TargetDown": R(
        "TargetDown",
        "100 * (count(up == 0) BY (cluster, job, namespace, service) / count(up) BY (cluster, job, namespace, service)) > 10",
        600, {"severity": "warning"}, "One or more targets are unreachable.",
        "100% of the {{ $labels.job }}/{{ $labels.service }} targets in {{ $labels.namespace }} namespace are down.",
        KP_GENERAL, "general.rules"),
    "ConfigReloaderSidecarErrors": R(
        "ConfigReloaderSidecarErrors",
        'max_over_time(reloader_last_reload_successful{namespace=~".+"}[5m]) == 0',
        600, {"severity": "warning"}, "config-reloader sidecar has not had a successful reload for 10m",
        "Errors encountered while the {{ $labels.pod }} config-reloader sidecar attempts to sync config in {{ $labels.namespace }} namespace.\nAs a result, configuration for service running in {{ $labels.pod }} may be stale and cannot be updated anymore.",
        KP_RELOADER, "config-reloaders"),
    "NodeFilesystemSpaceFillingUp": R(
        "NodeFilesystemSpaceFillingUp",
        '(node_filesystem_avail_bytes{job="node-exporter",fstype!="",mountpoint!=""} / node_filesystem_size_bytes{job="node-exporter",fstype!="",mountpoint!=""} * 100 < 15 and predict_linear(node_filesystem_avail_bytes{job="node-exporter",fstype!="",mountpoint!=""}[6h], 4*60*60) < 0 and node_filesystem_readonly{job="node-exporter",fstype!="",mountpoint!=""} == 0)',
        3600, {"severity": "warning"}, "Filesystem is predicted to run out of space within the next 4 hours.",
        "Filesystem on {{ $labels.device }}, mounted on {{ $labels.mountpoint }}, at {{ $labels.instance }} has only 11.2% available space left and is filling up fast.",
        NODE_MIXIN, "node-exporter", interval=60),
    "NodeClockNotSynchronising": R(
        "NodeClockNotSynchronising",
        'min_over_time(node_timex_sync_status{job="node-exporter"}[5m]) == 0 and node_timex_maxerror_seconds{job="node-exporter"} >= 16',
        600, {"severity": "warning"}, "Clock not synchronising.",
        "Clock at {{ $labels.instance }} is not synchronising. Ensure NTP is configured on this host.",
        NODE_MIXIN, "node-exporter", interval=60),
    "NodeMemoryMajorPagesFaults": R(
        "NodeMemoryMajorPagesFaults",
        'rate(node_vmstat_pgmajfault{job="node-exporter"}[5m]) > 500', 900,
        {"severity": "warning"}, "Memory major page faults are occurring at very high rate.",
        "Memory major pages are occurring at very high rate at {{ $labels.instance }}, 500 major page faults per second for the last 15 minutes, is currently at 712.4.",
        NODE_MIXIN, "node-exporter", interval=60),
    # ---- awesome-prometheus-alerts -------------------------------------------------------------
    "KubernetesContainerOomKiller": R(
        "KubernetesContainerOomKiller",
        '(kube_pod_container_status_restarts_total - kube_pod_container_status_restarts_total offset 10m >= 1) and ignoring (reason) min_over_time(kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}[10m]) == 1',
        0, {"severity": "warning"}, "Kubernetes Container oom killer ({{ $labels.namespace }}/{{ $labels.pod }}:{{ $labels.container }})",
        "Container {{ $labels.container }} in pod {{ $labels.namespace }}/{{ $labels.pod }} has been OOMKilled 1 times in the last 10 minutes.",
        AWESOME, "kubernetes"),
    "KubernetesPodCrashLooping": R(
        "KubernetesPodCrashLooping", "increase(kube_pod_container_status_restarts_total[1m]) > 3", 120,
        {"severity": "warning"}, "Kubernetes pod crash looping ({{ $labels.namespace }}/{{ $labels.pod }})",
        "Pod {{ $labels.namespace }}/{{ $labels.pod }} is crash looping",
        AWESOME, "kubernetes"),
    "PrometheusTargetMissing": R(
        "PrometheusTargetMissing", "up == 0", 0, {"severity": "critical"},
        "Prometheus target missing (instance {{ $labels.instance }})",
        "A Prometheus target has disappeared. An exporter might be crashed.",
        AWESOME, "prometheus-self-monitoring"),
    # ---- llm-d --------------------------------------------------------------------------------
    "LLMDKVCacheSaturation": R(
        "LLMDKVCacheSaturation", "avg by(pod, model_name) (vllm:kv_cache_usage_perc) > 0.90", 600,
        {"severity": "warning", "team": "inference-platform"}, "KV cache near saturation on {{ $labels.pod }}",
        "KV cache utilization is 93.7% on pod {{ $labels.pod }}.\nHigh utilization leads to preemptions and degraded throughput.\n",
        LLMD, "llm-d-warning", interval=60),
    "LLMDHighPreemptions": R(
        "LLMDHighPreemptions", "sum by(pod) (rate(vllm:num_preemptions_total[5m])) > 1", 300,
        {"severity": "warning", "team": "inference-platform"}, "High request preemptions on {{ $labels.pod }}",
        "Pod {{ $labels.pod }} has 3.2 preemptions/sec.\nThis indicates memory pressure and may cause request failures.\n",
        LLMD, "llm-d-warning", interval=60,
        adapted="counter spelled vllm:num_preemptions_total (upstream file queries vllm:num_preemptions, which matches nothing on the wire)"),
    "LLMDRequestQueueBuildup": R(
        "LLMDRequestQueueBuildup", "sum by(pod, model_name) (vllm:num_requests_waiting) > 50", 300,
        {"severity": "warning", "team": "inference-platform"}, "Request queue building up on {{ $labels.pod }}",
        "74 requests waiting in queue on pod {{ $labels.pod }}.\nConsider scaling decode replicas or optimizing batch size.\n",
        LLMD, "llm-d-warning", interval=60),
    "LLMDHighTTFT": R(
        "LLMDHighTTFT",
        "histogram_quantile(0.99, sum by(le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 10",
        600, {"severity": "warning", "team": "inference-platform"}, "High time-to-first-token for {{ $labels.model_name }}",
        "P99 TTFT is 14.2s for model {{ $labels.model_name }}.\nConsider scaling prefill workers or enabling prefix caching.\n",
        LLMD, "llm-d-warning", interval=60),
    "LLMDExtremeTTFT": R(
        "LLMDExtremeTTFT",
        "histogram_quantile(0.99, sum by(le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 30",
        300, {"severity": "critical", "team": "inference-platform"}, "Extreme time-to-first-token latency for {{ $labels.model_name }}",
        "P99 TTFT is 41.8s for model {{ $labels.model_name }}.\nUsers are experiencing unacceptable wait times before receiving responses.\n",
        LLMD, "llm-d-critical"),
    "LLMDModelHighErrorRate": R(
        "LLMDModelHighErrorRate",
        "(sum by(model_name) (rate(inference_objective_request_error_total[5m])) / sum by(model_name) (rate(inference_objective_request_total[5m]))) > 0.10",
        300, {"severity": "critical", "team": "inference-platform"}, "High error rate for model {{ $labels.model_name }}",
        "Model {{ $labels.model_name }} has error rate of 17.3%.\nInvestigate model-specific issues or backend pod health.\n",
        LLMD, "llm-d-critical", adapted="inference_model_* renamed inference_objective_* (the EPP's current names)"),
    "LLMDPodRestartLoop": R(
        "LLMDPodRestartLoop",
        'increase(kube_pod_container_status_restarts_total{container=~"vllm|epp|routing-proxy"}[1h]) > 5',
        300, {"severity": "warning", "team": "inference-platform"}, "Pod {{ $labels.pod }} restarting frequently",
        "Container {{ $labels.container }} in pod {{ $labels.pod }} has restarted\n6 times in the last hour. Investigate crash loops.\n",
        LLMD, "llm-d-infrastructure", interval=120),
    "LLMDLowReplicaCount": R(
        "LLMDLowReplicaCount", 'count(up{job=~".*vllm.*"} == 1) < 2', 300,
        {"severity": "warning", "team": "inference-platform"}, "Low vLLM replica count",
        "Only 1 vLLM replicas are healthy.\nReduced redundancy increases risk of service disruption.\n",
        LLMD, "llm-d-infrastructure", interval=120),
    "LLMDNoHealthyBackends": R(
        "LLMDNoHealthyBackends", 'sum(up{job=~".*vllm.*"}) == 0', 60,
        {"severity": "critical", "team": "inference-platform"}, "No healthy vLLM backends available",
        "All vLLM backend pods are down. Inference requests cannot be served.\nImmediate investigation required.\n",
        LLMD, "llm-d-critical"),
    "LLMDGPUUnderutilization": R(
        "LLMDGPUUnderutilization", "avg by(node) (DCGM_FI_DEV_GPU_UTIL or nvidia_gpu_duty_cycle) < 30", 1800,
        {"severity": "warning", "team": "inference-platform"}, "GPU underutilization on node {{ $labels.node }}",
        "Average GPU utilization is 12% on node {{ $labels.node }}.\nConsider consolidating workloads or reducing replica count.\n",
        LLMD, "llm-d-warning", interval=60),
    "LLMDLowPrefixCacheHitRate": R(
        "LLMDLowPrefixCacheHitRate",
        "(sum(rate(vllm:prefix_cache_hits_total[5m])) / sum(rate(vllm:prefix_cache_queries_total[5m]))) < 0.30",
        900, {"severity": "warning", "team": "inference-platform"}, "Low prefix cache hit rate",
        "Prefix cache hit rate is 21.5%, below 30% threshold.\nReview cache sizing or consider tiered prefix caching.\n",
        LLMD, "llm-d-warning", interval=60),
    "LLMDMemoryPressure": R(
        "LLMDMemoryPressure",
        '(container_memory_working_set_bytes{container="vllm"} / container_spec_memory_limit_bytes{container="vllm"}) > 0.85',
        600, {"severity": "warning", "team": "inference-platform"}, "Memory pressure on {{ $labels.pod }}",
        "Container memory is at 91.2% of limit on {{ $labels.pod }}.\nRisk of OOM kill if memory usage continues to grow.\n",
        LLMD, "llm-d-infrastructure", interval=120),
}


# ---- generic DCGM rules (community style, written against dcgm-exporter's fields) -------------
def _dcgm(name, expr, for_s, sev, summary, desc, adapted):
    return R(name, expr, for_s, {"severity": sev}, summary, desc, OWN + DCGM, "gpu-dcgm",
             adapted=adapted)


RULES.update({
    "GPUXidError": _dcgm(
        "GPUXidError", "max_over_time(DCGM_FI_DEV_XID_ERRORS[10m]) > 0", 0, "critical",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported Xid {{ $labels.err_code }}",
        "DCGM reports Xid error {{ $labels.err_code }} ({{ $labels.err_msg }}) on GPU {{ $labels.gpu }} ({{ $labels.UUID }}) of {{ $labels.Hostname }}.",
        "community pattern (Xid > 0) written for this fleet; err_code/err_msg kept from the exporter"),
    "GPUFramebufferNearlyFull": _dcgm(
        "GPUFramebufferNearlyFull", "DCGM_FI_DEV_FB_FREE < 1024", 120, "warning",
        "GPU framebuffer almost exhausted on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        "Less than 1 GiB of framebuffer free on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}.",
        "absolute-headroom threshold (1 GiB) as the operators judge the framebuffer"),
    "GPUMemoryUsageHigh": _dcgm(
        "GPUMemoryUsageHigh", "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95", 300,
        "warning", "GPU memory usage above 95% on {{ $labels.Hostname }}",
        "GPU {{ $labels.gpu }} ({{ $labels.modelName }}) framebuffer is 97.1% used.",
        "ratio rule as found in many community packs (fires on any preallocating engine)"),
    "GPUHighTemperature": _dcgm(
        "GPUHighTemperature", "DCGM_FI_DEV_GPU_TEMP > 85", 300, "warning",
        "GPU {{ $labels.gpu }} temperature high on {{ $labels.Hostname }}",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at 88 C.",
        "threshold 85 C"),
    "GPUEccDoubleBitErrors": _dcgm(
        "GPUEccDoubleBitErrors", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", 300, "critical",
        "Uncorrectable ECC errors on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        "GPU {{ $labels.UUID }} recorded double-bit ECC errors in the last 10 minutes.",
        "ECC counters enabled in the exporter's csv (commented out by default)"),
    "GPURowRemapFailure": _dcgm(
        "GPURowRemapFailure", "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", 0, "critical",
        "Row remapping failed on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        "GPU {{ $labels.UUID }} has a row-remap failure; the GPU needs a reset or replacement.", ""),
    "GPUNVLinkErrors": _dcgm(
        "GPUNVLinkErrors", "increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[10m]) > 10", 300, "warning",
        "NVLink CRC errors on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        "NVLink flit CRC errors are increasing on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}.",
        "NVLink counters enabled in the exporter's csv"),
    "GPUUtilizationLow": _dcgm(
        "GPUUtilizationLow", "avg_over_time(DCGM_FI_DEV_GPU_UTIL[15m]) < 5", 900, "info",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is idle",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} averaged under 5% utilisation for 15 minutes.", ""),
})


# ---- engine, router and gateway rules (own rules over the engines' documented metrics) --------
def _own(name, expr, for_s, sev, summary, desc, src, group, interval=30, adapted=""):
    return R(name, expr, for_s, {"severity": sev}, summary, desc, OWN + src, group, interval, adapted)


RULES.update({
    # vLLM
    "VLLMKVCacheUsageHigh": _own(
        "VLLMKVCacheUsageHigh", "max by (namespace, pod, model_name) (vllm:kv_cache_usage_perc) > 0.85", 300,
        "warning", "vLLM KV cache pool above 85% on {{ $labels.pod }}",
        "KV cache pool of {{ $labels.model_name }} on {{ $labels.pod }} is 91% used.", VLLM_METRICS, "vllm.rules"),
    "VLLMPreemptionsHigh": _own(
        "VLLMPreemptionsHigh", "sum by (namespace, pod, model_name) (rate(vllm:num_preemptions_total[5m])) > 0.1", 300,
        "warning", "vLLM is preempting requests on {{ $labels.pod }}",
        "{{ $labels.pod }} preempts 0.8 requests/s (recompute).", VLLM_METRICS, "vllm.rules"),
    "VLLMITLJitterHigh": _own(
        "VLLMITLJitterHigh",
        "histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(vllm:inter_token_latency_seconds_bucket[5m]))) - histogram_quantile(0.50, sum by (le, namespace, model_name) (rate(vllm:inter_token_latency_seconds_bucket[5m]))) > 0.03",
        600, "warning", "Inter-token latency jitter above 30 ms for {{ $labels.model_name }}",
        "p99-p50 ITL for {{ $labels.model_name }} is 47 ms.", VLLM_METRICS, "vllm.rules"),
    "VLLMTPOTHigh": _own(
        "VLLMTPOTHigh",
        "histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(vllm:request_time_per_output_token_seconds_bucket[5m]))) > 0.08",
        600, "warning", "TPOT p99 above 80 ms for {{ $labels.model_name }}",
        "p99 time per output token for {{ $labels.model_name }} is 112 ms.", VLLM_METRICS, "vllm.rules"),
    "VLLMQueueTimeHigh": _own(
        "VLLMQueueTimeHigh",
        '1 - sum by (namespace, model_name) (rate(vllm:request_queue_time_seconds_bucket{le="0.3"}[5m])) / sum by (namespace, model_name) (rate(vllm:request_queue_time_seconds_count[5m])) > 0.01',
        300, "warning", "Requests of {{ $labels.model_name }} wait more than 300 ms in queue",
        "7.4% of {{ $labels.model_name }} requests waited over 300 ms before scheduling.", VLLM_METRICS, "vllm.rules"),
    "VLLMAbortRatioHigh": _own(
        "VLLMAbortRatioHigh",
        'sum by (namespace, model_name) (rate(vllm:request_success_total{finished_reason="abort"}[10m])) / sum by (namespace, model_name) (rate(vllm:request_success_total[10m])) > 0.05',
        300, "warning", "More than 5% of {{ $labels.model_name }} requests are aborted",
        "{{ $labels.model_name }}: 11% of finished requests ended with finished_reason=abort.", VLLM_METRICS, "vllm.rules"),
    "VLLMRunningWithoutCompletions": _own(
        "VLLMRunningWithoutCompletions",
        "sum by (namespace, pod) (min_over_time(vllm:num_requests_running[15m])) > 0 and on (namespace, pod) sum by (namespace, pod) (increase(vllm:request_success_total[15m])) == 0",
        300, "critical", "{{ $labels.pod }} holds running requests but completes none",
        "{{ $labels.pod }} has had running requests for 15 minutes without a single completion.", VLLM_METRICS, "vllm.rules"),
    "VLLMCorruptedRequests": _own(
        "VLLMCorruptedRequests", "sum by (namespace, pod, model_name) (increase(vllm:corrupted_requests_total[5m])) > 0", 0,
        "critical", "NaN/Inf logits detected on {{ $labels.pod }}",
        "{{ $labels.pod }} produced requests with NaN logits in the last 5 minutes (VLLM_COMPUTE_NANS_IN_LOGITS=1).",
        VLLM_METRICS, "vllm.rules"),
    "VLLMRepetitionFinishSpike": _own(
        "VLLMRepetitionFinishSpike",
        'sum by (namespace, model_name) (rate(vllm:request_success_total{finished_reason="repetition"}[10m])) / sum by (namespace, model_name) (rate(vllm:request_success_total[10m])) > 0.02',
        300, "warning", "Repetition-terminated generations rising for {{ $labels.model_name }}",
        "3.9% of {{ $labels.model_name }} requests finished with finished_reason=repetition.", VLLM_METRICS, "vllm.rules"),
    "VLLMSpecDecodeAcceptanceLow": _own(
        "VLLMSpecDecodeAcceptanceLow",
        "sum by (namespace, model_name) (rate(vllm:spec_decode_num_accepted_tokens_total[10m])) / sum by (namespace, model_name) (rate(vllm:spec_decode_num_draft_tokens_total[10m])) < 0.65",
        600, "warning", "Speculative decoding acceptance below 65% for {{ $labels.model_name }}",
        "Draft acceptance for {{ $labels.model_name }} is 38%.", VLLM_METRICS, "vllm.rules"),
    "VLLMKVFragmentationHigh": _own(
        "VLLMKVFragmentationHigh", "max by (namespace, pod) (llmops:kv_cache_fragmentation:ratio) > 0.25", 900,
        "warning", "KV cache fragmentation above 25% on {{ $labels.pod }}",
        "External fragmentation of the KV block pool on {{ $labels.pod }} is 31%.", VLLM_METRICS, "vllm.rules",
        adapted="series computed by the team's kv-inspector sidecar (no engine exports fragmentation)"),
    "VLLMPreemptingWithFreeKV": _own(
        "VLLMPreemptingWithFreeKV",
        "sum by (namespace, pod) (rate(vllm:num_preemptions_total[5m])) > 0.05 and on (namespace, pod) max by (namespace, pod) (vllm:kv_cache_usage_perc) < 0.75",
        600, "warning", "{{ $labels.pod }} preempts while a quarter of its KV pool is free",
        "Preemptions on {{ $labels.pod }} while KV usage is 68%: likely fragmentation.", VLLM_METRICS, "vllm.rules"),
    # SGLang
    "SGLangTokenUsageHigh": _own(
        "SGLangTokenUsageHigh", "max by (namespace, pod, model_name) (sglang:token_usage) > 0.85", 300,
        "warning", "SGLang token pool above 85% on {{ $labels.pod }}",
        "sglang:token_usage on {{ $labels.pod }} is 0.93.", SGL_METRICS, "sglang.rules"),
    "SGLangRetractions": _own(
        "SGLangRetractions", "sum by (namespace, pod, model_name) (rate(sglang:num_retracted_requests_total[5m])) > 0.1",
        300, "warning", "SGLang is retracting requests on {{ $labels.pod }}",
        "{{ $labels.pod }} retracts 0.6 requests/s.", SGL_METRICS, "sglang.rules"),
    "SGLangQueueBacklog": _own(
        "SGLangQueueBacklog", "sum by (namespace, pod, model_name) (sglang:num_queue_reqs) > 20", 300,
        "warning", "SGLang queue backlog on {{ $labels.pod }}",
        "{{ $labels.pod }} has 46 queued requests.", SGL_METRICS, "sglang.rules"),
    "SGLangTTFTHigh": _own(
        "SGLangTTFTHigh",
        "histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(sglang:time_to_first_token_seconds_bucket[5m]))) > 2",
        600, "warning", "SGLang TTFT p99 above 2s for {{ $labels.model_name }}",
        "TTFT p99 for {{ $labels.model_name }} is 6.3 s.", SGL_METRICS, "sglang.rules"),
    "SGLangITLHigh": _own(
        "SGLangITLHigh",
        "histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(sglang:inter_token_latency_seconds_bucket[5m]))) > 0.08",
        600, "warning", "SGLang ITL p99 above 80 ms for {{ $labels.model_name }}",
        "ITL p99 for {{ $labels.model_name }} is 0.1 s.", SGL_METRICS, "sglang.rules"),
    "SGLangAbortedRequests": _own(
        "SGLangAbortedRequests",
        "sum by (namespace, model_name) (rate(sglang:num_aborted_requests_total[5m])) / (sum by (namespace, model_name) (rate(sglang:num_requests_total[5m]))) > 0.05",
        300, "warning", "SGLang aborts more than 5% of requests for {{ $labels.model_name }}",
        "{{ $labels.model_name }}: 9% of requests aborted.", SGL_METRICS, "sglang.rules"),
    "SGLangKVTransferFailures": _own(
        "SGLangKVTransferFailures", "sum by (namespace, pod) (increase(sglang:num_transfer_failed_reqs_total[5m])) > 0", 120,
        "warning", "Prefill-to-decode KV transfers failing on {{ $labels.pod }}",
        "{{ $labels.pod }} failed KV transfers in the last 5 minutes.", SGL_METRICS, "sglang.rules"),
    # TRT-LLM serve
    "TRTLLMKVCacheUtilizationHigh": _own(
        "TRTLLMKVCacheUtilizationHigh", "max by (namespace, pod, model_name) (trtllm_kv_cache_utilization) > 0.85", 300,
        "warning", "TRT-LLM KV cache above 85% on {{ $labels.pod }}",
        "trtllm_kv_cache_utilization on {{ $labels.pod }} is 0.9.", TRT_METRICS, "trtllm.rules"),
    "TRTLLMQueueTimeHigh": _own(
        "TRTLLMQueueTimeHigh",
        "sum by (namespace, model_name) (rate(trtllm_request_queue_time_seconds_sum[5m])) / sum by (namespace, model_name) (rate(trtllm_request_queue_time_seconds_count[5m])) > 0.3",
        300, "warning", "TRT-LLM mean queue time above 300 ms for {{ $labels.model_name }}",
        "Mean queue time of {{ $labels.model_name }} is 0.74 s.", TRT_METRICS, "trtllm.rules"),
    "TRTLLMTTFTHigh": _own(
        "TRTLLMTTFTHigh",
        "histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(trtllm_time_to_first_token_seconds_bucket[5m]))) > 2",
        600, "warning", "TRT-LLM TTFT p99 above 2 s for {{ $labels.model_name }}",
        "TTFT p99 for {{ $labels.model_name }} is 4.1 s.", TRT_METRICS, "trtllm.rules"),
    "TRTLLMAbortRatioHigh": _own(
        "TRTLLMAbortRatioHigh",
        'sum by (namespace, model_name) (rate(trtllm_request_success_total{finished_reason="abort"}[10m])) / sum by (namespace, model_name) (rate(trtllm_request_success_total[10m])) > 0.05',
        300, "warning", "TRT-LLM aborts more than 5% of {{ $labels.model_name }} requests",
        "abort ratio 0.12", TRT_METRICS, "trtllm.rules"),
    # Triton + TRT-LLM backend
    "TritonTRTLLMKVBlocksHigh": _own(
        "TritonTRTLLMKVBlocksHigh", 'max by (namespace, pod, model) (nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}) > 0.85',
        300, "warning", "Triton TRT-LLM KV blocks above 85% on {{ $labels.pod }}",
        "KV block fraction for {{ $labels.model }} on {{ $labels.pod }} is 0.94.", TRITON_METRICS, "triton.rules"),
    "TritonTRTLLMPausedRequests": _own(
        "TritonTRTLLMPausedRequests",
        'max by (namespace, pod, model) (nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests"}) > 0',
        300, "warning", "In-flight batcher is pausing requests on {{ $labels.pod }}",
        "{{ $labels.pod }} paused requests for lack of KV blocks.", TRITON_METRICS, "triton.rules"),
    "TritonInferenceFailures": _own(
        "TritonInferenceFailures", "sum by (namespace, pod, model, reason) (rate(nv_inference_request_failure[5m])) > 0.1",
        300, "warning", "Triton failing {{ $labels.model }} requests ({{ $labels.reason }})",
        "{{ $labels.pod }} fails 0.9 req/s of {{ $labels.model }} with reason {{ $labels.reason }}.", TRITON_METRICS, "triton.rules"),
    "TritonQueueDurationHigh": _own(
        "TritonQueueDurationHigh",
        "sum by (namespace, model) (rate(nv_inference_queue_duration_us[5m])) / sum by (namespace, model) (rate(nv_inference_request_success[5m])) / 1e6 > 0.3",
        300, "warning", "Triton mean queue time above 300 ms for {{ $labels.model }}",
        "Mean queue time for {{ $labels.model }} is 1.2 s.", TRITON_METRICS, "triton.rules"),
    "TritonIterationStalled": _own(
        "TritonIterationStalled", 'changes(nv_trt_llm_general_metrics{general_type="iteration_counter"}[5m]) == 0', 300,
        "critical", "TRT-LLM iteration counter stalled on {{ $labels.pod }}",
        "The in-flight batcher of {{ $labels.model }} on {{ $labels.pod }} has not advanced for 5 minutes.",
        TRITON_METRICS, "triton.rules"),
    # Envoy / gateway
    "EnvoyUpstream5xxHigh": _own(
        "EnvoyUpstream5xxHigh",
        'sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_rq_xx{envoy_response_code_class="5"}[5m])) / sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_rq_total[5m])) > 0.05',
        120, "critical", "Gateway returns 5xx for {{ $labels.envoy_cluster_name }}",
        "8.7% of requests to {{ $labels.envoy_cluster_name }} end in 5xx.", ENVOY_STATS, "envoy-gateway.rules"),
    "EnvoyUpstreamTimeouts": _own(
        "EnvoyUpstreamTimeouts",
        "sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_rq_timeout[5m])) / sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_rq_total[5m])) > 0.01",
        300, "warning", "Upstream timeouts on {{ $labels.envoy_cluster_name }}",
        "3.2% of requests to {{ $labels.envoy_cluster_name }} time out.", ENVOY_STATS, "envoy-gateway.rules"),
    "EnvoyUpstreamConnectFailures": _own(
        "EnvoyUpstreamConnectFailures",
        "sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_cx_connect_fail[5m])) > 0.5", 120,
        "warning", "Gateway cannot connect to {{ $labels.envoy_cluster_name }}",
        "Connection failures to {{ $labels.envoy_cluster_name }}: 2.4/s.", ENVOY_STATS, "envoy-gateway.rules"),
    "EnvoyDownstreamDisconnectsActive": _own(
        "EnvoyDownstreamDisconnectsActive",
        "sum by (envoy_http_conn_manager_prefix) (rate(envoy_http_downstream_cx_destroy_remote_active_rq[5m])) > 0.5",
        300, "warning", "Clients hang up with requests in flight ({{ $labels.envoy_http_conn_manager_prefix }})",
        "1.7 connections/s closed by clients with an active request.", ENVOY_HCM, "envoy-gateway.rules"),
    "EnvoyLatencyP99High": _own(
        "EnvoyLatencyP99High",
        "histogram_quantile(0.99, sum by (le, envoy_cluster_name) (rate(envoy_cluster_upstream_rq_time_bucket[5m]))) > 20000",
        600, "warning", "p99 upstream latency above 20 s on {{ $labels.envoy_cluster_name }}",
        "p99 upstream time is 27 s.", ENVOY_STATS, "envoy-gateway.rules"),
    # vLLM production-stack router
    "VLLMRouterQPSSkew": _own(
        "VLLMRouterQPSSkew", "vllm:current_qps / on () group_left avg(vllm:current_qps) > 2", 300, "warning",
        "Router sends a disproportionate share of traffic to {{ $labels.server }}",
        "{{ $labels.server }} receives 3.4x the average QPS.", PSTACK_ROUTER, "vllm-router.rules"),
    "VLLMRouterRequestErrors": _own(
        "VLLMRouterRequestErrors", "sum by (server, model) (rate(vllm:request_errors_total[5m])) > 0.2", 120,
        "critical", "Router sees request errors from {{ $labels.server }}",
        "Errors from {{ $labels.server }} for {{ $labels.model }}: 1.8/s.", PSTACK_ROUTER, "vllm-router.rules"),
    "VLLMRouterHealthyPodsLow": _own(
        "VLLMRouterHealthyPodsLow", "vllm:healthy_pods_total < 3", 120, "warning",
        "Router sees fewer than 3 healthy engines", "vllm:healthy_pods_total is 2.", PSTACK_ROUTER, "vllm-router.rules"),
    # llm-d EPP / GIE
    "EPPQueueImbalance": _own(
        "EPPQueueImbalance", "llm_d_epp_std_dev_queue_size > 2 * llm_d_epp_average_queue_size and llm_d_epp_average_queue_size > 2",
        300, "warning", "Queue sizes across the pool {{ $labels.name }} are skewed",
        "Std-dev of queue size in pool {{ $labels.name }} is 3.1x its mean.", EPP_METRICS, "epp.rules"),
    "EPPReadyEndpointsLow": _own(
        "EPPReadyEndpointsLow", "llm_d_epp_ready_endpoints < 0.75 * max_over_time(llm_d_epp_ready_endpoints[1h])",
        120, "warning", "InferencePool {{ $labels.name }} lost ready endpoints",
        "Pool {{ $labels.name }} has 2 ready endpoints (was 4).", EPP_METRICS, "epp.rules"),
    "EPPRequestErrors": _own(
        "EPPRequestErrors",
        "sum by (model_name) (rate(llm_d_epp_request_error_total[5m])) / sum by (model_name) (rate(llm_d_epp_request_total[5m])) > 0.05",
        120, "critical", "EPP request errors for {{ $labels.model_name }}",
        "5.9% of {{ $labels.model_name }} requests fail at the endpoint picker.", EPP_METRICS, "epp.rules"),
    # kube-state-metrics based engine restart rule (CUDA OOM exits with reason Error)
    "EngineContainerRestarted": _own(
        "EngineContainerRestarted",
        'increase(kube_pod_container_status_restarts_total{container=~"vllm|sglang|trtllm|triton|engine"}[10m]) > 0 and on (namespace, pod, container) kube_pod_container_status_last_terminated_reason{reason="Error"} == 1',
        0, "warning", "Engine container {{ $labels.container }} restarted in {{ $labels.pod }}",
        "{{ $labels.namespace }}/{{ $labels.pod }} ({{ $labels.container }}) exited with reason Error and restarted.",
        KSM_DOCS, "engine-k8s.rules"),
    "PodsPendingGPU": _own(
        "PodsPendingGPU",
        'sum by (namespace, pod) (kube_pod_status_phase{phase="Pending"}) > 0 and on (namespace, pod) kube_pod_container_resource_requests{resource="nvidia_com_gpu"} > 0',
        300, "warning", "GPU pod {{ $labels.pod }} is pending", "{{ $labels.namespace }}/{{ $labels.pod }} waits for a GPU node.",
        KSM_DOCS, "engine-k8s.rules"),
})


def team_rule(base_key: str, name: str, layer: str, failure_mode: str | None, severity: str | None = None,
              team: str | None = None, extra: dict | None = None, for_s: int | None = None) -> Rule:
    """A team's own copy of a rule: its own name and layer / failure_mode / severity labels."""
    base = RULES[base_key]
    labels = dict(base.labels)
    labels.pop("team", None)
    labels["layer"] = layer
    if failure_mode:
        labels["failure_mode"] = failure_mode
    if severity:
        labels["severity"] = severity
    if team:
        labels["team"] = team
    if extra:
        labels.update(extra)
    note = f"team copy of {base.name} renamed {name} with layer/failure_mode labels"
    if for_s is not None and for_s != base.for_s:
        note += ", for: %ds (upstream %ds)" % (for_s, base.for_s)
    r = base.variant(name=name, labels=labels, adapted=(base.adapted + "; " if base.adapted else "") + note)
    if for_s is not None:
        r.for_s = for_s
    r.group = "team-" + base.group
    return r


# ----------------------------------------------------------------------------------------------
# Topology and label shapes
# ----------------------------------------------------------------------------------------------


class Cluster:
    def __init__(self, name, ext=None, ksm_honor=True, dcgm_honor=False, dcgm_host_label="Hostname",
                 prom_url=None, gpu_model="NVIDIA H100 80GB HBM3", driver="550.90.07"):
        self.name = name
        # external labels Prometheus puts on every alert it sends
        self.ext = {"cluster": name, "prometheus": "monitoring/k8s"} if ext is None else dict(ext)
        self.ksm_honor = ksm_honor
        self.dcgm_honor = dcgm_honor
        self.dcgm_host_label = dcgm_host_label
        self.prom_url = prom_url or "http://prometheus-k8s-0.prometheus-operated.monitoring.svc:9090"
        self.gpu_model = gpu_model
        self.driver = driver
        self.ksm_instance = ip(name, "ksm") + ":8443"
        self.dcgm_pods = {}

    # --- shapes ----------------------------------------------------------------------------
    def ksm(self, **kw):
        """A kube-state-metrics series as kube-prometheus scrapes it (honorLabels: true)."""
        base = {"job": "kube-state-metrics", "instance": self.ksm_instance, "endpoint": "https-main",
                "service": "kube-state-metrics"}
        if not self.ksm_honor:
            # a plain scrape without honorLabels: the object's namespace/pod/container get exported_
            base.update({"namespace": "monitoring", "pod": "kube-state-metrics-6d9f8c7b54-q2xkt",
                         "container": "kube-state-metrics"})
            for k in ("namespace", "pod", "container"):
                if k in kw:
                    kw["exported_" + k] = kw.pop(k)
        base.update(kw)
        return base

    def dcgm(self, node, gpu: int, pod=None, namespace=None, container=None, xid=None):
        """A dcgm-exporter series for one GPU, scraped from the exporter DaemonSet pod."""
        uuid = "GPU-{}".format(hashlib.md5(("%s/%s/%d" % (self.name, node, gpu)).encode()).hexdigest())
        uuid = f"{uuid[:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:24]}-{uuid[24:36]}"
        dpod = self.dcgm_pods.setdefault(node, "nvidia-dcgm-exporter-" + pod_suffix(self.name, node))
        lab = {"gpu": str(gpu), "UUID": uuid, "device": "nvidia%d" % gpu,
               "modelName": self.gpu_model, self.dcgm_host_label: node,
               "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * gpu), "DCGM_FI_DRIVER_VERSION": self.driver,
               "job": "nvidia-dcgm-exporter", "instance": ip(self.name, node, "dcgm") + ":9400",
               "endpoint": "gpu-metrics", "service": "nvidia-dcgm-exporter"}
        if pod:
            if self.dcgm_honor:
                lab.update({"namespace": namespace, "pod": pod, "container": container})
            else:
                lab.update({"namespace": "gpu-operator", "pod": dpod, "container": "nvidia-dcgm-exporter",
                            "exported_namespace": namespace, "exported_pod": pod, "exported_container": container})
        else:
            lab.update({"namespace": "gpu-operator", "pod": dpod, "container": "nvidia-dcgm-exporter"})
        if xid is not None:
            lab["err_code"] = str(xid)
            lab["err_msg"] = XID_TEXT.get(xid, "Unknown Error")
        return lab

    def node_exporter(self, node, **kw):
        lab = {"job": "node-exporter", "instance": node, "namespace": "monitoring",
               "pod": "node-exporter-" + pod_suffix(self.name, node, "ne"), "container": "kube-rbac-proxy",
               "endpoint": "https", "service": "node-exporter"}
        lab.update(kw)
        return lab

    def kubelet(self, node, **kw):
        lab = {"job": "kubelet", "instance": ip(self.name, node, "kubelet") + ":10250", "endpoint": "https-metrics",
               "metrics_path": "/metrics", "node": node, "service": "kubelet", "namespace": "kube-system"}
        lab.update(kw)
        return lab


XID_TEXT = {13: "Graphics Engine Exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
            48: "Double Bit ECC Error", 63: "ECC page retirement or row remapping recording event",
            74: "NVLINK Error", 79: "GPU has fallen off the bus", 94: "Contained ECC error",
            95: "Uncontained ECC error", 119: "GSP RPC Timeout"}


class Dep:
    """An inference workload: a Deployment (or StatefulSet / LeaderWorkerSet) of engine pods."""

    CONTAINER = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "triton": "triton"}

    def __init__(self, cluster: Cluster, ns, name, engine, model, nodes, gpus=None, kind="Deployment",
                 container=None, gateway_ns="envoy-gateway-system", route=None):
        self.c = cluster
        self.ns = ns
        self.name = name
        self.engine = engine
        self.model = model
        self.kind = kind
        self.container = container or self.CONTAINER[engine]
        self.nodes = list(nodes)
        self.gpus = gpus or [[0] for _ in nodes]
        if kind == "Deployment":
            h = rs_hash(cluster.name, ns, name)
            self.pods = [f"{name}-{h}-{pod_suffix(cluster.name, ns, name, i)}" for i in range(len(nodes))]
        elif kind == "LeaderWorkerSet":
            # group 0 leader and workers: name-0, name-0-1, ...
            self.pods = [f"{name}-0"] + ["%s-0-%d" % (name, i) for i in range(1, len(nodes))]
        else:
            self.pods = ["%s-%d" % (name, i) for i in range(len(nodes))]
        self.route = route or f"httproute/{ns}/{name}/rule/0"
        self.gateway_ns = gateway_ns

    def node_of(self, i):
        return self.nodes[i]

    # --- label shapes --------------------------------------------------------------------------
    def engine_pod(self, i):
        """Labels of an aggregated per-pod engine rule (sum by (namespace, pod, model_name))."""
        if self.engine == "triton":
            return {"namespace": self.ns, "pod": self.pods[i], "model": self.model}
        return {"namespace": self.ns, "pod": self.pods[i], "model_name": self.model}

    def engine_model(self):
        if self.engine == "triton":
            return {"namespace": self.ns, "model": self.model}
        return {"namespace": self.ns, "model_name": self.model}

    def ksm_container(self, i, **kw):
        uid = hashlib.md5(("uid" + self.pods[i]).encode()).hexdigest()
        uid = f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"
        return self.c.ksm(namespace=self.ns, pod=self.pods[i], container=self.container, uid=uid, **kw)

    def ksm_pod(self, i):
        return {"namespace": self.ns, "pod": self.pods[i]}

    def ksm_workload(self, **kw):
        key = {"Deployment": "deployment", "StatefulSet": "statefulset", "LeaderWorkerSet": "statefulset"}[self.kind]
        return self.c.ksm(namespace=self.ns, **{key: self.name}, **kw)

    def dcgm(self, i, gpu_index=0, xid=None, with_pod=True):
        g = self.gpus[i][gpu_index]
        if with_pod:
            return self.c.dcgm(self.nodes[i], g, pod=self.pods[i], namespace=self.ns, container=self.container, xid=xid)
        return self.c.dcgm(self.nodes[i], g, xid=xid)

    def envoy(self):
        return {"envoy_cluster_name": self.route}

    def pod_monitor(self, i):
        """up{} series of the engine's PodMonitor."""
        return {"job": f"{self.ns}/{self.name}", "namespace": self.ns, "pod": self.pods[i],
                "instance": ip(self.c.name, self.pods[i]) + ":8000", "container": self.container,
                "endpoint": "metrics"}

    def router_server(self, i):
        return {"server": f"http://{ip(self.c.name, self.pods[i])}:8000"}


# ----------------------------------------------------------------------------------------------
# Fleet: occurrences, changes, truth, Alertmanager model, writers
# ----------------------------------------------------------------------------------------------


class Overlap(ValueError):
    pass


class TooShort(ValueError):
    """The condition never held for the rule's for: (or fired after the fleet's end): no alert."""


class Occ:
    def __init__(self, rule, labels, annotations, starts_ns, ends_ns, cluster, gen_url):
        self.rule = rule
        self.labels = labels
        self.annotations = annotations
        self.starts_ns = starts_ns
        self.ends_ns = ends_ns
        self.cluster = cluster
        self.gen_url = gen_url
        self.fp = fingerprint(labels)
        self.starts = rfc3339nano(starts_ns)

    def ref(self):
        return {"fingerprint": self.fp, "starts_at": self.starts}


class Change:
    def __init__(self, body, component=""):
        self.body = body
        p = body["payload"]
        self.fp = hashlib.sha256((p["source"] + "\x1f" + p["summary"] + "\x1f" + component).encode()).hexdigest()[:16]
        self.starts = p["timestamp"]

    def ref(self):
        return {"fingerprint": self.fp, "starts_at": self.starts}


class Route:
    def __init__(self, receiver, group_by, match=None, group_wait=30, group_interval=300,
                 repeat_interval=4 * 3600):
        self.receiver = receiver
        self.group_by = group_by          # list of label names, or ["..."]
        self.match = match or {}          # label -> set of accepted values (None: label must exist)
        self.group_wait = group_wait
        self.group_interval = group_interval
        self.repeat_interval = repeat_interval

    def matches(self, labels):
        for k, vals in self.match.items():
            if labels.get(k) not in vals:
                return False
        return True

    def key(self):
        if not self.match:
            return "{}"
        parts = []
        for k in sorted(self.match):
            vals = sorted(self.match[k])
            if len(vals) == 1:
                parts.append(f'{k}="{vals[0]}"')
            else:
                parts.append('{}=~"{}"'.format(k, "|".join(vals)))
        return "{{}}/{{{}}}".format(",".join(parts))


def quote_meta(s):
    out = ""
    for ch in s:
        if ch in "\\.+*?()|[]{}^$":
            out += "\\"
        out += ch
    return out


class Alertmanager:
    def __init__(self, external_url, routes, version="0.27.0", default_receiver="rootline"):
        self.external_url = external_url
        self.routes = routes
        self.version = version
        self.default = Route(default_receiver, ["alertname"])

    def route_for(self, labels):
        for r in self.routes:
            if r.matches(labels):
                return r
        return self.default


def body_sort_key(o):
    k = []
    for name in ("job", "instance"):
        v = o.labels.get(name)
        k.append((0, v) if v is not None else (1, ""))
    k.append(sorted(o.labels.items()))
    return k


class Fleet:
    def __init__(self, name, start, hours, story, clusters, ams=None):
        self.name = name
        self.start_ns = int(datetime.fromisoformat(start).replace(tzinfo=UTC).timestamp()) * NS
        self.end_ns = self.start_ns + int(hours * 3600) * NS
        self.story = story
        self.clusters = {c.name: c for c in clusters}
        self.ams = ams or {}
        self.occs: list[Occ] = []
        self.changes: list[Change] = []
        self.incidents = []
        self.noise_refs = []
        self.assigned = set()
        self.dup_every = 0
        self.notes = []

    # --- building ----------------------------------------------------------------------------
    def t(self, minute) -> int:
        return self.start_ns + int(round(minute * 60 * NS))

    def fire(self, rule, labels, t0, t1=None, cluster=None, ann=None) -> Occ:
        """The rule's condition holds from minute t0 to minute t1 (None: still at the end)."""
        if isinstance(rule, str):
            rule = RULES[rule]
        c = cluster or next(iter(self.clusters.values()))
        lab = dict(labels)
        by = BY.get(rule.name.split("#")[0]) if rule.by is None else rule.by
        if by is not None:
            lab = {k: v for k, v in lab.items() if k in by}
        lab.update(rule.labels)
        lab["alertname"] = rule.name
        for k, v in c.ext.items():
            lab.setdefault(k, v)
        lab = {k: str(v) for k, v in lab.items() if v is not None and v != ""}
        interval = rule.interval * NS
        offset = stable_int(c.name, rule.group, rule.interval) % interval

        def tick_at_or_after(t):
            k = -((offset - t) // interval)
            return k * interval + offset

        first = tick_at_or_after(self.t(t0))
        fire_at = first + -(-rule.for_s * NS // interval) * interval
        ends = None
        if t1 is not None:
            ends = tick_at_or_after(self.t(t1))
            if ends <= fire_at:
                raise TooShort(f"{self.name}: {rule.name} condition {t0}-{t1} too short for for: {rule.for_s}s")
        if fire_at >= self.end_ns - 60 * NS:
            raise TooShort(f"{self.name}: {rule.name} fires after the fleet ends")
        annotations = {"summary": render(rule.summary, lab), "description": render(rule.description, lab)}
        rb = {MIXIN_APPS: "kubernetes", MIXIN_KUBELET: "kubernetes", MIXIN_RES: "kubernetes",
              MIXIN_STORAGE: "kubernetes", KP_GENERAL: "general", KP_RELOADER: "prometheus-operator",
              NODE_MIXIN: "node"}.get(rule.source)
        if rb:
            annotations["runbook_url"] = f"https://runbooks.prometheus-operator.dev/runbooks/{rb}/{rule.name.lower()}"
        if rule.source == LLMD:
            annotations["runbook_url"] = "https://github.com/llm-d/llm-d/blob/main/docs/monitoring/alerting-runbook.md#" + rule.name.lower()
        if ann:
            annotations.update(ann)
        gen = "{}/graph?g0.expr={}&g0.tab=1".format(c.prom_url, urllib.parse.quote(rule.expr, safe=""))
        o = Occ(rule, lab, annotations, fire_at, ends, c, gen)
        for p in self.occs:
            if p.fp == o.fp:
                a_end = p.ends_ns if p.ends_ns is not None else self.end_ns
                b_end = o.ends_ns if o.ends_ns is not None else self.end_ns
                if not (b_end < p.starts_ns or a_end < o.starts_ns):
                    raise Overlap(f"{self.name}: overlapping occurrences of {rule.name} {lab}")
        self.occs.append(o)
        return o

    def change(self, minute, summary, source, details, links=None, routing_key=None) -> Change:
        ts = self.t(minute)
        ts_str = datetime.fromtimestamp(ts // NS, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (
            stable_int(summary) % 1000)
        body = {"routing_key": routing_key or "R0" + hashlib.md5(self.name.encode()).hexdigest()[:30].upper(),
                "payload": {"summary": summary, "timestamp": ts_str, "source": source,
                            "custom_details": {k: str(v) for k, v in details.items()}},
                "links": links or []}
        ch = Change(body)
        ch.minute = minute
        self.changes.append(ch)
        return ch

    def incident(self, iid, root, members):
        refs = []
        seen = set()
        allm = [root] + [m for m in members if m is not root]
        for m in allm:
            key = (m.fp, m.starts)
            if key in seen:
                continue
            seen.add(key)
            if key in self.assigned:
                raise ValueError(f"{self.name}: {key} assigned twice")
            self.assigned.add(key)
            refs.append(m.ref())
        self.incidents.append({"id": iid, "root": root.ref(), "alerts": refs})

    def noise(self, *items):
        for m in items:
            key = (m.fp, m.starts)
            if key in self.assigned:
                raise ValueError(f"{self.name}: {key} assigned twice")
            self.assigned.add(key)
            self.noise_refs.append(m.ref())

    # --- Alertmanager ------------------------------------------------------------------------
    def am_for(self, cluster):
        if cluster.name in self.ams:
            return self.ams[cluster.name]
        return self.ams["*"]

    def deliveries(self):
        groups = {}
        for o in self.occs:
            am = self.am_for(o.cluster)
            route = am.route_for(o.labels)
            if route.group_by == ["..."]:
                gl = dict(o.labels)
            else:
                gl = {k: o.labels[k] for k in route.group_by if k in o.labels}
            gkey = "{}:{{{}}}".format(route.key(), ", ".join(f'{k}="{gl[k]}"' for k in sorted(gl)))
            g = groups.setdefault((id(am), gkey), {"am": am, "route": route, "gl": gl, "key": gkey, "occs": []})
            g["occs"].append(o)
        out = []
        for g in groups.values():
            out.extend(self._simulate_group(g))
        out.sort(key=lambda x: (x[0], x[1]))
        bodies = []
        for i, (_, _, b) in enumerate(out):
            bodies.append(b)
            if self.dup_every and i % self.dup_every == self.dup_every - 1:
                bodies.append(b)  # HA peer / lost 2xx: the same notification delivered twice
        return bodies

    def _simulate_group(self, g):
        am, route = g["am"], g["route"]
        lat = 40_000_000  # Prometheus -> Alertmanager
        events = []
        for o in g["occs"]:
            events.append((o.starts_ns + lat, 0, o))
            if o.ends_ns is not None:
                events.append((o.ends_ns + lat, 1, o))
        events.sort(key=lambda e: (e[0], e[1]))
        store = {}        # fp -> (occ, resolved_at_ns or None)
        entry = None      # nflog entry: (firing fps, resolved fps, ts)
        next_flush = None
        ei = 0
        sent = []
        while True:
            nxt_event = events[ei][0] if ei < len(events) else None
            if next_flush is None:
                if nxt_event is None:
                    break
                # group (re)created on the first alert
                next_flush = nxt_event + route.group_wait * NS
            if nxt_event is not None and nxt_event <= next_flush:
                t, kind, o = events[ei]
                ei += 1
                if kind == 0:
                    store[o.fp] = [o, None]
                else:
                    if o.fp in store and store[o.fp][0] is o:
                        store[o.fp][1] = t
                continue
            if next_flush > self.end_ns:
                break
            now = next_flush
            alerts = list(store.values())
            if not alerts:
                next_flush = None
                continue
            firing = {a[0].fp for a in alerts if a[1] is None}
            resolved = {a[0].fp for a in alerts if a[1] is not None}
            if entry is None:
                notify = len(firing) > 0
            elif not firing <= entry[0]:
                notify = True
            elif not firing:
                notify = len(entry[0]) > 0
            elif not resolved <= entry[1]:
                notify = True
            else:
                notify = entry[2] < now - route.repeat_interval * NS
            if notify:
                reason = None
                if entry is None:
                    reason = "first notification"
                elif not firing <= entry[0]:
                    reason = "new alerts added"
                elif not firing:
                    reason = "all alerts resolved"
                elif not resolved <= entry[1]:
                    reason = "some alerts resolved"
                else:
                    reason = "repeat interval elapsed"
                sent.append((now, g["key"], self._body(am, route, g, alerts, reason)))
                entry = (firing, resolved, now)
            for a in alerts:
                if a[1] is not None:
                    del store[a[0].fp]
            if not store:
                next_flush = None
            else:
                next_flush = now + route.group_interval * NS
        return sent

    def _body(self, am, route, g, alerts, reason):
        occs = sorted(alerts, key=lambda a: body_sort_key(a[0]))
        items = []
        for o, res in occs:
            items.append({
                "status": "resolved" if res is not None else "firing",
                "labels": dict(sorted(o.labels.items())),
                "annotations": dict(sorted(o.annotations.items())),
                "startsAt": o.starts,
                "endsAt": rfc3339nano(o.ends_ns) if res is not None else ZERO_TIME,
                "generatorURL": o.gen_url,
                "fingerprint": o.fp,
            })
        common = dict(items[0]["labels"])
        for it in items[1:]:
            common = {k: v for k, v in common.items() if it["labels"].get(k) == v}
        common_ann = dict(items[0]["annotations"])
        for it in items[1:]:
            common_ann = {k: v for k, v in common_ann.items() if it["annotations"].get(k) == v}
        body = {"receiver": quote_meta(route.receiver),
                "status": "firing" if any(i["status"] == "firing" for i in items) else "resolved",
                "alerts": items}
        if tuple(int(x) for x in am.version.split(".")[:2]) >= (0, 32):
            body["notification_reason"] = reason
        body.update({"groupLabels": dict(sorted(g["gl"].items())), "commonLabels": dict(sorted(common.items())),
                     "commonAnnotations": dict(sorted(common_ann.items())), "externalURL": am.external_url,
                     "version": "4", "groupKey": g["key"], "truncatedAlerts": 0})
        return body

    # --- writing -----------------------------------------------------------------------------
    def write(self):
        missing = [(o.rule.name, o.starts) for o in self.occs if (o.fp, o.starts) not in self.assigned]
        missing += [("change", c.starts) for c in self.changes if (c.fp, c.starts) not in self.assigned]
        if missing:
            raise ValueError(f"{self.name}: not in truth: {missing}")
        d = os.path.join(OUT, self.name)
        os.makedirs(d, exist_ok=True)
        bodies = self.deliveries()
        delivered = {(a["fingerprint"], a["startsAt"]) for b in bodies for a in b["alerts"]}
        lost = [(o.rule.name, o.starts) for o in self.occs if (o.fp, o.starts) not in delivered]
        if lost:
            raise ValueError(f"{self.name}: occurrences never delivered: {lost}")
        with open(os.path.join(d, "alerts.jsonl"), "w") as f:
            for b in bodies:
                f.write(json.dumps(b, separators=(",", ":")) + "\n")
        if self.changes:
            with open(os.path.join(d, "changes.jsonl"), "w") as f:
                for c in sorted(self.changes, key=lambda c: c.starts):
                    f.write(json.dumps(c.body, separators=(",", ":")) + "\n")
        with open(os.path.join(d, "truth.json"), "w") as f:
            json.dump({"incidents": self.incidents, "noise": self.noise_refs}, f, indent=1)
            f.write("\n")
        self._readme(d, len(bodies))
        return {"name": self.name, "clusters": sorted(self.clusters), "occurrences": len(self.occs),
                "changes": len(self.changes), "incidents": len(self.incidents), "noise": len(self.noise_refs),
                "bodies": len(bodies)}

    def _readme(self, d, nbodies):
        lines = [f"# {self.name}", ""]
        lines += [self.story.strip(), ""]
        lines += ["Clusters: %s. %d alert occurrences, %d change events, %d webhook bodies; "
                  "%d incidents, %d noise entries (see truth.json)." % (
                      ", ".join(sorted(self.clusters)), len(self.occs), len(self.changes), nbodies,
                      len(self.incidents), len(self.noise_refs)), ""]
        occ_by_key = {(o.fp, o.starts): o for o in self.occs}
        chg_by_key = {(c.fp, c.starts): c for c in self.changes}

        def describe(ref):
            k = (ref["fingerprint"], ref["starts_at"])
            if k in occ_by_key:
                o = occ_by_key[k]
                return f"`{o.rule.name}` at {o.starts}"
            return "change \"{}\" at {}".format(chg_by_key[k].body["payload"]["summary"], chg_by_key[k].starts)

        lines += ["## Truth", ""]
        for inc in self.incidents:
            lines.append("- `%s`: %d members, root %s" % (inc["id"], len(inc["alerts"]), describe(inc["root"])))
        counts = {}
        for ref in self.noise_refs:
            k = (ref["fingerprint"], ref["starts_at"])
            name = occ_by_key[k].rule.name if k in occ_by_key else "change event"
            counts[name] = counts.get(name, 0) + 1
        lines.append("- noise: " + ", ".join("%s x%d" % kv for kv in sorted(counts.items())))
        lines.append("")
        for n in self.notes:
            lines.append(n)
        if self.notes:
            lines.append("")
        lines += ["## Rules used", ""]
        seen = {}
        for o in self.occs:
            seen.setdefault(o.rule.name, o.rule)
        for name in sorted(seen):
            r = seen[name]
            s = "- `%s` (for: %ds, labels %s): `%s`" % (
                name, r.for_s, ", ".join("{}={}".format(*kv) for kv in sorted(r.labels.items())), r.source)
            if r.adapted:
                s += "; adapted: " + r.adapted
            lines.append(s)
        if self.changes:
            lines += ["", "Change events arrive as PagerDuty Change Events (changes.jsonl)."]
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("\n".join(lines) + "\n")


# labels that survive each rule's aggregation (None: the series' labels are kept whole)
BY = {
    "KubePodNotReady": ["namespace", "pod", "cluster"],
    "KubeContainerWaiting": ["namespace", "pod", "container", "cluster"],
    "TargetDown": ["cluster", "job", "namespace", "service"],
    "CPUThrottlingHigh": ["namespace", "pod", "container", "instance", "service", "uid", "cluster"],
    "LLMDKVCacheSaturation": ["pod", "model_name"],
    "LLMDHighPreemptions": ["pod"],
    "LLMDRequestQueueBuildup": ["pod", "model_name"],
    "LLMDHighTTFT": ["model_name"],
    "LLMDExtremeTTFT": ["model_name"],
    "LLMDModelHighErrorRate": ["model_name"],
    "LLMDLowReplicaCount": [],
    "LLMDNoHealthyBackends": [],
    "LLMDGPUUnderutilization": ["node"],
    "LLMDLowPrefixCacheHitRate": [],
    "EnvoyUpstream5xxHigh": ["envoy_cluster_name"],
    "EnvoyUpstreamTimeouts": ["envoy_cluster_name"],
    "EnvoyUpstreamConnectFailures": ["envoy_cluster_name"],
    "EnvoyLatencyP99High": ["envoy_cluster_name"],
    "EnvoyDownstreamDisconnectsActive": ["envoy_http_conn_manager_prefix"],
    "EPPRequestErrors": ["model_name"],
    "VLLMRouterRequestErrors": ["server", "model"],
    "PodsPendingGPU": ["namespace", "pod"],
}

RULES["VLLMRequestsWaitingHigh"] = _own(
    "VLLMRequestsWaitingHigh", "sum by (namespace, pod, model_name) (vllm:num_requests_waiting) > 20", 300, "warning",
    "{{ $labels.pod }} has a growing queue", "{{ $labels.pod }} has 37 requests waiting.", VLLM_METRICS, "vllm.rules")
RULES["VLLMTTFTHigh"] = _own(
    "VLLMTTFTHigh",
    "histogram_quantile(0.99, sum by (le, namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2",
    600, "warning", "TTFT p99 above 2 s for {{ $labels.model_name }}", "TTFT p99 of {{ $labels.model_name }} is 5.8 s.",
    VLLM_METRICS, "vllm.rules")
RULES["ServingControllerUnavailable"] = R(
    "ServingControllerUnavailable",
    'sum by (namespace, controller, controller_kind) (label_replace(label_replace(kube_deployment_status_replicas_unavailable{job="kube-state-metrics"}, "controller", "$1", "deployment", "(.*)"), "controller_kind", "Deployment", "", "")) > 0',
    300, {"severity": "warning", "layer": "platform", "owner": "sre"}, "{{ $labels.controller }} has unavailable replicas",
    "{{ $labels.controller_kind }} {{ $labels.namespace }}/{{ $labels.controller }} has unavailable replicas for 5 minutes.",
    OWN + "kubernetes/kube-state-metrics:docs/metrics/workload/deployment-metrics.md", "sre-workloads.rules")
RULES["NodeRDMAPortDown"] = R(
    "NodeRDMAPortDown", 'node_infiniband_state_id{job="node-exporter"} != 4', 120,
    {"severity": "critical"}, "RDMA port {{ $labels.device }}/{{ $labels.port }} down on {{ $labels.instance }}",
    "InfiniBand/RoCE port {{ $labels.device }} port {{ $labels.port }} on {{ $labels.instance }} left the ACTIVE state.",
    OWN + "prometheus/node_exporter:collector/infiniband_linux.go", "node-rdma.rules", interval=60)
RULES["DeploymentRolloutInProgress"] = _own(
    "DeploymentRolloutInProgress",
    'kube_deployment_status_replicas_updated{job="kube-state-metrics"} != kube_deployment_spec_replicas{job="kube-state-metrics"}',
    300, "info", "Deployment {{ $labels.namespace }}/{{ $labels.deployment }} is rolling out",
    "Deployment {{ $labels.namespace }}/{{ $labels.deployment }} has a rollout in progress.", KSM_DOCS, "engine-k8s.rules")

ENGINE_SIGNALS = {
    "vllm": {"kv_high": "VLLMKVCacheUsageHigh", "preempt": "VLLMPreemptionsHigh", "queue": "LLMDRequestQueueBuildup",
             "ttft": "LLMDHighTTFT", "ttft_crit": "LLMDExtremeTTFT", "itl": "VLLMITLJitterHigh", "tpot": "VLLMTPOTHigh",
             "queue_time": "VLLMQueueTimeHigh", "abort": "VLLMAbortRatioHigh", "stuck": "VLLMRunningWithoutCompletions",
             "nan": "VLLMCorruptedRequests", "repetition": "VLLMRepetitionFinishSpike", "spec_low": "VLLMSpecDecodeAcceptanceLow",
             "frag": "VLLMKVFragmentationHigh", "frag_heur": "VLLMPreemptingWithFreeKV", "errors": "LLMDModelHighErrorRate"},
    "sglang": {"kv_high": "SGLangTokenUsageHigh", "preempt": "SGLangRetractions", "queue": "SGLangQueueBacklog",
               "ttft": "SGLangTTFTHigh", "itl": "SGLangITLHigh", "abort": "SGLangAbortedRequests",
               "kv_transfer": "SGLangKVTransferFailures", "queue_time": "SGLangQueueBacklog"},
    "trtllm": {"kv_high": "TRTLLMKVCacheUtilizationHigh", "queue_time": "TRTLLMQueueTimeHigh", "ttft": "TRTLLMTTFTHigh",
               "abort": "TRTLLMAbortRatioHigh", "queue": "TRTLLMQueueTimeHigh"},
    "triton": {"kv_high": "TritonTRTLLMKVBlocksHigh", "preempt": "TritonTRTLLMPausedRequests", "failures": "TritonInferenceFailures",
               "queue_time": "TritonQueueDurationHigh", "stuck": "TritonIterationStalled", "ttft": "TritonQueueDurationHigh",
               "queue": "TritonQueueDurationHigh", "abort": "TritonInferenceFailures"},
}
PLATFORM_SIGNALS = {
    "restart": "EngineContainerRestarted", "crashloop": "KubePodCrashLooping", "oomkilled": "KubernetesContainerOomKiller",
    "restart_loop": "LLMDPodRestartLoop", "replicas": "KubeDeploymentReplicasMismatch", "not_ready": "KubePodNotReady",
    "fb_low": "GPUFramebufferNearlyFull", "fb_ratio": "GPUMemoryUsageHigh", "xid": "GPUXidError", "ecc": "GPUEccDoubleBitErrors",
    "row_remap": "GPURowRemapFailure", "nvlink": "GPUNVLinkErrors", "gpu_temp": "GPUHighTemperature", "gpu_idle": "GPUUtilizationLow",
    "gw_5xx": "EnvoyUpstream5xxHigh", "gw_timeout": "EnvoyUpstreamTimeouts", "gw_disconnect": "EnvoyDownstreamDisconnectsActive",
    "gw_connect": "EnvoyUpstreamConnectFailures", "gw_latency": "EnvoyLatencyP99High", "epp_imbalance": "EPPQueueImbalance",
    "epp_ready": "EPPReadyEndpointsLow", "epp_errors": "EPPRequestErrors", "router_skew": "VLLMRouterQPSSkew",
    "router_errors": "VLLMRouterRequestErrors", "router_healthy": "VLLMRouterHealthyPodsLow", "pending": "PodsPendingGPU",
    "rollout_stuck": "KubeDeploymentRolloutStuck", "generation": "KubeDeploymentGenerationMismatch",
    "rollout_info": "DeploymentRolloutInProgress", "mem_pressure": "LLMDMemoryPressure",
}
TEAM_NAMES = {  # signal -> (name suffix, layer, failure_mode)
    "kv_high": ("KVCachePoolHigh", "engine", "oom"), "preempt": ("PreemptionStorm", "engine", "preemption"),
    "queue": ("QueueBacklog", "serving", None), "queue_time": ("QueueWaitHigh", "serving", None),
    "ttft": ("TTFTBudgetBurn", "serving", None), "ttft_crit": ("TTFTCritical", "serving", None),
    "itl": ("ITLJitter", "engine", "preemption"), "tpot": ("TPOTHigh", "engine", "preemption"),
    "abort": ("AbortRatioHigh", "serving", "timeout"), "stuck": ("GhostRequests", "engine", "timeout"),
    "nan": ("NaNLogits", "engine", "numeric"), "repetition": ("RepetitionSpike", "engine", "numeric"),
    "spec_low": ("SpecDecodeAcceptanceLow", "engine", "numeric"), "frag": ("KVFragmentation", "engine", "kv_fragmentation"),
    "frag_heur": ("PreemptWithFreeBlocks", "engine", "kv_fragmentation"), "errors": ("ErrorRate", "serving", None),
    "restart": ("EngineRestarted", "platform", "oom"), "fb_low": ("GPUMemoryHeadroomLow", "hardware", "oom"),
    "xid": ("GPUXid", "hardware", None), "ecc": ("GPUEccUncorrectable", "hardware", "numeric"),
    "gw_5xx": ("Gateway5xx", "serving", None), "gw_timeout": ("GatewayTimeouts", "serving", "timeout"),
    "gw_disconnect": ("ClientDisconnects", "serving", "timeout"), "epp_imbalance": ("HotReplica", "serving", "hot_instance"),
    "router_skew": ("HotReplica", "serving", "hot_instance"), "failures": ("InferenceFailures", "serving", None),
    "kv_transfer": ("KVTransferFailures", "engine", "timeout"), "gw_latency": ("GatewayLatency", "serving", None),
    "epp_ready": ("PoolEndpointsLost", "serving", None), "nvlink": ("NVLinkErrors", "hardware", None),
}

POD_ENGINE = {"kv_high", "preempt", "queue", "stuck", "nan", "frag", "frag_heur", "kv_transfer", "failures"}
MODEL_ENGINE = {"ttft", "ttft_crit", "itl", "tpot", "queue_time", "abort", "repetition", "spec_low", "errors"}
KSM_CONTAINER = {"restart", "crashloop", "oomkilled", "restart_loop"}
DCGM_SIG = {"fb_low", "fb_ratio", "xid", "ecc", "row_remap", "nvlink", "gpu_temp", "gpu_idle"}
GW = {"gw_5xx", "gw_timeout", "gw_connect", "gw_latency"}


class Pack:
    """Which rule a fleet's Prometheus evaluates for each signal, and how its labels come out."""

    def __init__(self, engine, llmd=False, team=None, prefix="", team_signals=None, overrides=None,
                 team_severity=None):
        self.engine = engine
        self.llmd = llmd
        self.team = team
        self.prefix = prefix
        self.team_signals = set(team_signals or [])
        self.overrides = overrides or {}
        self.team_severity = team_severity or {}
        self._cache = {}

    def rule(self, signal) -> Rule:
        if signal in self._cache:
            return self._cache[signal]
        if signal in self.overrides:
            r = self.overrides[signal]
            r = RULES[r] if isinstance(r, str) else r
        else:
            base = ENGINE_SIGNALS[self.engine].get(signal) if signal in POD_ENGINE | MODEL_ENGINE else None
            if base is None and signal not in POD_ENGINE | MODEL_ENGINE:
                base = PLATFORM_SIGNALS.get(signal)
            if base is None:
                self._cache[signal] = None
                return None
            if self.engine == "vllm" and self.llmd:
                base = {"kv_high": "LLMDKVCacheSaturation", "preempt": "LLMDHighPreemptions",
                        "restart": "LLMDPodRestartLoop"}.get(signal, base)
            if self.engine == "vllm" and not self.llmd:
                base = {"queue": "VLLMRequestsWaitingHigh", "ttft": "VLLMTTFTHigh", "errors": "EPPRequestErrors"}.get(signal, base)
            if self.team and signal in self.team_signals and signal in TEAM_NAMES:
                suffix, layer, fm = TEAM_NAMES[signal]
                r = team_rule(base, self.prefix + suffix, layer, fm, team=self.team,
                              severity=self.team_severity.get(signal))
                r.by = BY.get(base)
            else:
                r = RULES[base]
        self._cache[signal] = r
        return r

    def labels(self, signal, dep: Dep, i=0, xid=None, gpu_index=0):
        r = self.rule(signal)
        if signal in POD_ENGINE:
            if r.name in ("TRTLLMQueueTimeHigh", "TritonQueueDurationHigh", "EPPRequestErrors"):
                return dep.engine_model()
            return dep.engine_pod(i)
        if signal in MODEL_ENGINE:
            return dep.engine_model()
        if signal in KSM_CONTAINER:
            lab = dep.ksm_container(i)
            if r.name == "KubePodCrashLooping":
                lab["reason"] = "CrashLoopBackOff"
            return lab
        if signal == "not_ready" or signal == "pending":
            return dep.ksm_pod(i)
        if signal in ("replicas", "rollout_stuck", "generation", "rollout_info"):
            lab = dep.ksm_workload()
            if signal == "rollout_stuck":
                lab.update({"condition": "Progressing", "status": "false"})
            return lab
        if signal in DCGM_SIG:
            return dep.dcgm(i, gpu_index=gpu_index, xid=xid if signal == "xid" else None,
                            with_pod=signal not in ("xid", "gpu_idle"))
        if signal in GW:
            return dep.envoy()
        if signal == "gw_disconnect":
            return {"envoy_http_conn_manager_prefix": "{}/{}".format(dep.gateway_ns, "inference-gateway")}
        if signal in ("epp_imbalance", "epp_ready"):
            return {"name": dep.name + "-pool", "namespace": dep.ns, "job": f"{dep.ns}/{dep.name}-epp"}
        if signal == "epp_errors":
            return {"model_name": dep.model}
        if signal in ("router_skew", "router_errors"):
            lab = dep.router_server(i)
            lab.update({"namespace": dep.ns, "job": f"{dep.ns}/vllm-router", "model": dep.model})
            return lab
        if signal == "router_healthy":
            return {"namespace": dep.ns, "job": f"{dep.ns}/vllm-router"}
        if signal == "mem_pressure":
            return {"namespace": dep.ns, "pod": dep.pods[i], "container": dep.container}
        raise KeyError(signal)

    def fire(self, f: Fleet, signal, dep: Dep, i, t0, t1, xid=None, gpu_index=0, extra=None, ann=None):
        """Fire the signal's rule; None when the same alert (same labels) is already active then,
        e.g. two signals that one engine's pack covers with a single rule."""
        if self.rule(signal) is None:
            return None
        lab = self.labels(signal, dep, i, xid=xid, gpu_index=gpu_index)
        if extra:
            lab.update(extra)
        try:
            return f.fire(self.rule(signal), lab, t0, t1, cluster=dep.c, ann=ann)
        except (Overlap, TooShort):
            return None


# ----------------------------------------------------------------------------------------------
# Stories (scenario builders).  Each fires the occurrences of one incident and records its truth.
# Times are minutes from the fleet's start; `t` is when the underlying problem begins.
# ----------------------------------------------------------------------------------------------


def live(*xs):
    return [x for x in xs if x is not None]


def kv_fragmentation_cascade(f, p: Pack, dep: Dep, victim: int, t, iid, frag="metric", gateway=True,
                             crashes=2, host_oom=False, extra_members=(), root_override=None, frag_for_late=False):
    """F4 -> F1 cascade: fragmented KV pool, long requests fail, pool and framebuffer fill, the engine dies
    (CUDA OOM: reason Error; or the host cgroup OOM killer when `host_oom`), the pod restarts and model
    load takes minutes, survivors queue, TTFT and the gateway's 5xx follow."""
    m = []
    survivors = [i for i in range(len(dep.pods)) if i != victim]
    crash_t = t + 12
    root = None
    if frag == "metric":
        # the sidecar's fragmentation ratio crosses 25% at t; rule for: 15m fires after the first crash
        root = p.fire(f, "frag", dep, victim, t, t + 12 + 9 * crashes + 8)
    elif frag == "heuristic":
        # preemptions while a quarter of the pool is still free: the heuristic holds until the pool fills
        root = p.fire(f, "frag_heur", dep, victim, t - 9, t + 4)
    kv = p.fire(f, "kv_high", dep, victim, t + 4, crash_t)
    if root is None:
        root = kv
    m += live(kv, p.fire(f, "abort", dep, 0, t + 5, t + 16 + 9 * crashes))
    m += live(p.fire(f, "fb_low", dep, victim, t + 7, crash_t))
    if host_oom:
        m += live(p.fire(f, "mem_pressure", dep, victim, t + 2, crash_t))
    for k in range(crashes):
        ct = crash_t + 9 * k
        if k > 0:
            m += live(p.fire(f, "kv_high", dep, victim, ct - 7, ct))
    m += live(p.fire(f, "oomkilled" if host_oom else "restart", dep, victim, crash_t, crash_t + 9 * (crashes - 1) + 10))
    if crashes >= 2:
        m += live(p.fire(f, "crashloop", dep, victim, crash_t + 9 + 1, crash_t + 9 * crashes + 17))
    m += live(p.fire(f, "replicas", dep, 0, crash_t, crash_t + 9 * crashes + 14))
    for s in survivors:
        m += live(p.fire(f, "queue", dep, s, crash_t + 1.5, crash_t + 9 * crashes + 12))
    m += live(p.fire(f, "ttft", dep, 0, crash_t + 2, crash_t + 9 * crashes + 13))
    if gateway:
        m += live(p.fire(f, "gw_5xx", dep, 0, crash_t + 0.2, crash_t + 9 * crashes + 6))
    m += list(extra_members)
    f.incident(iid, root_override or root, m + [root])
    return root, m


def preemption_storm(f, p: Pack, dep: Dep, pod: int, t, iid, cause=None, gateway=True, length=40, with_ttft=True):
    """F2: a burst of long prompts fills the KV pool, the scheduler preempts (recompute) and ITL jitters."""
    kv = p.fire(f, "kv_high", dep, pod, t, t + length)
    m = live(kv,
             p.fire(f, "preempt", dep, pod, t + 2, t + length - 2),
             p.fire(f, "itl", dep, 0, t + 3, t + length),
             p.fire(f, "tpot", dep, 0, t + 4, t + length - 1) if dep.engine == "vllm" else None)
    if with_ttft:
        m += live(p.fire(f, "ttft", dep, 0, t + 6, t + length - 3))
    if gateway:
        m += live(p.fire(f, "gw_latency", dep, 0, t + 7, t + length - 4))
    root = cause or kv
    f.incident(iid, root, m + [root])
    return root, m


def ghost_requests(f, p: Pack, dep: Dep, pods, t, iid, cause=None, length=55):
    """F3: clients give up at 30 s while the engine keeps generating to 60 s; disconnected requests keep
    their slots, completions stall, queues and timeouts grow."""
    m = live(p.fire(f, "gw_disconnect", dep, 0, t, t + length),
             p.fire(f, "abort", dep, 0, t + 1, t + length))
    stuck = []
    for k, i in enumerate(pods):
        # the first pod fills with disconnected generations first; the others follow
        stuck += live(p.fire(f, "stuck", dep, i, t + 4 + 2 * k, t + length - 5))
    m += stuck
    m += live(p.fire(f, "gw_timeout", dep, 0, t + 3, t + length - 2))
    for i in pods:
        m += live(p.fire(f, "queue", dep, i, t + 6, t + length - 6))
    root = cause or (stuck[0] if stuck else m[0])
    f.incident(iid, root, m + [root])
    return root, m


def hot_instance(f, p: Pack, dep: Dep, hot: int, t, iid, via="router", cause=None, length=60):
    """F5: one system prompt's prefix hashes to a single replica, which runs hot while the rest idle."""
    sig = {"router": "router_skew", "epp": "epp_imbalance"}[via]
    skew = p.fire(f, sig, dep, hot, t, t + length)
    m = live(skew,
             p.fire(f, "kv_high", dep, hot, t + 3, t + length - 2),
             p.fire(f, "queue", dep, hot, t + 4, t + length - 3),
             p.fire(f, "preempt", dep, hot, t + 6, t + length - 6),
             p.fire(f, "ttft", dep, 0, t + 7, t + length - 4))
    root = cause or skew
    f.incident(iid, root, m + [root])
    return root, m


def numeric_after_deploy(f, p: Pack, dep: Dep, t, iid, change_details=None, source="argocd", spec=True, pods=None):
    """F6: a deploy (new image / fp8 KV cache) starts producing NaN logits on the new replicas."""
    ch = f.change(t, "Deploy {}/{}: {}".format(dep.ns, dep.name, (change_details or {}).get("what", "image bump")), source,
                  dict({"cluster": dep.c.name, "namespace": dep.ns, "deployment": dep.name}, **(change_details or {})),
                  links=[{"href": f"https://argocd.example.internal/applications/{dep.name}", "text": "Argo CD"}])
    m = []
    for i in (pods if pods is not None else range(len(dep.pods))):
        m += live(p.fire(f, "nan", dep, i, t + 9 + 3 * i, t + 75))
    m += live(p.fire(f, "repetition", dep, 0, t + 10, t + 75))
    if spec and dep.engine == "vllm":
        m += live(p.fire(f, "spec_low", dep, 0, t + 9, t + 75))
    f.incident(iid, ch, m + [ch])
    return ch, m


def node_lost(f, c: Cluster, node, t, iid, hits, p_plat: Pack, length=70, drained=None, awesome=False):
    """A GPU node stops reporting (NotReady) or is drained: several deployments lose replicas at once.
    `hits` = [(pack, dep, pod index)] on that node.  Node alerts have no pod label."""
    m = []
    root = None
    if drained:
        root = f.change(t, f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data", drained,
                        {"cluster": c.name, "namespace": "", "deployment": "", "node": node,
                         "reason": "firmware update (maintenance ticket MNT-2291)"})
    else:
        root = f.fire("KubeNodeNotReady", c.ksm(node=node, condition="Ready", status="true"), t + 0.7, t + length, cluster=c)
        m += live(f.fire("KubeNodeUnreachable", c.ksm(node=node, key="node.kubernetes.io/unreachable", effect="NoSchedule"),
                         t + 1, t + length, cluster=c))
        m += live(f.fire("TargetDown", {"job": "node-exporter", "namespace": "monitoring", "service": "node-exporter"},
                         t + 0.5, t + length, cluster=c),
                  f.fire("TargetDown", {"job": "nvidia-dcgm-exporter", "namespace": "gpu-operator",
                                        "service": "nvidia-dcgm-exporter"}, t + 0.5, t + length, cluster=c))
        if awesome:
            m += live(f.fire("PrometheusTargetMissing", c.node_exporter(node), t + 0.5, t + length, cluster=c))
    for (p, dep, i) in hits:
        # the old pod is evicted after the 300 s toleration; its replacement waits for a GPU node
        new_pod_index = len(dep.pods)
        dep.pods.append(dep.pods[i].rsplit("-", 1)[0] + "-" + pod_suffix(dep.name, "re", i, t))
        dep.nodes.append("")
        dep.gpus.append([0])
        m += live(p.fire(f, "pending", dep, new_pod_index, t + 6, t + length + 4),
                  f.fire("KubePodNotReady", dep.ksm_pod(new_pod_index), t + 6, t + length + 4, cluster=dep.c),
                  p.fire(f, "replicas", dep, 0, t + 0.8, t + length + 8))
        survivors = [k for k in range(new_pod_index) if k != i and dep.nodes[k] != node]
        for s in survivors[:2]:
            m += live(p.fire(f, "queue", dep, s, t + 2, t + length + 6))
        m += live(p.fire(f, "ttft", dep, 0, t + 3, t + length + 5))
        if not drained:
            m += live(p.fire(f, "gw_5xx", dep, 0, t + 0.3, t + 5))
    f.incident(iid, root, m + [root])
    return root, m


def scrape_failure(f, c: Cluster, dep: Dep, t, iid, cause=None, length=50, llmd=True, awesome=True):
    """Prometheus cannot scrape the engine pods (a NetworkPolicy now drops port 8000 from the monitoring
    namespace).  up == 0 looks like an outage; the gateway serves normally."""
    m = live(f.fire("TargetDown", {"job": f"{dep.ns}/{dep.name}", "namespace": dep.ns, "service": dep.name},
                    t, t + length, cluster=c))
    if awesome:
        for i in range(len(dep.pods)):
            m += live(f.fire("PrometheusTargetMissing", dep.pod_monitor(i), t + 0.2 * i, t + length, cluster=c))
    if llmd:
        m += live(f.fire("LLMDNoHealthyBackends", {}, t, t + length, cluster=c),
                  f.fire("LLMDLowReplicaCount", {}, t, t + length, cluster=c))
    root = cause or m[0]
    f.incident(iid, root, m + [root])
    return root, m


def bad_rollout(f, p: Pack, dep: Dep, t, iid, announce="change", what="--max-model-len 131072", length=60):
    """A rollout whose new pods cannot start (the new flag asks for more KV than the GPU holds); with
    maxUnavailable 1 the old replicas carry the load and queue."""
    m = []
    ch = None
    if announce == "change":
        ch = f.change(t, f"Deploy {dep.ns}/{dep.name}: {what}", "github-actions",
                      {"cluster": dep.c.name, "namespace": dep.ns, "deployment": dep.name, "change": what,
                       "revision": "%d" % (stable_int(dep.name) % 90 + 10)},
                      links=[{"href": "https://github.example.internal/ml-platform/deploy/pull/%d" % (stable_int(dep.name, t) % 4000),
                              "text": "PR"}])
    new = len(dep.pods)
    dep.pods.append(dep.pods[0].rsplit("-", 2)[0] + "-" + rs_hash(dep.name, "new", t) + "-" + pod_suffix(dep.name, "new", t))
    dep.nodes.append(dep.nodes[0])
    dep.gpus.append(dep.gpus[0])
    rollout = p.fire(f, "rollout_stuck", dep, 0, t + 10, t + length)
    gen = None
    if announce == "generation":
        gen = p.fire(f, "generation", dep, 0, t + 0.2, t + length)
    m += live(rollout, gen,
              p.fire(f, "crashloop", dep, new, t + 3, t + length),
              p.fire(f, "replicas", dep, 0, t + 1, t + length + 5))
    for s in range(min(2, new)):
        if s != 0:
            m += live(p.fire(f, "queue", dep, s, t + 2, t + length))
    m += live(p.fire(f, "ttft", dep, 0, t + 4, t + length - 2))
    root = ch or gen or rollout
    f.incident(iid, root, m + [root])
    return root, m


def shared_gpu_fault(f, node, c: Cluster, t, iid, hits, xid=95, extra_hw=("ecc", "row_remap"), gpu=None, length=45):
    """One GPU (MIG-partitioned or the node's NVSwitch fabric) fails under pods of two deployments."""
    p0, d0, i0 = hits[0]
    g = d0.gpus[i0][0] if gpu is None else gpu
    root = f.fire("GPUXidError", c.dcgm(node, g, xid=xid), t, t + length, cluster=c)
    m = []
    for sig in extra_hw:
        m += live(f.fire(RULES[PLATFORM_SIGNALS[sig]], c.dcgm(node, g), t + 0.5, t + length, cluster=c))
    for (p, dep, i) in hits:
        m += live(p.fire(f, "restart", dep, i, t + 0.5, t + 12),
                  p.fire(f, "crashloop", dep, i, t + 4, t + length),
                  p.fire(f, "replicas", dep, 0, t + 1, t + length + 3),
                  p.fire(f, "gw_5xx", dep, 0, t + 0.5, t + 8),
                  p.fire(f, "ttft", dep, 0, t + 2, t + length))
    f.incident(iid, root, m + [root])
    return root, m


def tp_worker_gpu_failure(f, p: Pack, dep: Dep, worker: int, t, iid, length=40):
    """Tensor/pipeline-parallel group across nodes (LeaderWorkerSet): a worker's GPU hits an
    uncorrectable ECC error, the NCCL collective aborts and the *leader* is what crashes and restarts.
    The ECC rule (increase over 10m, for 5m) fires after the leader's restart alert."""
    ecc = p.fire(f, "ecc", dep, worker, t, t + length)
    m = live(p.fire(f, "restart", dep, 0, t + 0.3, t + 12),
             p.fire(f, "restart", dep, worker, t + 0.5, t + 12),
             f.fire("KubeStatefulSetReplicasMismatch", dep.ksm_workload(), t + 0.5, t + length + 2, cluster=dep.c),
             p.fire(f, "gw_5xx", dep, 0, t + 0.4, t + length - 5),
             p.fire(f, "epp_ready", dep, 0, t + 0.4, t + length))
    f.incident(iid, ecc, m + [ecc])
    return ecc, m


def config_reload_stale_endpoints(f, p: Pack, dep: Dep, router_pod, t, iid, length=40):
    """The router's config-reloader fails (bad ConfigMap); after the engines were rescheduled the router
    keeps stale endpoints: connect failures and 5xx.  The reloader rule's for: 10m fires after the 5xx."""
    rel = f.fire("ConfigReloaderSidecarErrors",
                 {"namespace": dep.ns, "pod": router_pod, "container": "config-reloader", "job": f"{dep.ns}/vllm-router",
                  "endpoint": "reloader-web", "instance": ip(dep.c.name, router_pod) + ":8080", "service": "vllm-router"},
                 t, t + length, cluster=dep.c)
    m = live(p.fire(f, "router_errors", dep, 1, t + 1, t + length - 2),
             p.fire(f, "gw_connect", dep, 0, t + 1, t + length - 3),
             p.fire(f, "gw_5xx", dep, 0, t + 1.5, t + length - 3),
             p.fire(f, "router_healthy", dep, 0, t + 1, t + length - 1))
    f.incident(iid, rel, m + [rel])
    return rel, m


# ---- background noise ------------------------------------------------------------------------

NOISE_KINDS = ["throttle", "jobfail", "fs", "gpu_temp", "hpa", "quota", "clock", "waiting", "pv", "targetflap",
               "idle_gpu", "pagefaults", "sidecar_crash", "web_replicas", "xid13_research", "cpu_node_notready"]


def background_noise(f, c: Cluster, seed, kinds, nodes, t_end):
    """Unrelated warnings that come and go.  Every one is truth noise."""
    out = []
    x = stable_int(f.name, seed)
    kinds = list(kinds)
    # every fleet gets a few more unrelated warnings, picked deterministically from the catalogue
    extra = [k for k in NOISE_KINDS if k not in kinds]
    while len(kinds) < 7 and extra:
        kinds.append(extra.pop(stable_int(f.name, seed, len(kinds)) % len(extra)))
    for n, kind in enumerate(kinds):
        x = stable_int(x, n)
        t0 = 5 + x % max(1, int(t_end - 100))
        node = nodes[x % len(nodes)]
        if kind == "throttle":
            pod = "otel-collector-" + pod_suffix(f.name, seed, n)
            for k in range(2):
                out.append(f.fire("CPUThrottlingHigh", {"namespace": "observability", "pod": pod, "container": "otel-collector",
                                                        "instance": ip(c.name, node, "kubelet") + ":10250",
                                                        "service": "kubelet"}, t0 + 45 * k, t0 + 45 * k + 25, cluster=c))
        elif kind == "jobfail":
            out.append(f.fire("KubeJobFailed", c.ksm(namespace="ml-eval", job_name="nightly-eval-%d" % (x % 90 + 10)),
                              t0, t0 + 90, cluster=c))
        elif kind == "fs":
            out.append(f.fire("NodeFilesystemSpaceFillingUp", c.node_exporter(
                node, device="/dev/nvme0n1p1", fstype="ext4", mountpoint="/var/lib/containerd"),
                t0, t0 + 80, cluster=c))
        elif kind == "gpu_temp":
            out.append(f.fire("GPUHighTemperature", c.dcgm(node, x % 8), t0, t0 + 12, cluster=c))
        elif kind == "hpa":
            out.append(f.fire("KubeHpaMaxedOut", c.ksm(namespace="web", horizontalpodautoscaler="chat-frontend"),
                              t0, t0 + 40, cluster=c))
        elif kind == "quota":
            out.append(f.fire("KubeQuotaAlmostFull", c.ksm(namespace="research", resource="requests.nvidia.com/gpu",
                                                           resourcequota="gpu-quota"), t0, t0 + 60, cluster=c))
        elif kind == "clock":
            out.append(f.fire("NodeClockNotSynchronising", c.node_exporter(node), t0, t0 + 25, cluster=c))
        elif kind == "waiting":
            pod = f"dataset-sync-{pod_suffix(f.name, seed, n)}"
            out.append(f.fire("KubeContainerWaiting", {"namespace": "ml-data", "pod": pod, "container": "rclone"},
                              max(0, t0 - 60), max(0, t0 - 60) + 95, cluster=c))
        elif kind == "pv":
            out.append(f.fire("KubePersistentVolumeFillingUp", c.kubelet(
                node, namespace="monitoring", persistentvolumeclaim="loki-data-loki-0"), t0, t0 + 20, cluster=c))
        elif kind == "targetflap":
            for k in range(2):
                out.append(f.fire("TargetDown", {"job": "blackbox-exporter", "namespace": "monitoring",
                                                 "service": "blackbox-exporter"}, t0 + 50 * k, t0 + 50 * k + 14, cluster=c))
        elif kind == "idle_gpu":
            out.append(f.fire("GPUUtilizationLow", c.dcgm(node, x % 8), t0, t0 + 40, cluster=c))
        elif kind == "pagefaults":
            out.append(f.fire("NodeMemoryMajorPagesFaults", c.node_exporter(node), t0, t0 + 20, cluster=c))
        elif kind == "sidecar_crash":
            pod = "fluent-bit-" + pod_suffix(f.name, seed, n)
            uid = hashlib.md5(pod.encode()).hexdigest()
            out.append(f.fire("KubePodCrashLooping", c.ksm(namespace="logging", pod=pod, container="fluent-bit",
                                                           uid=f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:]}",
                                                           reason="CrashLoopBackOff"), t0, t0 + 35, cluster=c))
        elif kind == "web_replicas":
            out.append(f.fire("KubeDeploymentReplicasMismatch", c.ksm(namespace="web", deployment="playground-ui"),
                              t0, t0 + 30, cluster=c))
        elif kind == "xid13_research":
            # an application-level Xid on a research training job's GPU: no serving impact
            out.append(f.fire("GPUXidError", c.dcgm(node, 7, xid=13), t0, t0 + 15, cluster=c))
        elif kind == "cpu_node_notready":
            cpu = f"cpu-pool-{pod_suffix(f.name, seed, n, n=4)}"
            out.append(f.fire("KubeNodeNotReady", c.ksm(node=cpu, condition="Ready", status="true"), t0, t0 + 22, cluster=c))
    f.noise(*out)
    return out


# ----------------------------------------------------------------------------------------------
# Alertmanager set-ups used by the fleets
# ----------------------------------------------------------------------------------------------


def am_kube_prometheus(url, receiver="rootline", group_by=("alertname", "namespace"), version="0.27.0",
                       repeat=4 * 3600, interval=300, wait=30, critical_fast=False):
    routes = []
    if critical_fast:
        routes.append(Route(receiver, list(group_by), match={"severity": {"critical"}}, group_wait=10,
                            group_interval=60, repeat_interval=repeat))
    routes.append(Route(receiver, list(group_by), match={"severity": {"warning", "critical", "info"}},
                        group_wait=wait, group_interval=interval, repeat_interval=repeat))
    return Alertmanager(url, routes, version=version, default_receiver=receiver)


def nodes(prefix, n, start=1):
    return ["%s-%02d" % (prefix, k) for k in range(start, start + n)]


# ----------------------------------------------------------------------------------------------
# Fleets
# ----------------------------------------------------------------------------------------------

FLEETS = []


def fleet(fn):
    FLEETS.append(fn)
    return fn


@fleet
def vllm_kvfrag_oom_cascade_team_rules():
    """KV fragmentation cascade on a vLLM chat deployment, team rules with layer/failure_mode labels;
    a second, unrelated hot-instance incident in another namespace later."""
    c = Cluster("gke-use1-inference-a")
    ns = nodes("gke-use1-inference-a-h100-pool", 6)
    f = Fleet("vllm-kvfrag-oom-cascade-team-rules", "2026-03-04T00:40:00", 4,
              "A sidecar-exported fragmentation ratio on `chat-llama3-70b` pod 2 crosses 25% at 00:50; long "
              "prompts start failing, the KV pool and framebuffer fill, the engine dies of CUDA OOM twice "
              "(reason Error) and crash-loops while the other three replicas queue, TTFT and gateway 5xx rise. "
              "The fragmentation rule's for: 15m makes the root fire after the first restart. At 02:30 an "
              "unrelated hot replica (router prefix hashing) on `summarize-qwen` in namespace `docs-llm`.",
              [c], {"*": am_kube_prometheus("http://alertmanager-main.monitoring.svc:9093")})
    team = Pack("vllm", team="chat-serving", prefix="Llm",
                team_signals={"frag", "kv_high", "abort", "fb_low", "restart", "queue", "ttft", "gw_5xx"},
                overrides={"queue": "VLLMRequestsWaitingHigh", "ttft": "VLLMTTFTHigh"})
    chat = Dep(c, "chat", "chat-llama3-70b", "vllm", "llama-3.1-70b-instruct", ns[:4], gpus=[[0], [0], [0], [0]])
    kv_fragmentation_cascade(f, team, chat, 2, 10, "chat-kvfrag-oom")
    docs = Dep(c, "docs-llm", "summarize-qwen", "vllm", "qwen2.5-32b-instruct", ns[2:6], gpus=[[4], [4], [4], [4]])
    hot_instance(f, Pack("vllm", team="docs", prefix="Docs", team_signals={"router_skew", "kv_high", "queue"},
                         overrides={"queue": "VLLMRequestsWaitingHigh", "ttft": "VLLMTTFTHigh"}),
                 docs, 1, 110, "docs-hot-replica")
    background_noise(f, c, "bg", ["throttle", "jobfail", "fs", "gpu_temp", "waiting"], ns, 240)
    return f


@fleet
def sglang_host_oom_hicache_cascade():
    """SGLang with hierarchical (host-RAM) KV cache: the container's memory limit is hit and the kernel OOM
    killer (OOMKilled, not a CUDA OOM) restarts the pod; generic packs only (severity labels)."""
    c = Cluster("eks-euw1-llm-prod", ext={"cluster": "eks-euw1-llm-prod", "prometheus": "kube-prometheus-stack/kps-prometheus"},
                dcgm_host_label="Hostname")
    ns = ["ip-10-40-%d-%d.eu-west-1.compute.internal" % (k, 10 + k * 7) for k in range(1, 6)]
    f = Fleet("sglang-host-oom-hicache-cascade", "2026-04-11T13:05:00", 3.5,
              "SGLang `deepseek-v2-lite` with HiCache host memory: a burst of long documents at 13:20 fills the "
              "token pool and the host-RAM tier; the container hits its memory limit and is OOMKilled (kernel), "
              "twice; survivors queue and TTFT rises. Later (14:50) an independent retraction storm on the "
              "`coder` model's pod 0 (ITL jitter). Background: PV filling on Loki, HPA at max, clock drift.",
              [c], {"*": am_kube_prometheus("https://alertmanager.llm-prod.euw1.example.net", receiver="rootline-prod",
                                            group_by=("alertname", "namespace", "cluster"), version="0.28.1")})
    gen = Pack("sglang")
    ds = Dep(c, "llm", "deepseek-v2-lite", "sglang", "deepseek-ai/DeepSeek-V2-Lite-Chat", ns[:3], gpus=[[0], [1], [0]])
    kv_fragmentation_cascade(f, gen, ds, 0, 15, "deepseek-host-oom", frag=None, host_oom=True)
    f.dup_every = 11
    f.notes.append("Every 11th notification is delivered twice (a lost 2xx, retried by Alertmanager).")
    coder = Dep(c, "llm", "coder", "sglang", "Qwen/Qwen2.5-Coder-32B-Instruct", ns[2:5], gpus=[[2], [3], [1]])
    preemption_storm(f, gen, coder, 0, 105, "coder-retractions", gateway=False)
    background_noise(f, c, "bg", ["pv", "hpa", "clock", "throttle"], ns, 210)
    return f


@fleet
def trtllm_kv_exhaustion_no_frag_metric():
    """TensorRT-LLM (trtllm-serve): KV exhaustion leads to CUDA OOM restarts; no fragmentation series, so the
    first engine alert is the root; a harmless rollout of another model earlier is noise."""
    c = Cluster("aks-inference-westus3", ext={"cluster": "aks-inference-westus3"}, gpu_model="NVIDIA H100 NVL")
    ns = ["aks-gpuh100-%d-vmss00000%d" % (31825644, k) for k in range(0, 5)]
    f = Fleet("trtllm-kv-exhaustion-no-frag-metric", "2026-05-20T07:00:00", 3,
              "`mistral-large` on trtllm-serve: at 07:40 KV utilisation on pod 1 passes 85%, framebuffer headroom "
              "drops under 1 GiB, the engine exits (CUDA OOM, reason Error) and restarts twice; the other replicas "
              "queue; gateway 5xx. At 07:10 a rollout of `llama-8b-router-model` (change event + rollout-in-progress "
              "info alert) completes without trouble: noise. 08:55 the EPP pins a shared prefix on that small model's "
              "pod 0 (queue imbalance, KV, queue time): a second incident.",
              [c], {"*": am_kube_prometheus("http://kps-alertmanager.monitoring:9093", version="0.27.0")})
    p = Pack("trtllm")
    ml = Dep(c, "genai", "mistral-large", "trtllm", "mistral-large-2411", ns[:3], gpus=[[0, 1], [0, 1], [0, 1]])
    kv_fragmentation_cascade(f, p, ml, 1, 40, "mistral-kv-oom", frag=None)
    small = Dep(c, "genai", "llama-8b-router-model", "trtllm", "llama-3.1-8b-instruct", ns[3:5], gpus=[[2], [2]])
    ch = f.change(10, "Deploy genai/llama-8b-router-model: image trtllm 1.0.0 -> 1.1.0", "flux",
                  {"cluster": c.name, "namespace": "genai", "deployment": small.name, "image": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0"})
    ro = f.fire("DeploymentRolloutInProgress", small.ksm_workload(), 10.5, 24, cluster=c)
    f.noise(ch, ro)
    hot_instance(f, p, small, 0, 115, "llama8b-epp-hot", via="epp", length=50)
    background_noise(f, c, "bg", ["jobfail", "quota", "idle_gpu"], ns, 180)
    return f


@fleet
def triton_trtllm_paused_requests_cascade():
    """Triton + TRT-LLM backend (labels model/version): KV blocks exhausted, the in-flight batcher pauses
    requests, Triton rejects/cancels, queue time rises; the pod does not crash."""
    c = Cluster("onprem-dc2-gpu", ext={"k8s_cluster": "onprem-dc2-gpu", "prometheus": "monitoring/prom-gpu"},
                gpu_model="NVIDIA A100-SXM4-80GB", driver="535.183.01")
    ns = ["dc2-gpu-a100-%03d" % k for k in (11, 12, 13, 14)]
    f = Fleet("triton-trtllm-paused-requests-cascade", "2026-06-02T19:15:00", 3,
              "Triton serving `ensemble` of llama-70b via the TRT-LLM backend: at 19:40 long-context batch traffic "
              "fills the KV blocks on triton pod 0; paused requests, REJECTED failures, queue time and envoy "
              "latency follow. 21:05 a deploy of `triton-embed` whose model repository lacks a config: the new "
              "pod crash-loops, the rollout stalls (second incident, root the deploy). Noise: filesystem, idle GPU, "
              "throttling, a flapping blackbox target.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring.svc.cluster.local:9093",
                                            group_by=("alertname", "k8s_cluster", "namespace"))})
    p = Pack("triton", overrides={"itl": "TritonTRTLLMPausedRequests"})
    tr = Dep(c, "triton", "triton-llama70b", "triton", "ensemble", ns[:3], gpus=[[0, 1, 2, 3]] * 3)
    kv = p.fire(f, "kv_high", tr, 0, 25, 75)
    m = live(kv, p.fire(f, "preempt", tr, 0, 27, 72),
             p.fire(f, "failures", tr, 0, 30, 70, extra={"reason": "REJECTED"}),
             p.fire(f, "queue_time", tr, 0, 29, 73),
             p.fire(f, "gw_latency", tr, 0, 31, 70))
    f.incident("triton-kv-paused", kv, m)
    wh = Dep(c, "triton", "triton-embed", "triton", "e5_large_onnx", [ns[3], ns[1]], gpus=[[4], [4]])
    bad_rollout(f, p, wh, 110, "triton-embed-bad-rollout", announce="change", what="model repository v14 (missing config.pbtxt)")
    background_noise(f, c, "bg", ["fs", "idle_gpu", "throttle", "targetflap"], ns, 180)
    return f


@fleet
def vllm_llmd_preemption_after_config_change():
    """llm-d rule pack (labels reduced to pod / model_name by its aggregations): a config change raising
    max-num-seqs causes a preemption storm; later a second storm with no change."""
    c = Cluster("llmd-prod-1", ext={"cluster": "llmd-prod-1"})
    ns = nodes("gpu-b200", 4)
    f = Fleet("vllm-llmd-preemption-after-config-change", "2026-07-14T09:00:00", 4,
              "09:20 a ConfigMap change raises `--max-num-seqs` 128 -> 512 on `llama-4-scout` (PagerDuty change "
              "event); from 09:25 the KV pool of decode pod 1 saturates, vLLM preempts, ITL jitter and TPOT rise, "
              "TTFT p99 > 10 s. Root: the change. 11:40 a second, independent burst of long prompts on pod 3 "
              "(traffic, no change): root the KV-cache saturation alert.",
              [c], {"*": am_kube_prometheus("http://alertmanager-operated.llm-d-monitoring:9093",
                                            group_by=("alertname",), version="0.32.0", repeat=3600)})
    p = Pack("vllm", llmd=True)
    d = Dep(c, "llm-d", "llama-4-scout-decode", "vllm", "meta-llama/Llama-4-Scout-17B-16E-Instruct", ns, gpus=[[0, 1]] * 4)
    ch = f.change(20, "Config change llm-d/llama-4-scout-decode: --max-num-seqs 128 -> 512", "helm",
                  {"cluster": c.name, "namespace": "llm-d", "deployment": d.name, "values": "decode.maxNumSeqs: 512"})
    preemption_storm(f, p, d, 1, 25, "scout-preemption-config", cause=ch, length=60)
    preemption_storm(f, p, d, 3, 160, "scout-preemption-traffic", length=45)
    background_noise(f, c, "bg", ["gpu_temp", "jobfail", "pagefaults"], ns, 240)
    return f


@fleet
def sglang_retractions_two_clusters():
    """Two clusters, one Alertmanager each: an SGLang retraction storm in each, at overlapping times,
    unrelated to each other (regional traffic)."""
    a = Cluster("gke-asia-se1-a", gpu_model="NVIDIA L40S")
    b = Cluster("gke-europe-w4-b", gpu_model="NVIDIA L40S")
    f = Fleet("sglang-retractions-two-clusters", "2026-08-03T02:00:00", 3,
              "Same `qwen3-30b-a3b` SGLang deployment in two regions. 02:30 asia pod 2 retracts requests (token "
              "pool full, ITL p99 > 80 ms, TTFT > 2 s); 02:45 europe pod 0 does the same, driven by its own "
              "traffic. Two incidents, one per cluster. The asia Alertmanager groups everything into one group "
              "(group_by: []); the europe one uses group_by: ['...'] (one group per alert). Background noise in both.",
              [a, b], {"gke-asia-se1-a": Alertmanager("http://am.asia.example.internal",
                                                      [Route("rootline", [], group_interval=300)]),
                       "gke-europe-w4-b": Alertmanager("http://am.europe.example.internal",
                                                       [Route("rootline", ["..."], group_wait=15, group_interval=120)],
                                                       version="0.33.1")})
    p = Pack("sglang")
    da = Dep(a, "serving", "qwen3-30b-a3b", "sglang", "Qwen/Qwen3-30B-A3B", nodes("asia-l40s", 3), gpus=[[0]] * 3)
    db = Dep(b, "serving", "qwen3-30b-a3b", "sglang", "Qwen/Qwen3-30B-A3B", nodes("eu-l40s", 3), gpus=[[0]] * 3)
    preemption_storm(f, p, da, 2, 30, "asia-retractions", gateway=True)
    preemption_storm(f, p, db, 0, 45, "europe-retractions", gateway=True)
    background_noise(f, a, "a", ["throttle", "hpa"], nodes("asia-l40s", 3), 180)
    background_noise(f, b, "b", ["clock", "jobfail"], nodes("eu-l40s", 3), 180)
    return f


@fleet
def vllm_ghost_requests_after_timeout_change():
    """F3 ghost requests caused by a gateway timeout edit (Envoy Gateway BackendTrafficPolicy)."""
    c = Cluster("prod-use2", ext={"cluster": "prod-use2", "prometheus": "monitoring/k8s", "env": "prod"})
    ns = nodes("g6e-use2", 4)
    f = Fleet("vllm-ghost-requests-after-timeout-change", "2026-02-17T15:30:00", 3,
              "15:50 a BackendTrafficPolicy edit lowers the request timeout for `rag-answerer` from 120 s to 30 s. "
              "Clients and Envoy now give up at 30 s while vLLM keeps generating to 60 s: remote disconnects with "
              "requests in flight, aborts, upstream timeouts, two pods holding running requests with no "
              "completions, queues. Root: the change. 17:20 `rag-reranker` (same namespace) has an unrelated "
              "preemption storm. Noise: throttling, a failed eval job and more.",
              [c], {"*": am_kube_prometheus("http://alertmanager-main.monitoring:9093", critical_fast=True)})
    p = Pack("vllm")
    d = Dep(c, "rag", "rag-answerer", "vllm", "llama-3.3-70b-instruct", ns, gpus=[[0, 1]] * 4)
    ch = f.change(20, "BackendTrafficPolicy rag/rag-answerer: timeout.http.requestTimeout 120s -> 30s", "kubectl-audit",
                  {"cluster": c.name, "namespace": "rag", "deployment": d.name, "object": "BackendTrafficPolicy/rag-answerer",
                   "field": "spec.timeout.http.requestTimeout", "old": "120s", "new": "30s"})
    ghost_requests(f, p, d, [0, 2], 22, "rag-ghost-requests", cause=ch)
    rr = Dep(c, "rag", "rag-reranker", "vllm", "qwen3-reranker-8b", ns[1:3], gpus=[[2], [2]])
    preemption_storm(f, p, rr, 1, 110, "reranker-preemption", gateway=False)
    background_noise(f, c, "bg", ["throttle", "jobfail", "pv"], ns, 180)
    return f


@fleet
def vllm_ghost_requests_team_labels():
    """Ghost requests with no change to blame, team rules with failure_mode=timeout; a second incident
    (preemption) on another model of the same cluster."""
    c = Cluster("k8s-fra-inf-02", ext={"cluster": "k8s-fra-inf-02"})
    ns = nodes("fra-h200", 5)
    f = Fleet("vllm-ghost-requests-team-labels", "2026-09-09T20:00:00", 3.5,
              "A batch client starts at 20:25 with a 30 s read timeout and retries; each retry leaves a "
              "disconnected generation running on `assistant-gemma` pods 1 and 3 (ghost requests). Root: the "
              "engine's running-without-completions alert on pod 1. 21:40 `translate-llama` pod 0 preemption "
              "storm (independent).",
              [c], {"*": am_kube_prometheus("https://alertmanager.fra.inf.example.com", receiver="sre.llm",
                                            group_by=("alertname", "namespace", "layer"))})
    p = Pack("vllm", team="assistant", prefix="Assistant",
             team_signals={"gw_disconnect", "abort", "stuck", "gw_timeout", "queue", "kv_high", "preempt", "itl", "tpot", "ttft"},
             overrides={"queue": "VLLMRequestsWaitingHigh", "ttft": "VLLMTTFTHigh"})
    d = Dep(c, "assistant", "assistant-gemma", "vllm", "google/gemma-3-27b-it", ns[:4], gpus=[[0]] * 4)
    ghost_requests(f, p, d, [1, 3], 25, "gemma-ghost")
    d2 = Dep(c, "assistant", "translate-llama", "vllm", "llama-3.1-8b-instruct", ns[2:5], gpus=[[3]] * 3)
    preemption_storm(f, p, d2, 0, 100, "translate-preemption", gateway=False)
    background_noise(f, c, "bg", ["gpu_temp", "fs", "quota"], ns, 210)
    return f


@fleet
def vllm_hot_prefix_production_stack_router():
    """F5 with the vLLM production-stack router: one replica gets 3x the QPS (session affinity + shared
    system prompt); label `server` is a URL, not a pod."""
    c = Cluster("minikube-free", ext={})
    ns = nodes("worker-gpu", 4)
    f = Fleet("vllm-hot-prefix-production-stack-router", "2026-01-22T11:00:00", 3,
              "A new tenant's 6K-token system prompt lands on one engine through the router's session routing: from "
              "11:30 `vllm-llama3-8b` pod 2 takes 3.4x the mean QPS, its KV pool and queue fill, it preempts and "
              "TTFT of the model rises; the other replicas idle. 12:40 a rollout of `vllm-embed` stalls (crash loop; "
              "root the rollout alert, no change events here). No cluster label (single-cluster Prometheus, no "
              "external labels). Noise: blackbox target flapping, job failures.",
              [c], {"*": Alertmanager("http://localhost:9093", [Route("rootline", ["alertname"], group_interval=300)])})
    p = Pack("vllm")
    d = Dep(c, "default", "vllm-llama3-8b", "vllm", "llama3-8b", ns, gpus=[[0]] * 4)
    hot_instance(f, p, d, 2, 30, "llama8b-hot-prefix", via="router", length=70)
    d2 = Dep(c, "default", "vllm-embed", "vllm", "nomic-embed-text", ns[:2], gpus=[[1]] * 2)
    bad_rollout(f, p, d2, 100, "embed-rollout-stuck", announce="rollout", what="--task embed on a generate-only image")
    background_noise(f, c, "bg", ["targetflap", "jobfail", "throttle"], ns, 180)
    return f


@fleet
def vllm_hot_instance_after_epp_config():
    """llm-d EPP (gateway-api-inference-extension): a scorer config change makes prefix affinity dominate;
    one endpoint runs hot; EPP std-dev alert and per-pod engine alerts."""
    c = Cluster("ocp-inference-east", ext={"cluster": "ocp-inference-east", "prometheus": "openshift-user-workload-monitoring/user-workload"})
    ns = nodes("ocp-gpu-h100", 6)
    f = Fleet("vllm-hot-instance-after-epp-config", "2026-10-05T08:00:00", 3,
              "08:25 the EPP's EndpointPickerConfig changes (prefix-cache-scorer weight 1 -> 10, queue scorer "
              "removed). A widely shared system prompt now pins most traffic on `granite-34b` pod 4: EPP "
              "queue-imbalance, the pod's KV pool, queue and preemptions, TTFT. Root: the config change. 09:52 "
              "`granite-8b` pod 2 preempts with free blocks (fragmentation heuristic), dies of CUDA OOM and the "
              "others queue: a second incident. "
              "Noise: a quota warning and an idle GPU.",
              [c], {"*": am_kube_prometheus("https://alertmanager-user-workload.openshift-user-workload-monitoring.svc:9095",
                                            group_by=("alertname", "namespace"), version="0.33.0")})
    p = Pack("vllm", llmd=True)
    d = Dep(c, "granite", "granite-34b", "vllm", "ibm-granite/granite-34b-code-instruct", ns, gpus=[[0]] * 6)
    ch = f.change(25, "EndpointPickerConfig granite/granite-34b-epp: prefix-cache-scorer weight 1 -> 10", "argocd",
                  {"cluster": c.name, "namespace": "granite", "deployment": "granite-34b-epp",
                   "configmap": "granite-34b-epp-config", "diff": "prefix-cache-scorer.weight: 10; queue-scorer removed"})
    hot_instance(f, p, d, 4, 28, "granite-hot-after-epp-config", via="epp", cause=ch, length=80)
    g8 = Dep(c, "granite", "granite-8b", "vllm", "ibm-granite/granite-3.3-8b-instruct", ns[:3], gpus=[[5]] * 3)
    kv_fragmentation_cascade(f, p, g8, 2, 112, "granite8b-kvfrag", frag="heuristic", crashes=1)
    background_noise(f, c, "bg", ["quota", "idle_gpu", "clock"], ns, 180)
    return f


@fleet
def vllm_nan_after_fp8_kv_deploy():
    """F6 after a deploy: fp8 KV cache on a model that overflows; NaN logits counted by vLLM, repetition
    finishes and spec-decode acceptance collapse.  Team rules with failure_mode=numeric."""
    c = Cluster("prod-sea-1", ext={"cluster": "prod-sea-1", "prometheus": "monitoring/k8s"})
    ns = nodes("sea1-h100", 4)
    f = Fleet("vllm-nan-after-fp8-kv-deploy", "2026-11-03T17:00:00", 3,
              "17:30 `support-bot` is redeployed with `--kv-cache-dtype fp8` (change event). From 17:39 every "
              "replica counts corrupted (NaN) requests, repetition-terminated generations rise and the draft "
              "model's acceptance collapses. Root: the deploy. 18:40 node sea1-h100-04 goes NotReady and takes "
              "`support-embed`'s pod with it (second incident, root KubeNodeNotReady).",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace", "model_name"))})
    p = Pack("vllm", team="support", prefix="Support", team_signals={"nan", "repetition", "spec_low"})
    d = Dep(c, "support", "support-bot", "vllm", "support-bot-llama-70b-v7", ns[:3], gpus=[[0, 1]] * 3)
    numeric_after_deploy(f, p, d, 30, "support-nan-fp8", change_details={"what": "--kv-cache-dtype fp8", "image": "vllm/vllm-openai:v0.11.2"})
    emb = Dep(c, "support", "support-embed", "vllm", "bge-large-en-v1.5", [ns[3], ns[0]], gpus=[[4], [4]])
    node_lost(f, c, ns[3], 100, "sea1-h100-04-notready", [(Pack("vllm"), emb, 0)], p)
    background_noise(f, c, "bg", ["throttle", "fs", "waiting", "hpa"], ns, 180)
    return f


@fleet
def vllm_canary_nan_one_cluster_of_two():
    """A canary deploy in one cluster produces NaN logits; the baseline cluster is quiet apart from noise.
    The canary pod is the only one affected."""
    a = Cluster("us-central-blue", ext={"cluster": "us-central-blue", "prometheus": "mon/p"})
    b = Cluster("us-central-green", ext={"cluster": "us-central-green", "prometheus": "mon/p"})
    f = Fleet("vllm-canary-nan-one-cluster-of-two", "2026-12-12T10:00:00", 2.5,
              "10:15 a canary of `mixtral-8x22b` (new AWQ quantisation) is deployed in `us-central-green` only. "
              "The canary pod emits NaN logits from 10:24 (corrupted requests, repetition spike). The blue cluster "
              "and the green baseline replicas are fine. 11:10 the blue cluster's mixtral pod 3 has a preemption "
              "storm of its own (second incident). Both clusters feed one central Alertmanager.",
              [a, b], {"*": am_kube_prometheus("https://am.central.example.org", group_by=("alertname", "cluster", "namespace"),
                                               version="0.34.0")})
    p = Pack("vllm")
    canary = Dep(b, "mixtral", "mixtral-8x22b-canary", "vllm", "mixtral-8x22b-instruct", nodes("green-h100", 1, 5), gpus=[[0, 1, 2, 3]])
    numeric_after_deploy(f, p, canary, 15, "mixtral-canary-nan",
                         change_details={"what": "canary AWQ int4 weights", "canary": "true", "traffic": "5%"}, spec=False)
    blue = Dep(a, "mixtral", "mixtral-8x22b", "vllm", "mixtral-8x22b-instruct", nodes("blue-h100", 4), gpus=[[0, 1, 2, 3]] * 4)
    preemption_storm(f, p, blue, 3, 70, "blue-mixtral-preemption", length=40)
    background_noise(f, a, "a", ["throttle", "jobfail", "gpu_temp"], nodes("blue-h100", 4), 150)
    background_noise(f, b, "b", ["fs", "clock"], nodes("green-h100", 4), 150)
    return f


@fleet
def vllm_threshold_edit_then_late_frag_warning():
    """A threshold edit (fragmentation 0.25 -> 0.40, merged without review) and, two hours later, the
    cascade it let through: the fragmentation warning fires only after the OOMs."""
    c = Cluster("fin-prod-sh", ext={"cluster": "fin-prod-sh"})
    ns = nodes("sh-a800", 4)
    f = Fleet("vllm-threshold-edit-then-late-frag-warning", "2026-03-15T00:00:00", 4,
              "00:10 a rules-repo commit raises the team's fragmentation threshold from 0.25 to 0.40 (change "
              "event). 01:30 KV usage on `risk-qa` pod 0 passes 85%, framebuffer headroom vanishes, CUDA OOM "
              "restarts, survivors queue; the fragmentation alert (now at 0.40) fires only at ~01:56, after the "
              "restarts. Root: the fragmentation alert (the direct cause); the threshold edit belongs to the "
              "incident as the process gap. 02:50 an unrelated hot replica on `risk-embed`.",
              [c], {"*": am_kube_prometheus("http://alertmanager:9093", group_by=("alertname", "namespace", "pod"))})
    frag40 = RULES["VLLMKVFragmentationHigh"].variant(
        name="RiskKVFragmentation", expr="max by (namespace, pod) (llmops:kv_cache_fragmentation:ratio) > 0.40",
        labels={"severity": "warning", "layer": "engine", "failure_mode": "kv_fragmentation", "team": "risk"},
        adapted="team copy; threshold raised 0.25 -> 0.40 by the change in this fleet", group="team-vllm.rules")
    p = Pack("vllm", team="risk", prefix="Risk", team_signals={"kv_high", "fb_low", "restart", "queue", "ttft", "abort"},
             overrides={"frag": frag40, "queue": "VLLMRequestsWaitingHigh", "ttft": "VLLMTTFTHigh"})
    d = Dep(c, "risk", "risk-qa", "vllm", "qwen2.5-72b-instruct", ns, gpus=[[0, 1]] * 4)
    ch = f.change(10, "rules: raise RiskKVFragmentation threshold 0.25 -> 0.40", "gitlab-ci",
                  {"cluster": c.name, "namespace": "risk", "deployment": "", "repo": "risk/alert-rules",
                   "file": "rules/vllm.yaml", "diff": "- > 0.25\n+ > 0.40", "reviewed": "false"})
    # fragmentation passes 0.25 at 01:20, 0.40 only at 01:41; for: 15m -> fires 01:56
    root = f.fire(frag40, d.engine_pod(0), 101, 150, cluster=c)
    kv_fragmentation_cascade(f, p, d, 0, 80, "risk-late-frag", frag=None, extra_members=[ch], root_override=root)
    re = Dep(c, "risk", "risk-embed", "vllm", "bge-m3", ns[:3], gpus=[[7]] * 3)
    hot_instance(f, Pack("vllm"), re, 1, 170, "risk-embed-hot", via="router", length=50)
    background_noise(f, c, "bg", ["jobfail", "throttle", "idle_gpu"], ns, 240)
    return f


@fleet
def triton_threshold_edit_kv_blocks():
    """Triton: the team raised its KV-blocks threshold from 0.85 to 0.97; the paused-requests warning is the
    first thing to fire, the KV alert follows.  Root: the KV exhaustion on the pod."""
    c = Cluster("triton-prod-tokyo", ext={"cluster": "triton-prod-tokyo", "prometheus": "prom/main"})
    ns = nodes("tyo-h100", 3)
    f = Fleet("triton-threshold-edit-kv-blocks", "2026-05-08T03:00:00", 3,
              "03:05 the team's rules change: TritonKVBlocks threshold 0.85 -> 0.97 (change event). 04:00 KV "
              "blocks on triton pod 2 climb past 0.9: the in-flight batcher pauses requests (first alert), "
              "REJECTED failures, queue time; the KV alert fires last, at 0.97. Root: the KV alert; the edit is "
              "in the incident. 05:05 tyo-h100-01 goes NotReady (second incident).",
              [c], {"*": am_kube_prometheus("http://alertmanager.prom:9093", group_by=("alertname",), version="0.31.1",
                                            repeat=3600)})
    kv97 = RULES["TritonTRTLLMKVBlocksHigh"].variant(
        name="TritonKVBlocksHigh", expr='max by (namespace, pod, model) (nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}) > 0.97',
        labels={"severity": "warning", "layer": "engine", "failure_mode": "oom"},
        adapted="team copy with layer/failure_mode; threshold 0.97 after this fleet's edit", group="team-triton.rules")
    p = Pack("triton")
    d = Dep(c, "triton", "triton-trtllm", "triton", "tensorrt_llm_bls", ns, gpus=[[0, 1, 2, 3, 4, 5, 6, 7]] * 3)
    ch = f.change(5, "rules: TritonKVBlocksHigh threshold 0.85 -> 0.97", "gitops-bot",
                  {"cluster": c.name, "namespace": "triton", "deployment": "", "rule": "TritonKVBlocksHigh", "old": "0.85", "new": "0.97"})
    paused = p.fire(f, "preempt", d, 2, 60, 110)
    kv = f.fire(kv97, d.engine_pod(2), 72, 105, cluster=c)
    m = live(paused, ch, p.fire(f, "failures", d, 2, 63, 108, extra={"reason": "REJECTED"}),
             p.fire(f, "queue_time", d, 0, 62, 108), p.fire(f, "gw_latency", d, 0, 66, 104))
    f.incident("triton-kv-blocks-late", kv, m)
    node_lost(f, c, ns[0], 125, "tyo-h100-01-notready", [(p, d, 0)], p, length=45)
    background_noise(f, c, "bg", ["throttle", "gpu_temp", "pv"], ns, 180)
    return f


@fleet
def shared_mig_gpu_two_deployments():
    """One H100 split by MIG between two small-model deployments; an uncontained ECC error (Xid 95) kills
    both pods.  The Xid/ECC alerts carry only GPU and host labels."""
    c = Cluster("edge-mig-ams", ext={"cluster": "edge-mig-ams"}, dcgm_honor=False)
    ns = ["ams-gpu-%02d" % k for k in range(1, 5)]
    f = Fleet("shared-mig-gpu-two-deployments", "2026-04-27T12:00:00", 3,
              "GPU 3 of ams-gpu-02 is MIG-partitioned (3g.40gb x 2): one slice serves `embed-bge` (vLLM pooling "
              "runner), the other `classifier-phi` (vLLM). 12:40 Xid 95 (uncontained ECC) plus DBE and a "
              "row-remap failure: both pods restart and crash-loop, both Deployments lose a replica, both routes "
              "return 5xx. One incident, root the Xid alert. 13:55 `classifier-phi`'s other pod (ams-gpu-03) has an "
              "unrelated preemption storm. Noise elsewhere.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    p = Pack("vllm")
    emb = Dep(c, "embeddings", "embed-bge", "vllm", "BAAI/bge-m3", ["ams-gpu-01", "ams-gpu-02"], gpus=[[1], [3]])
    cls = Dep(c, "moderation", "classifier-phi", "vllm", "microsoft/Phi-3.5-mini-instruct", ["ams-gpu-02", "ams-gpu-03"], gpus=[[3], [2]])
    shared_gpu_fault(f, "ams-gpu-02", c, 40, "mig-gpu-xid95", [(p, emb, 1), (p, cls, 0)], xid=95)
    preemption_storm(f, p, cls, 1, 115, "classifier-preemption", gateway=False, length=35)
    background_noise(f, c, "bg", ["throttle", "hpa", "fs", "gpu_temp"], ns, 180)
    return f


@fleet
def shared_node_nvlink_fault_triton_and_vllm():
    """An 8-GPU node hosts a Triton TP=4 pod (GPUs 0-3) and a vLLM TP=4 pod (GPUs 4-7); the NVSwitch fabric
    fails (Xid 74 on several GPUs): both engines stall then restart."""
    c = Cluster("dgx-cloud-ord", ext={"cluster": "dgx-cloud-ord", "region": "ord"}, gpu_model="NVIDIA H200",
                dcgm_host_label="hostname")
    ns = ["dgx-h200-%03d" % k for k in (101, 102, 103)]
    f = Fleet("shared-node-nvlink-fault-triton-and-vllm", "2026-06-21T22:00:00", 3,
              "22:35 dgx-h200-102's NVLink fabric errors: Xid 74 on GPU 0 and GPU 5, NVLink CRC alerts. The Triton "
              "pod (`triton-llama405b-fp8`, GPUs 0-3) stalls (iteration counter flat) and the vLLM pod "
              "(`vllm-deepseek-r1-distill`, GPUs 4-7) holds requests without completions; both restart. Root: the "
              "first Xid 74. This exporter build labels the host `hostname` (not `Hostname`). Noise: other nodes.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "cluster"))})
    pt = Pack("triton")
    pv = Pack("vllm")
    tr = Dep(c, "llm", "triton-llama405b-fp8", "triton", "llama405b", ["dgx-h200-101", "dgx-h200-102"], gpus=[[0, 1, 2, 3], [0, 1, 2, 3]])
    vl = Dep(c, "llm", "vllm-deepseek-r1-distill", "vllm", "deepseek-r1-distill-llama-70b", ["dgx-h200-102", "dgx-h200-103"],
             gpus=[[4, 5, 6, 7], [4, 5, 6, 7]])
    root = f.fire("GPUXidError", c.dcgm("dgx-h200-102", 0, xid=74), 35, 80, cluster=c)
    m = live(f.fire("GPUXidError", c.dcgm("dgx-h200-102", 5, xid=74), 35.6, 80, cluster=c),
             f.fire("GPUNVLinkErrors", c.dcgm("dgx-h200-102", 0), 35, 75, cluster=c),
             f.fire("GPUNVLinkErrors", c.dcgm("dgx-h200-102", 5), 35.5, 75, cluster=c),
             pt.fire(f, "stuck", tr, 1, 36, 50), pv.fire(f, "stuck", vl, 0, 36, 52),
             pt.fire(f, "restart", tr, 1, 50, 62), pv.fire(f, "restart", vl, 0, 52, 64),
             pt.fire(f, "failures", tr, 1, 37, 55, extra={"reason": "CANCELED"}),
             pv.fire(f, "gw_5xx", vl, 0, 52, 58), pt.fire(f, "gw_5xx", tr, 0, 50, 57),
             pv.fire(f, "ttft", vl, 0, 40, 70), pt.fire(f, "queue_time", tr, 0, 38, 68))
    f.incident("dgx102-nvlink", root, m)
    background_noise(f, c, "bg", ["clock", "idle_gpu", "jobfail"], ns, 180)
    return f


@fleet
def lws_multinode_worker_ecc_leader_crash():
    """Multi-node vLLM (LeaderWorkerSet, pipeline parallel over 2 nodes): the worker's GPU gets a DBE, the
    leader's engine dies on the NCCL error.  The ECC rule (for: 5m) fires after the leader's restart."""
    c = Cluster("lws-prod-iad", ext={"cluster": "lws-prod-iad"}, dcgm_honor=True)
    f = Fleet("lws-multinode-worker-ecc-leader-crash", "2026-07-30T05:00:00", 3,
              "`deepseek-v3` runs as a LeaderWorkerSet group: leader `deepseek-v3-0` on iad-h200-07, worker "
              "`deepseek-v3-0-1` on iad-h200-08 (TP=8 per node, PP=2). 05:40 a double-bit ECC error on the "
              "worker's GPU 6: the collective aborts, leader and worker restart, the group's StatefulSet is short, "
              "the pool loses its endpoint, gateway 5xx. The ECC alert (on the worker's node) fires ~5 min after "
              "the leader's restart alert; it is the root. 06:50 an independent preemption storm on the "
              "smaller `llama-70b` Deployment. dcgm-exporter honours pod labels here (pod, not exported_pod).",
              [c], {"*": am_kube_prometheus("http://alertmanager-main.monitoring:9093", group_by=("alertname", "namespace"),
                                            version="0.29.0")})
    p = Pack("vllm", llmd=False)
    d = Dep(c, "deepseek", "deepseek-v3", "vllm", "deepseek-ai/DeepSeek-V3", ["iad-h200-07", "iad-h200-08"],
            gpus=[[0, 1, 2, 3, 4, 5, 6, 7], [6, 0, 1, 2, 3, 4, 5, 7]], kind="LeaderWorkerSet")
    tp_worker_gpu_failure(f, p, d, 1, 40, "deepseek-worker-ecc")
    d2 = Dep(c, "deepseek", "llama-70b", "vllm", "llama-3.3-70b-instruct", ["iad-h200-09", "iad-h200-10"], gpus=[[0, 1]] * 2)
    preemption_storm(f, p, d2, 1, 110, "llama70b-preemption", gateway=False)
    background_noise(f, c, "bg", ["fs", "throttle", "quota"], ["iad-h200-%02d" % k for k in range(7, 11)], 180)
    return f


@fleet
def node_notready_three_deployments():
    """A GPU node stops reporting: NotReady and unreachable taint (for: 15m, fire late), exporters down,
    three deployments lose a replica each, replacements pend for lack of GPU nodes."""
    c = Cluster("rke2-lab-gpu", ext={"cluster": "rke2-lab-gpu", "prometheus": "cattle-monitoring-system/rancher-monitoring-prometheus"})
    nd = nodes("gpu-node", 5)
    f = Fleet("node-notready-three-deployments", "2026-08-19T14:00:00", 3,
              "14:30 gpu-node-03 loses its uplink. Within a minute gateway 5xx and exporter scrapes fail; the "
              "pods of `chat-70b`, `embed-e5` and `sglang-vision` on it are evicted after 300 s and their "
              "replacements stay Pending (no free GPU). KubeNodeNotReady (for: 15m) is the root although it "
              "fires after most effects; node alerts carry only `node`. awesome-prometheus-alerts' "
              "PrometheusTargetMissing also fires for the node-exporter instance.",
              [c], {"*": am_kube_prometheus("http://rancher-monitoring-alertmanager.cattle-monitoring-system:9093",
                                            group_by=("alertname", "namespace"))})
    pv = Pack("vllm")
    ps = Pack("sglang")
    chat = Dep(c, "chat", "chat-70b", "vllm", "llama-3.1-70b", [nd[0], nd[2], nd[4]], gpus=[[0, 1]] * 3)
    emb = Dep(c, "search", "embed-e5", "vllm", "intfloat/e5-mistral-7b-instruct", [nd[2], nd[3]], gpus=[[4], [4]])
    vis = Dep(c, "vision", "sglang-vision", "sglang", "Qwen/Qwen2.5-VL-7B-Instruct", [nd[1], nd[2]], gpus=[[5], [6]])
    node_lost(f, c, "gpu-node-03", 30, "gpu-node-03-notready", [(pv, chat, 1), (pv, emb, 0), (ps, vis, 1)], pv, awesome=True)
    f.dup_every = 9
    f.notes.append("Every 9th notification is delivered twice (HA Alertmanager pair before gossip settles); "
                   "the duplicates are byte-identical.")
    background_noise(f, c, "bg", ["throttle", "gpu_temp", "jobfail"], [nd[0], nd[1], nd[3], nd[4]], 180)
    return f


@fleet
def node_drain_maintenance_two_models():
    """A planned drain (change event) of a GPU node: two deployments lose capacity, replacements pend."""
    c = Cluster("gke-us-east5-serving", ext={"cluster": "gke-us-east5-serving"})
    nd = ["gke-serving-a3-highgpu-{}".format(pod_suffix("n", k, n=4)) for k in range(4)]
    f = Fleet("node-drain-maintenance-two-models", "2026-09-28T06:00:00", 3,
              f"06:20 an operator drains {nd[1]} for a firmware update (change event). `chat-gemma` and `code-llama` "
              "lose their pod there; replacements pend (no spare A3 capacity), survivors queue and TTFT rises. "
              "Root: the drain. 07:50, after the node is back, `chat-gemma` pod 0 preempts with free blocks and "
              "dies of CUDA OOM (second incident). Noise: filesystem, HPA.",
              [c], {"*": am_kube_prometheus("http://alertmanager.gmp-system:9093", group_by=("alertname", "namespace"))})
    p = Pack("vllm")
    a = Dep(c, "chat", "chat-gemma", "vllm", "gemma-3-27b", [nd[0], nd[1], nd[2]], gpus=[[0]] * 3)
    b = Dep(c, "code", "code-llama", "vllm", "codellama-34b", [nd[1], nd[3]], gpus=[[4], [4]])
    node_lost(f, c, nd[1], 20, f"drain-{nd[1]}", [(p, a, 1), (p, b, 0)], p, drained="kubectl-audit")
    kv_fragmentation_cascade(f, p, a, 0, 110, "chat-gemma-kv-oom", frag="heuristic", crashes=1)
    background_noise(f, c, "bg", ["fs", "hpa", "throttle"], nd, 180)
    return f


@fleet
def bad_rollout_max_model_len():
    """A deploy (change event) whose new pods cannot start; rollout stuck, crash loop, queues on the old
    replicas.  Root: the deploy."""
    c = Cluster("prod-eu-central-1", ext={"cluster": "prod-eu-central-1"})
    nd = nodes("euc1-gpu", 3)
    f = Fleet("bad-rollout-max-model-len", "2026-10-21T13:00:00", 3,
              "13:15 `legal-summarizer` is deployed with `--max-model-len 131072`; the new pod fails at start "
              "(KV cache cannot hold one sequence) and crash-loops, the rollout stops progressing "
              "(progressDeadlineSeconds 600), the old replicas run one short and queue. Root: the deploy. "
              "14:40 ghost requests on `legal-search` (batch client with a 30 s timeout): second incident. "
              "Plus an unrelated GPU temperature warning and other noise.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", version="0.32.1", repeat=2 * 3600)})
    p = Pack("vllm")
    d = Dep(c, "legal", "legal-summarizer", "vllm", "mistral-small-24b", nd, gpus=[[0]] * 3)
    bad_rollout(f, p, d, 15, "legal-bad-rollout", announce="change")
    ls = Dep(c, "legal", "legal-search", "vllm", "legal-bert-rag-13b", nd[1:3], gpus=[[3]] * 2)
    ghost_requests(f, p, ls, [0], 100, "legal-search-ghost", length=50)
    background_noise(f, c, "bg", ["gpu_temp", "jobfail", "waiting"], nd, 180)
    return f


@fleet
def bad_rollout_announced_by_ksm_only():
    """The same failure mode, but the deploy is visible only through kube-state-metrics rollout rules
    (no change events in this org): the rollout alert is the root."""
    c = Cluster("corp-k8s-lon", ext={"cluster": "corp-k8s-lon", "prometheus": "monitoring/kube-prometheus"}, ksm_honor=False)
    nd = nodes("lon-a10g", 4)
    f = Fleet("bad-rollout-announced-by-ksm-only", "2026-11-18T09:00:00", 3,
              "09:20 a new revision of `hr-assistant` (SGLang) cannot start; KubeDeploymentRolloutStuck fires after "
              "progressDeadlineSeconds + for: 15m, crash loop, replicas short, the survivor queues. kube-state-"
              "metrics is scraped without honorLabels here, so its alerts carry `exported_namespace` / "
              "`exported_pod` and namespace=monitoring. Root: the rollout alert. 10:40 `hr-search` retracts "
              "requests (second, unrelated incident).",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "exported_namespace"))})
    p = Pack("sglang")
    d = Dep(c, "hr", "hr-assistant", "sglang", "meta-llama/Llama-3.1-8B-Instruct", nd[:2], gpus=[[0]] * 2)
    bad_rollout(f, p, d, 20, "hr-rollout-stuck", announce="rollout", what="--context-length 262144")
    d2 = Dep(c, "hr", "hr-search", "sglang", "Qwen/Qwen2.5-7B-Instruct", nd[2:4], gpus=[[0]] * 2)
    preemption_storm(f, p, d2, 0, 100, "hr-search-retractions", gateway=False)
    background_noise(f, c, "bg", ["throttle", "clock", "quota"], nd, 180)
    return f


@fleet
def harmless_rollouts_and_reloads_beside_preemption():
    """Rollouts and config reloads announced as alerts that cause nothing (noise), next to a real
    preemption incident on a model that was not touched."""
    c = Cluster("gke-usw1-chat", ext={"cluster": "gke-usw1-chat"})
    nd = nodes("usw1-h100", 5)
    f = Fleet("harmless-rollouts-and-reloads-beside-preemption", "2026-12-01T16:00:00", 3.5,
              "16:10 and 17:30 `chat-small` rolls out new images (change events + rollout-in-progress info "
              "alerts), both fine. 16:40 Prometheus' own config-reloader fails for 20 minutes (a bad scrape "
              "config, reverted). 16:55 `chat-large` pod 2 (untouched) has a preemption storm from a traffic "
              "burst: the only incident.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    p = Pack("vllm")
    small = Dep(c, "chat", "chat-small", "vllm", "llama-3.2-3b", nd[:2], gpus=[[6]] * 2)
    large = Dep(c, "chat", "chat-large", "vllm", "llama-3.1-405b-fp8", nd[2:5], gpus=[[0, 1, 2, 3, 4, 5, 6, 7]] * 3)
    noise = []
    for k, t in enumerate((10, 90)):
        noise.append(f.change(t, "Deploy chat/chat-small: image v2.%d" % (14 + k), "argocd",
                              {"cluster": c.name, "namespace": "chat", "deployment": "chat-small", "image": "registry/chat-small:v2.%d" % (14 + k)}))
        noise.append(f.fire("DeploymentRolloutInProgress", small.ksm_workload(), t + 0.5, t + 14, cluster=c))
    noise.append(f.fire("ConfigReloaderSidecarErrors",
                        {"namespace": "monitoring", "pod": "prometheus-k8s-0", "container": "config-reloader", "job": "prometheus-k8s",
                         "endpoint": "reloader-web", "instance": ip(c.name, "prom0") + ":8080", "service": "prometheus-k8s"},
                        40, 62, cluster=c))
    f.noise(*noise)
    preemption_storm(f, p, large, 2, 55, "chat-large-preemption", length=45)
    background_noise(f, c, "bg", ["throttle", "jobfail"], nd, 210)
    return f


@fleet
def router_config_reload_stale_endpoints():
    """A config reload that fails and leaves the router with stale endpoints after the engines moved:
    5xx and connect failures first, the reloader alert (for: 10m) later.  Root: the reloader failure."""
    c = Cluster("kind-staging-gpu", ext={"cluster": "staging"})
    nd = nodes("stg-l4", 4)
    f = Fleet("router-config-reload-stale-endpoints", "2026-02-02T10:00:00", 2.5,
              "10:30 the vllm-router's ConfigMap gets a YAML error; its config-reloader keeps failing, so the "
              "router keeps the old backend list. The engines of `assistant-mistral` were rescheduled at 10:29 "
              "(new IPs): router request errors, gateway connect failures and 5xx, healthy-pods low. "
              "ConfigReloaderSidecarErrors fires ten minutes into it and is the root. 11:25 `assistant-coder` is "
              "redeployed with float16 and produces NaN logits (second incident, root the deploy).",
              [c], {"*": am_kube_prometheus("http://alertmanager:9093", group_by=("alertname",))})
    p = Pack("vllm")
    d = Dep(c, "assistant", "assistant-mistral", "vllm", "mistral-7b-instruct-v0.3", nd[:3], gpus=[[0]] * 3)
    config_reload_stale_endpoints(f, p, d, "vllm-router-" + rs_hash("router") + "-" + pod_suffix("router"), 30, "router-stale-config")
    co = Dep(c, "assistant", "assistant-coder", "vllm", "qwen2.5-coder-7b", nd[2:4], gpus=[[1]] * 2)
    numeric_after_deploy(f, p, co, 85, "coder-nan-after-deploy", change_details={"what": "--dtype float16 (was bfloat16)"}, spec=False)
    background_noise(f, c, "bg", ["throttle", "jobfail", "idle_gpu"], nd, 150)
    return f


@fleet
def scrape_failure_networkpolicy_not_outage():
    """A NetworkPolicy change blocks Prometheus from the engines' metrics port: TargetDown, up == 0 per pod
    and llm-d's "no healthy backends" fire, but serving is fine.  Beside it, a real incident elsewhere."""
    c = Cluster("prod-apse2", ext={"cluster": "prod-apse2"})
    nd = nodes("apse2-h100", 5)
    f = Fleet("scrape-failure-networkpolicy-not-outage", "2026-03-26T11:00:00", 3,
              "11:20 a NetworkPolicy tightening in `qa-bot` (change event) drops ingress from the monitoring "
              "namespace: TargetDown, PrometheusTargetMissing for both pods, LLMDNoHealthyBackends and "
              "LLMDLowReplicaCount (sum(up) == 0). The gateway shows no errors: it is a monitoring incident, root "
              "the change. 12:10 a genuine KV cascade in another namespace (`search-rerank`) is a separate incident.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"), critical_fast=True)})
    d = Dep(c, "qa-bot", "qa-bot-vllm", "vllm", "qa-bot-8b", nd[:2], gpus=[[0]] * 2)
    ch = f.change(20, "NetworkPolicy qa-bot/default-deny-ingress applied", "kubectl-audit",
                  {"cluster": c.name, "namespace": "qa-bot", "deployment": "qa-bot-vllm", "object": "NetworkPolicy/default-deny-ingress"})
    scrape_failure(f, c, d, 21, "qa-bot-scrape-blocked", cause=ch, length=60)
    pr = Pack("vllm")
    rr = Dep(c, "search-rerank", "rerank-qwen", "vllm", "qwen2.5-14b-instruct", nd[2:5], gpus=[[2]] * 3)
    kv_fragmentation_cascade(f, pr, rr, 1, 70, "rerank-kv-oom", frag="heuristic", crashes=1)
    background_noise(f, c, "bg", ["fs", "gpu_temp"], nd, 180)
    return f


@fleet
def same_condition_two_packs_label_shapes():
    """Two Prometheus rule packs watch the same fleet: the platform's generic pack (DCGM with
    exported_pod, mixin) and the serving team's own rules (pod, layer/failure_mode); the same
    framebuffer exhaustion and restart appear under several names and label shapes."""
    c = Cluster("gke-usc1-multi", ext={"cluster": "gke-usc1-multi"}, dcgm_honor=False)
    nd = nodes("usc1-h100", 4)
    f = Fleet("same-condition-two-packs-label-shapes", "2026-04-04T18:00:00", 3,
              "18:20 `agent-llama` pod 1 runs out of KV (long tool-use transcripts). The platform pack sees "
              "GPUMemoryUsageHigh and GPUFramebufferNearlyFull (dcgm labels gpu/UUID/Hostname with "
              "exported_pod), KubePodCrashLooping; the SRE pack sees ServingControllerUnavailable keyed by "
              "`controller`; the team pack sees AgentKVCachePoolHigh, "
              "AgentGPUMemoryHeadroomLow, AgentEngineRestarted (pod). One incident; root the team's KV pool "
              "alert, the earliest cause. 19:40 `agent-planner` pod 2 runs hot behind the EPP (second incident). "
              "Noise: throttling, a job failure, a clock warning.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    gen = Pack("vllm")
    team = Pack("vllm", team="agents", prefix="Agent", team_signals={"kv_high", "fb_low", "restart"})
    d = Dep(c, "agents", "agent-llama", "vllm", "llama-3.3-70b-instruct", nd[:3], gpus=[[0, 1]] * 3)
    root, m = None, []
    root = team.fire(f, "kv_high", d, 1, 20, 29)
    m += live(gen.fire(f, "fb_ratio", d, 1, 15, 29), gen.fire(f, "fb_low", d, 1, 24, 29),
              team.fire(f, "fb_low", d, 1, 24.2, 29), team.fire(f, "restart", d, 1, 29, 55),
              gen.fire(f, "restart", d, 1, 29, 55), gen.fire(f, "crashloop", d, 1, 40, 70),
              gen.fire(f, "kv_high", d, 1, 45, 52), gen.fire(f, "replicas", d, 0, 29, 75),
              gen.fire(f, "queue", d, 0, 31, 70), gen.fire(f, "queue", d, 2, 31.5, 70), gen.fire(f, "ttft", d, 0, 32, 72),
              gen.fire(f, "gw_5xx", d, 0, 29.3, 60),
              # a third shape: the SRE pack keys workloads by `controller` (label_replace of deployment)
              f.fire(RULES["ServingControllerUnavailable"], {"namespace": "agents", "controller": "agent-llama",
                                                             "controller_kind": "Deployment"}, 29.5, 75, cluster=c))
    f.incident("agent-llama-kv-oom", root, m)
    d2 = Dep(c, "agents", "agent-planner", "vllm", "qwen3-32b", nd[1:4], gpus=[[4]] * 3)
    hot_instance(f, gen, d2, 2, 100, "planner-epp-hot", via="epp", length=55)
    background_noise(f, c, "bg", ["throttle", "jobfail", "clock", "targetflap"], nd, 180)
    return f


# ---- negative fleets: close in time and scope, yet unrelated --------------------------------


@fleet
def neg_two_gpu_faults_one_node():
    """Two unrelated hardware problems on one node, ten minutes apart: GPU 2 falls off the bus (pod of
    `chat-qwen` dies); GPU 6 overheats (a failed fan) and throttles `rerank-bge`'s ITL."""
    c = Cluster("colo-sjc-gpu", ext={"cluster": "colo-sjc-gpu"})
    nd = ["sjc-hgx-%02d" % k for k in range(1, 5)]
    f = Fleet("neg-two-gpu-faults-one-node", "2026-01-09T04:00:00", 3,
              "04:30 Xid 79 on sjc-hgx-03 GPU 2: `chat-qwen` pod 1 restarts and crash-loops, replicas short, 5xx. "
              "04:40 on the same node GPU 6 runs hot (fan failure): temperature alert and ITL/TPOT p99 of "
              "`rerank-bge` (pod 0 on GPU 6). Same node, same half hour, different GPUs, different causes: two "
              "incidents.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "cluster"))})
    p = Pack("vllm")
    chat = Dep(c, "chat", "chat-qwen", "vllm", "qwen2.5-72b-instruct", [nd[0], "sjc-hgx-03"], gpus=[[2], [2]])
    rer = Dep(c, "search", "rerank-bge", "vllm", "BAAI/bge-reranker-v2-gemma", ["sjc-hgx-03", nd[3]], gpus=[[6], [6]])
    root = f.fire("GPUXidError", c.dcgm("sjc-hgx-03", 2, xid=79), 30, 90, cluster=c)
    m = live(p.fire(f, "restart", chat, 1, 30.5, 42), p.fire(f, "crashloop", chat, 1, 34, 90),
             p.fire(f, "replicas", chat, 0, 31, 95), p.fire(f, "gw_5xx", chat, 0, 30.4, 37),
             p.fire(f, "ttft", chat, 0, 33, 85))
    f.incident("hgx03-gpu2-xid79", root, m)
    temp = f.fire("GPUHighTemperature", c.dcgm("sjc-hgx-03", 6), 38, 100, cluster=c)
    m2 = live(p.fire(f, "itl", rer, 0, 41, 100), p.fire(f, "tpot", rer, 0, 42, 100))
    f.incident("hgx03-gpu6-thermal", temp, m2)
    background_noise(f, c, "bg", ["throttle", "jobfail", "pv"], nd, 180)
    return f


@fleet
def neg_harmless_rollout_before_gpu_fault():
    """A harmless rollout of one model (change event + rollout alerts) 12 minutes before a GPU ECC fault
    under another model in the same namespace.  The deploy is not the cause."""
    c = Cluster("prod-nrt-llm", ext={"cluster": "prod-nrt-llm"})
    nd = nodes("nrt-h100", 5)
    f = Fleet("neg-harmless-rollout-before-gpu-fault", "2026-02-25T21:00:00", 3,
              "21:20 `jp-chat` rolls out a new image (change event, rollout-in-progress info, a brief replicas "
              "mismatch while the model loads), all fine. 21:32 Xid 48 / DBE on nrt-h100-04 GPU 1, under "
              "`jp-embed`'s pod: restart, replicas short, 5xx on jp-embed's route. Root: the Xid; the rollout "
              "is noise.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    p = Pack("vllm")
    chat = Dep(c, "jp", "jp-chat", "vllm", "llm-jp-3-13b-instruct", nd[:3], gpus=[[0]] * 3)
    emb = Dep(c, "jp", "jp-embed", "vllm", "cl-nagoya/ruri-large", [nd[3], nd[4]], gpus=[[1], [1]])
    ch = f.change(20, "Deploy jp/jp-chat: image 2026.02.25-1", "argocd",
                  {"cluster": c.name, "namespace": "jp", "deployment": "jp-chat", "image": "registry/jp-chat:2026.02.25-1"})
    noise = [ch, f.fire("DeploymentRolloutInProgress", chat.ksm_workload(), 20.5, 38, cluster=c)]
    f.noise(*noise)
    root = f.fire("GPUXidError", c.dcgm(nd[3], 1, xid=48), 32, 80, cluster=c)
    m = live(f.fire("GPUEccDoubleBitErrors", emb.dcgm(0), 32, 70, cluster=c),
             p.fire(f, "restart", emb, 0, 32.4, 44), p.fire(f, "crashloop", emb, 0, 36, 80),
             p.fire(f, "replicas", emb, 0, 33, 85), p.fire(f, "gw_5xx", emb, 0, 32.3, 40))
    f.incident("jp-embed-gpu-ecc", root, m)
    background_noise(f, c, "bg", ["throttle", "hpa", "clock"], nd, 180)
    return f


@fleet
def neg_scrape_flap_beside_preemption():
    """dcgm-exporter and node-exporter targets on one node flap (exporter OOM-restarts) while an SGLang pod
    on that same node has a real retraction storm.  Scrape flaps are noise."""
    c = Cluster("k3s-homelab-gpu", ext={"cluster": "homelab"})
    nd = ["gpu-box-1", "gpu-box-2"]
    f = Fleet("neg-scrape-flap-beside-preemption", "2026-05-31T19:00:00", 3,
              "From 19:20 the dcgm-exporter on gpu-box-2 restarts every ~25 minutes (its own memory limit): "
              "TargetDown and PrometheusTargetMissing come and go. 19:35 `sglang-llama` pod 1 on gpu-box-2 has a "
              "real retraction storm (token pool full, ITL, TTFT). The scrape flaps are noise; the storm is the "
              "incident.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname",))})
    p = Pack("sglang")
    d = Dep(c, "llm", "sglang-llama", "sglang", "meta-llama/Llama-3.1-8B-Instruct", nd, gpus=[[0], [0]])
    noise = []
    for k in range(4):
        t = 20 + 26 * k
        noise.append(f.fire("TargetDown", {"job": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "service": "nvidia-dcgm-exporter"},
                            t, t + 13, cluster=c))
        noise.append(f.fire("PrometheusTargetMissing", dict(c.dcgm("gpu-box-2", 0), ), t, t + 3, cluster=c)
                     if False else f.fire("PrometheusTargetMissing",
                                          {"job": "nvidia-dcgm-exporter", "instance": ip(c.name, "gpu-box-2", "dcgm") + ":9400",
                                           "namespace": "gpu-operator", "pod": c.dcgm_pods.setdefault("gpu-box-2", "nvidia-dcgm-exporter-" + pod_suffix(c.name, "gpu-box-2")),
                                           "service": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics", "container": "nvidia-dcgm-exporter"},
                                          t, t + 3, cluster=c))
    f.noise(*noise)
    preemption_storm(f, p, d, 1, 35, "sglang-llama-retractions", gateway=False, length=50)
    background_noise(f, c, "bg", ["fs", "clock"], nd, 180)
    return f


@fleet
def neg_two_models_one_namespace():
    """Two models in one namespace, overlapping in time, with independent trouble: a hot replica on one,
    ghost requests on the other."""
    c = Cluster("prod-gru-llm", ext={"cluster": "prod-gru-llm"})
    nd = nodes("gru-h100", 6)
    f = Fleet("neg-two-models-one-namespace", "2026-06-15T14:00:00", 3,
              "Namespace `genai` holds `pt-chat` (router in front) and `pt-docs`. 14:20 `pt-chat` pod 0 runs hot "
              "(router QPS skew from a shared system prompt). 14:28 `pt-docs` gets ghost requests from a client "
              "with a 30 s timeout (disconnects, aborts, stuck pods). Same namespace, same gateway, two incidents.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("namespace",))})
    p = Pack("vllm")
    chat = Dep(c, "genai", "pt-chat", "vllm", "sabia-3-chat", nd[:3], gpus=[[0]] * 3)
    docs = Dep(c, "genai", "pt-docs", "vllm", "sabia-3-docs", nd[3:6], gpus=[[0]] * 3)
    hot_instance(f, p, chat, 0, 20, "pt-chat-hot", via="router", length=60)
    ghost_requests(f, p, docs, [1], 28, "pt-docs-ghost", length=55)
    background_noise(f, c, "bg", ["throttle", "quota"], nd, 180)
    return f


@fleet
def neg_deploy_then_unrelated_ecc_nan():
    """A deploy of model A, then 15 minutes later model B (same namespace, not redeployed) produces NaN
    logits because its GPU has contained ECC errors (Xid 94).  The deploy is not the cause."""
    c = Cluster("prod-bom-ai", ext={"cluster": "prod-bom-ai"})
    nd = nodes("bom-h100", 4)
    f = Fleet("neg-deploy-then-unrelated-ecc-nan", "2026-07-07T08:00:00", 3,
              "08:20 `hi-chat` is redeployed (change event). 08:35 Xid 94 (contained ECC) on bom-h100-04 GPU 3, "
              "under `hi-translate` pod 1, which then counts NaN-logit requests and repetition finishes. "
              "Root of that incident: the Xid. The deploy and its rollout alert are noise.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    p = Pack("vllm")
    chat = Dep(c, "indic", "hi-chat", "vllm", "sarvam-m", nd[:2], gpus=[[0]] * 2)
    tr = Dep(c, "indic", "hi-translate", "vllm", "indictrans-llm-9b", [nd[2], nd[3]], gpus=[[3], [3]])
    ch = f.change(20, "Deploy indic/hi-chat: model sarvam-m r12", "argocd",
                  {"cluster": c.name, "namespace": "indic", "deployment": "hi-chat", "model_revision": "r12"})
    f.noise(ch, f.fire("DeploymentRolloutInProgress", chat.ksm_workload(), 20.4, 33, cluster=c))
    root = f.fire("GPUXidError", c.dcgm(nd[3], 3, xid=94), 35, 95, cluster=c)
    m = live(p.fire(f, "nan", tr, 1, 36, 95), p.fire(f, "repetition", tr, 0, 37, 95))
    f.incident("hi-translate-ecc-nan", root, m)
    background_noise(f, c, "bg", ["throttle", "jobfail", "gpu_temp"], nd, 180)
    return f


@fleet
def neg_two_clusters_same_names():
    """Two clusters with the same namespace, deployment and model names; at the same time one has a
    preemption storm and the other loses a node.  Central Alertmanager grouping by alertname only."""
    a = Cluster("prod-a", ext={"cluster": "prod-a", "prometheus": "monitoring/k8s"})
    b = Cluster("prod-b", ext={"cluster": "prod-b", "prometheus": "monitoring/k8s"})
    f = Fleet("neg-two-clusters-same-names", "2026-08-25T12:00:00", 3,
              "`chat/chat-llama` exists in prod-a and prod-b. 12:25 prod-a pod 1 has a preemption storm (KV full, "
              "ITL, TTFT). 12:30 prod-b loses node b-gpu-02 (NotReady) with its chat-llama pod. The central "
              "Alertmanager groups by alertname only, so bodies mix clusters. Two incidents.",
              [a, b], {"*": am_kube_prometheus("https://alertmanager.central.example.com", group_by=("alertname",))})
    p = Pack("vllm")
    da = Dep(a, "chat", "chat-llama", "vllm", "llama-3.1-70b-instruct", nodes("a-gpu", 3), gpus=[[0, 1]] * 3)
    db = Dep(b, "chat", "chat-llama", "vllm", "llama-3.1-70b-instruct", nodes("b-gpu", 3), gpus=[[0, 1]] * 3)
    preemption_storm(f, p, da, 1, 25, "prod-a-preemption", length=45)
    node_lost(f, b, "b-gpu-02", 30, "prod-b-node-lost", [(p, db, 1)], p)
    background_noise(f, a, "a", ["throttle", "jobfail"], nodes("a-gpu", 3), 180)
    background_noise(f, b, "b", ["throttle", "hpa"], nodes("b-gpu", 3), 180)
    return f


@fleet
def neg_threshold_edit_then_unrelated_oom():
    """A threshold edit on the chat team's TTFT rule, then a host-memory OOM of an embedding model in
    another namespace.  The edit concerns a rule that never fires here: noise."""
    c = Cluster("prod-yul", ext={"cluster": "prod-yul"})
    nd = nodes("yul-l40s", 4)
    f = Fleet("neg-threshold-edit-then-unrelated-oom", "2026-09-16T10:00:00", 3,
              "10:15 the chat team relaxes its TTFT alert (2 s -> 4 s; change event). 10:35 `embed-gte` in "
              "`search` (SGLang with a large CPU-side batch buffer) exceeds its container memory limit and is "
              "OOMKilled twice; its other replica queues. The edit is noise; the OOM is one incident, root its "
              "memory-pressure alert.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    ch = f.change(15, "rules: ChatTTFTBudgetBurn threshold 2s -> 4s", "gitlab-ci",
                  {"cluster": c.name, "namespace": "chat", "deployment": "", "repo": "chat/alert-rules", "diff": "- > 2\n+ > 4"})
    f.noise(ch)
    mem = RULES["LLMDMemoryPressure"].variant(expr='(container_memory_working_set_bytes{container="sglang"} / container_spec_memory_limit_bytes{container="sglang"}) > 0.85',
                                              adapted="container selector sglang instead of vllm")
    p = Pack("sglang", overrides={"mem_pressure": mem})
    d = Dep(c, "search", "embed-gte", "sglang", "Alibaba-NLP/gte-Qwen2-7B-instruct", nd[:2], gpus=[[1]] * 2)
    root = p.fire(f, "mem_pressure", d, 0, 22, 40)
    m = live(p.fire(f, "oomkilled", d, 0, 40, 58), p.fire(f, "replicas", d, 0, 40, 75),
             p.fire(f, "queue", d, 1, 41, 72), p.fire(f, "ttft", d, 0, 42, 72))
    f.incident("embed-gte-host-oom", root, m)
    background_noise(f, c, "bg", ["throttle", "fs", "idle_gpu"], nd, 180)
    return f


@fleet
def neg_shared_node_independent_incidents():
    """Two deployments share a node; one has a KV-fragmentation cascade, the other, five minutes later,
    an independent preemption storm from its own traffic (its pod never crashes)."""
    c = Cluster("gke-euw4-shared", ext={"cluster": "gke-euw4-shared"})
    nd = nodes("euw4-h100", 4)
    f = Fleet("neg-shared-node-independent-incidents", "2026-10-29T01:00:00", 3.5,
              "euw4-h100-02 hosts `fr-chat` (GPUs 0-1) and `fr-summary` (GPUs 4-5). 01:20 `fr-chat` pod on it: "
              "fragmentation (heuristic rule: preempting with free KV), KV full, CUDA OOM restarts, survivors "
              "queue. 01:27 `fr-summary` on the same node: a burst of long documents, KV full, preemption, ITL "
              "jitter, no crash. Same node, separate pools, separate GPUs: two incidents.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"))})
    p = Pack("vllm")
    chat = Dep(c, "fr", "fr-chat", "vllm", "mistral-large-2", [nd[0], nd[1], nd[2]], gpus=[[0, 1]] * 3)
    summ = Dep(c, "fr", "fr-summary", "vllm", "mistral-nemo-12b", [nd[1], nd[3]], gpus=[[4, 5], [4, 5]])
    kv_fragmentation_cascade(f, p, chat, 1, 20, "fr-chat-kvfrag", frag="heuristic")
    preemption_storm(f, p, summ, 0, 27, "fr-summary-preemption", gateway=False, length=40)
    background_noise(f, c, "bg", ["throttle", "jobfail", "clock"], nd, 210)
    return f




@fleet
def sglang_pd_disaggregation_rdma_port_down():
    """SGLang prefill/decode disaggregation across nodes: the decode node's RDMA port drops; KV transfers
    from the prefill pods fail and TTFT rises, although the decode pods themselves look healthy.  The
    RDMA alert is node-exporter's (instance, device, port) and carries no pod."""
    c = Cluster("pd-cluster-hnd", ext={"cluster": "pd-cluster-hnd", "prometheus": "monitoring/k8s"})
    nd = nodes("hnd-h200", 4)
    f = Fleet("sglang-pd-disaggregation-rdma-port-down", "2026-03-09T23:00:00", 3,
              "`dsv3-prefill` (2 pods, engine_type=prefill) hands KV caches to `dsv3-decode` (2 pods) over RoCE. "
              "23:40 mlx5_3 port 1 on hnd-h200-03 (decode pod 0's node) goes down: prefill pods report KV transfer "
              "failures, prefill queues back up, aborts and TTFT rise. Root: NodeRDMAPortDown (instance only). "
              "01:05 a harmless config reload error of the monitoring stack's Alertmanager (noise) and the usual "
              "background.",
              [c], {"*": am_kube_prometheus("http://alertmanager.monitoring:9093", group_by=("alertname", "namespace"), version="0.32.0")})
    p = Pack("sglang")
    pre = Dep(c, "dsv3", "dsv3-prefill", "sglang", "deepseek-ai/DeepSeek-V3", nd[:2], gpus=[[0, 1, 2, 3, 4, 5, 6, 7]] * 2,
              kind="StatefulSet")
    # dsv3-decode (StatefulSet, 2 pods on nd[2:4]) fires nothing in this fleet: no workload object for it.
    root = f.fire("NodeRDMAPortDown", c.node_exporter(nd[2], device="mlx5_3", port="1"), 40, 85, cluster=c)
    m = []
    for i in range(2):
        m += live(p.fire(f, "kv_transfer", pre, i, 40.5 + 0.3 * i, 86, extra={"engine_type": "prefill", "tp_rank": "0"}),
                  p.fire(f, "queue", pre, i, 42, 84, extra={"engine_type": "prefill", "tp_rank": "0"}))
    m += live(p.fire(f, "abort", pre, 0, 41, 86), p.fire(f, "ttft", pre, 0, 42, 86),
              p.fire(f, "gw_latency", pre, 0, 43, 84))
    f.incident("hnd03-rdma-down", root, m)
    f.noise(f.fire("ConfigReloaderSidecarErrors",
                   {"namespace": "monitoring", "pod": "alertmanager-main-0", "container": "config-reloader",
                    "job": "alertmanager-main", "endpoint": "reloader-web", "instance": ip(c.name, "am0") + ":8080",
                    "service": "alertmanager-main"}, 125, 150, cluster=c))
    background_noise(f, c, "bg", ["throttle", "jobfail", "gpu_temp"], nd, 180)
    return f


@fleet
def large_three_clusters_busy_shift():
    """A long, busy shift over three clusters behind one central Alertmanager (group_by cluster, namespace,
    alertname; repeat 1h): eight incidents of different kinds and a lot of background noise."""
    a = Cluster("prod-use1", ext={"cluster": "prod-use1", "prometheus": "monitoring/k8s"})
    b = Cluster("prod-euw1", ext={"cluster": "prod-euw1", "prometheus": "monitoring/k8s"}, dcgm_honor=True)
    cc = Cluster("prod-apne1", ext={"cluster": "prod-apne1", "prometheus": "monitoring/k8s"}, gpu_model="NVIDIA H200")
    f = Fleet("large-three-clusters-busy-shift", "2026-11-26T00:00:00", 7,
              "Seven hours, three clusters, one central Alertmanager with repeat_interval 1h. Incidents: "
              "(1) 00:30 use1 `chat` vLLM KV-fragmentation cascade (heuristic root); (2) 01:10 euw1 SGLang "
              "retraction storm; (3) 01:50 apne1 node NotReady hitting two deployments; (4) 02:40 use1 ghost "
              "requests on `batch-summarize`; (5) 03:30 euw1 deploy with NaN logits; (6) 04:20 apne1 Xid 79 under "
              "`jp-assist` pod 0; (7) 05:00 use1 hot replica behind the EPP; (8) 05:40 euw1 bad rollout announced "
              "by a change event. Many unrelated warnings in all three clusters, including a CPU node NotReady "
              "and an Xid 13 on a research GPU.",
              [a, b, cc], {"*": am_kube_prometheus("https://alertmanager.central.example.com", receiver="rootline-central",
                                                   group_by=("cluster", "namespace", "alertname"), version="0.32.1",
                                                   repeat=3600, critical_fast=True)})
    pv = Pack("vllm")
    pl = Pack("vllm", llmd=True)
    ps = Pack("sglang")
    na, nb, nc = nodes("use1-h100", 8), nodes("euw1-h100", 6), nodes("apne1-h200", 6)
    chat = Dep(a, "chat", "chat-llama-70b", "vllm", "llama-3.3-70b-instruct", na[:4], gpus=[[0, 1]] * 4)
    kv_fragmentation_cascade(f, pv, chat, 3, 30, "use1-chat-kvfrag", frag="heuristic")
    eu = Dep(b, "assist", "eu-assist", "sglang", "mistralai/Mistral-Small-3.1-24B-Instruct-2503", nb[:3], gpus=[[0]] * 3)
    preemption_storm(f, ps, eu, 1, 70, "euw1-retractions")
    jp = Dep(cc, "jp", "jp-assist", "vllm", "llm-jp-3-172b-instruct", nc[:3], gpus=[[0, 1, 2, 3, 4, 5, 6, 7]] * 3)
    jp_small = Dep(cc, "jp", "jp-rerank", "vllm", "ruri-reranker-large", [nc[1], nc[3]], gpus=[[0], [0]])
    node_lost(f, cc, nc[1], 110, "apne1-node-lost", [(pv, jp, 1), (pv, jp_small, 0)], pv, length=60)
    bs = Dep(a, "batch", "batch-summarize", "vllm", "qwen2.5-32b-instruct", na[4:7], gpus=[[0]] * 3)
    ghost_requests(f, pv, bs, [0, 2], 160, "use1-batch-ghost")
    eunan = Dep(b, "assist", "eu-translate", "vllm", "towerinstruct-13b", nb[3:6], gpus=[[0]] * 3)
    numeric_after_deploy(f, pv, eunan, 210, "euw1-nan-deploy", change_details={"what": "image vllm v0.12.0 + torch.compile"}, spec=False)
    shared_gpu_fault(f, nc[0], cc, 260, "apne1-xid79", [(pv, jp, 0)], xid=79, extra_hw=())
    ep = Dep(a, "agents", "agent-pool", "vllm", "qwen3-32b", na[4:8], gpus=[[4]] * 4)
    hot_instance(f, pl, ep, 1, 300, "use1-epp-hot", via="epp", length=50)
    ro = Dep(b, "assist", "eu-embed", "vllm", "multilingual-e5-large", nb[:2], gpus=[[7]] * 2)
    bad_rollout(f, pv, ro, 340, "euw1-bad-rollout", announce="change", what="--max-num-batched-tokens 0")
    for cl, ns_, seed in ((a, na, "a"), (b, nb, "b"), (cc, nc, "c")):
        background_noise(f, cl, seed + "1", ["throttle", "jobfail", "fs", "hpa", "sidecar_crash", "clock", "pv"], ns_, 420)
        background_noise(f, cl, seed + "2", ["targetflap", "gpu_temp", "waiting", "quota", "xid13_research",
                                              "cpu_node_notready", "web_replicas"], ns_, 420)
    return f


# ----------------------------------------------------------------------------------------------


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    summary = []
    for fn in FLEETS:
        f = fn()
        summary.append(f.write())
    for s in summary:
        print("%-52s %-40s occ=%3d chg=%d inc=%d noise=%3d bodies=%d" % (
            s["name"], ",".join(s["clusters"]), s["occurrences"], s["changes"], s["incidents"], s["noise"], s["bodies"]))


if __name__ == "__main__":
    main()
