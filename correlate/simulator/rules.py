"""Alerting rules as fleets really write them.

Each kind of trouble has labelled names (a platform rule pack that sets `layer` /
`failure_mode`, sometimes in the teams' synonyms) and plain names (a team's own, kube-prometheus,
DCGM), and a fast and sometimes a slow expression. Which one a cluster uses is decided per
cluster and kind from the seed, so about half of the alerts carry no classification labels.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .core import NS


@dataclass(frozen=True)
class Expr:
    promql: str
    for_s: int
    lag_s: int  # detection delay of the expression itself (rate windows, averages)
    end_lag_s: int  # how long the expression stays true after the raw condition ends
    keys: tuple[str, ...] | None  # label names the expression keeps (None: the series' own)


@dataclass(frozen=True)
class Kind:
    name: str
    source: str  # pod | ksm | gpu | deployment | istio | target | node | deployment_ksm | static
    group: str  # rule group (eval offset), also decides the interval
    severity: str
    layers: tuple[str, ...]
    modes: tuple[str, ...]
    labelled_names: tuple[str, ...]
    plain_names: tuple[str, ...]
    fast: Expr
    summary: str
    description: str
    slow: Expr | None = None
    signal: str | None = None  # metric signal this kind watches, for metric consistency
    threshold: float | None = None
    direction: str = "up"
    runbook: str = "team"  # team | kube-prometheus | none
    extra: dict[str, str] = field(default_factory=dict)


GROUP_INTERVAL_S = {"llm": 30, "k8s": 30, "gpu": 30, "slo": 60, "node": 60, "misc": 60}

POD = None  # keep all labels of the watched series


def _k(*names: str) -> tuple[str, ...]:
    return ("cluster",) + names


KINDS: dict[str, Kind] = {}


def _add(kind: Kind) -> None:
    KINDS[kind.name] = kind


_add(Kind(
    "kv_frag", "frag", "llm", "warning", ("engine", "engine-scheduler", "scheduler"), ("kv_fragmentation", "F4"),
    ("KVCacheFragmentationHigh", "LLMKVFragmentationHigh"), ("KVBlockFragmentation", "vllm-kv-fragmentation",
                                                            "KvCacheFragmented"),
    Expr("llm_kv_cache_fragmentation_ratio > 0.25", 300, 15, 30, POD),
    "KV-cache fragmentation {value_pct} on {pod}",
    "llm_kv_cache_fragmentation_ratio above 25% on {namespace}/{pod}; free blocks are not contiguous.",
    slow=Expr("avg_over_time(llm_kv_cache_fragmentation_ratio[15m]) > 0.25", 900, 480, 450, POD),
    signal="frag", threshold=0.25))
_add(Kind(
    "kv_usage", "pod", "llm", "warning", ("engine", "engine-scheduler"), ("oom", "F1"),
    ("KVCachePoolExhausted", "LLMKVCacheUsageHigh"), ("VLLMKVCacheAlmostFull", "vllm-kv-cache-full",
                                                     "GPUKVCacheSaturated"),
    Expr("vllm:kv_cache_usage_perc > 0.9", 120, 15, 30, POD),
    "KV cache {value_pct} full on {pod}",
    "vLLM KV-cache pool usage on {namespace}/{pod} ({model_name}) is above 90%; new sequences will be preempted.",
    slow=Expr("avg_over_time(vllm:kv_cache_usage_perc[10m]) > 0.9", 300, 240, 300, POD),
    signal="kv", threshold=0.9))
_add(Kind(
    "gpu_fb", "gpu", "gpu", "critical", ("hardware", "gpu", "node-hw"), ("oom", "F1"),
    ("GPUFramebufferExhausted", "LLMGpuFramebufferLow"), ("GPUMemPressure", "DcgmFbFreeLow", "gpu-mem-headroom-low"),
    Expr("DCGM_FI_DEV_FB_FREE < 1024", 120, 15, 30, POD),
    "GPU {gpu} on {host} has {value_mib} MiB framebuffer free",
    "DCGM_FI_DEV_FB_FREE below 1 GiB on {host} GPU {gpu} ({UUID}).",
    signal="fbfree", threshold=1024, direction="down"))
_add(Kind(
    "oom_killed", "ksm", "k8s", "critical", ("platform", "k8s", "kubernetes"), ("oom", "F1"),
    ("LLMPodOOMKilled", "InferenceContainerOOMKilled"), ("llm-pod-oom", "KubernetesContainerOomKiller",
                                                         "KubeContainerOOMKilled"),
    Expr('((kube_pod_container_status_restarts_total - kube_pod_container_status_restarts_total offset 10m >= 1)'
         ' and ignoring (reason) min_over_time(kube_pod_container_status_last_terminated_reason'
         '{reason="OOMKilled"}[10m]) == 1) * on (namespace, pod) group_left (node) max by (namespace, pod, node) '
         '(kube_pod_info)', 0, 30, 600, POD),
    "Container {container} in {namespace}/{pod} was OOMKilled",
    "Container {container} in pod {namespace}/{pod} has been OOMKilled {value_int} times in the last 10 minutes."))
_add(Kind(
    "cuda_oom", "ksm", "k8s", "critical", ("platform", "k8s"), ("oom", "F1"),
    ("LLMEngineCUDAOOM",), ("vllm-engine-exit-error", "InferenceContainerErrorExit"),
    Expr('(increase(kube_pod_container_status_restarts_total[10m]) >= 1 and ignoring (reason)'
         ' kube_pod_container_status_last_terminated_reason{reason="Error"} == 1) * on (namespace, pod) '
         'group_left (node) max by (namespace, pod, node) (kube_pod_info)', 0, 30, 600, POD),
    "Engine container {container} in {namespace}/{pod} exited with an error",
    "{namespace}/{pod} restarted after exit code 1 (torch.OutOfMemoryError: CUDA out of memory in the engine log)."))
_add(Kind(
    "crashloop", "ksm", "k8s", "warning", ("platform", "k8s", "kubernetes"), ("restart",),
    ("InferencePodCrashLooping",), ("KubePodCrashLooping",),
    Expr('max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", '
         'job="kube-state-metrics"}[5m]) >= 1', 900, 0, 300, POD),
    "Pod is crash looping.",
    'Pod {namespace}/{pod} ({container}) is in waiting state (reason: "CrashLoopBackOff").',
    runbook="kube-prometheus", extra={"reason": "CrashLoopBackOff"}))
_add(Kind(
    "engine_restart", "ksm", "k8s", "warning", ("platform", "k8s"), ("restart",),
    ("LLMEngineContainerRestarted",), ("vllm-engine-restarts", "InferenceContainerRestarting"),
    Expr("increase(kube_pod_container_status_restarts_total[10m]) > 0", 0, 30, 600, POD),
    "{namespace}/{pod} container {container} restarted",
    "Container {container} of {namespace}/{pod} restarted in the last 10 minutes."))
_add(Kind(
    "target_down", "target", "k8s", "warning", ("platform", "k8s"), ("target_down",),
    ("LLMMetricsTargetDown",), ("TargetDown",),
    Expr("100 * (count(up == 0) BY (cluster, job, namespace, service) / count(up) BY (cluster, job, namespace, "
         "service)) > 10", 600, 0, 30, _k("job", "namespace", "service")),
    "One or more targets are unreachable.",
    "{value_int}% of the {job}/{service} targets in {namespace} namespace are down.",
    runbook="kube-prometheus"))
_add(Kind(
    "queue", "pod", "llm", "warning", ("engine", "engine-scheduler"), ("queueing",),
    ("LLMQueueDepthHigh", "InferenceQueueBacklog"), ("VLLMRequestsQueued", "vllm-waiting-requests-high",
                                                    "ServingQueueBacklog"),
    Expr("vllm:num_requests_waiting > 20", 120, 15, 30, POD),
    "{value_int} requests waiting on {pod}",
    "vllm:num_requests_waiting on {namespace}/{pod} has been above 20 for 2 minutes.",
    signal="waiting", threshold=20))
_add(Kind(
    "ttft", "deployment", "slo", "critical", ("serving", "routing", "gateway"), ("slo_ttft", "SLO"),
    ("LLMTTFTP99SLOBreach", "TTFTSLOBreach"), ("ServingP99TTFTHigh", "llm-ttft-p99-slo", "ChatLatencyP99High"),
    Expr("histogram_quantile(0.99, sum by (le, namespace, model_name) "
         "(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2", 300, 90, 150, _k("namespace", "model_name")),
    "p99 TTFT {value_s} for {model_name}",
    "p99 time to first token of {model_name} in {namespace} is above the 2 s SLO.",
    signal="ttft", threshold=2.0))
_add(Kind(
    "ttft_pod", "pod", "slo", "critical", ("serving", "routing"), ("slo_ttft", "SLO"),
    ("LLMTTFTP99SLOBreach",), ("ServingP99TTFTHigh", "ReplicaTTFTHigh"),
    Expr("histogram_quantile(0.99, sum by (le, namespace, pod) "
         "(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2", 300, 90, 150, _k("namespace", "pod")),
    "p99 TTFT {value_s} on {pod}",
    "p99 time to first token on {namespace}/{pod} is above 2 s.",
    signal="ttft", threshold=2.0))
_add(Kind(
    "tpot", "deployment", "slo", "warning", ("serving", "routing"), ("slo_tpot", "SLO"),
    ("LLMTPOTP99SLOBreach",), ("ServingTPOTDegraded", "llm-tpot-p99-high"),
    Expr("histogram_quantile(0.99, sum by (le, namespace, model_name) "
         "(rate(vllm:request_time_per_output_token_seconds_bucket[5m]))) > 0.08", 300, 90, 150,
         _k("namespace", "model_name")),
    "p99 TPOT {value_ms} for {model_name}",
    "p99 time per output token of {model_name} in {namespace} is above 80 ms.",
    signal="tpot", threshold=0.08))
_add(Kind(
    "itl", "pod", "slo", "warning", ("engine", "serving"), ("slo_itl", "SLO"),
    ("LLMITLJitterHigh",), ("VLLMInterTokenLatencyHigh", "StreamingITLDegraded"),
    Expr("histogram_quantile(0.99, sum by (le, namespace, pod) "
         "(rate(vllm:inter_token_latency_seconds_bucket[5m]))) > 0.1", 300, 90, 150, _k("namespace", "pod")),
    "p99 inter-token latency {value_ms} on {pod}",
    "Streaming is stuttering on {namespace}/{pod}: p99 inter-token latency above 100 ms.",
    signal="itl", threshold=0.1))
_add(Kind(
    "preempt", "pod", "llm", "warning", ("engine", "engine-scheduler"), ("preemption", "F2"),
    ("LLMPreemptionRateHigh",), ("VLLMPreemptionStorm", "vllm-preemptions", "KVCachePreemptionBurst"),
    Expr("rate(vllm:num_preemptions_total[5m]) > 0.1", 300, 90, 150, POD),
    "{pod} preempting {value_rate} sequences/s",
    "The scheduler on {namespace}/{pod} is preempting running sequences (KV blocks reclaimed).",
    signal="preempt", threshold=0.1))
_add(Kind(
    "hot", "hot", "llm", "warning", ("serving", "routing", "serving-routing"), ("hot_instance", "F5"),
    ("LLMHotReplica", "InferenceHotInstance"), ("InferenceReplicaHot", "vllm-replica-load-skew", "PrefixHashHotspot"),
    Expr("sum by (namespace, model_name, pod) (rate(vllm:request_success_total[5m])) / on (namespace, model_name) "
         "group_left avg by (namespace, model_name) (sum by (namespace, model_name, pod) "
         "(rate(vllm:request_success_total[5m]))) > 2", 600, 120, 150, _k("namespace", "model_name", "pod")),
    "{pod} serves {value_x} the average replica load",
    "Traffic of {model_name} is skewed onto {namespace}/{pod} (prefix-hash routing?).",
    slow=Expr("avg_over_time((sum by (namespace, model_name, pod) (rate(vllm:request_success_total[5m])) / on "
              "(namespace, model_name) group_left avg by (namespace, model_name) (sum by (namespace, model_name, pod) "
              "(rate(vllm:request_success_total[5m]))))[15m:1m]) > 2", 600, 720, 450,
              _k("namespace", "model_name", "pod")),
    signal="hot", threshold=2.0))
_add(Kind(
    "nan", "pod", "llm", "critical", ("engine",), ("numeric", "F6"),
    ("LLMNaNLogitsDetected",), ("VLLMNaNLogits", "vllm-corrupted-requests"),
    Expr("increase(vllm:corrupted_requests_total[5m]) > 0", 0, 60, 300, POD),
    "NaN/Inf logits on {pod}",
    "vllm:corrupted_requests_total increased on {namespace}/{pod}: a batch produced NaN logits.",
    signal="corrupt", threshold=0.001))
_add(Kind(
    "repetition", "deployment", "llm", "warning", ("engine",), ("numeric", "F6"),
    ("LLMRepetitionFinishSpike",), ("GarbageOutputSpike", "llm-degenerate-output"),
    Expr('sum by (namespace, model_name) (rate(vllm:request_success_total{finished_reason="repetition"}[10m])) / '
         'sum by (namespace, model_name) (rate(vllm:request_success_total[10m])) > 0.05', 300, 300, 300,
         _k("namespace", "model_name")),
    "{value_pct} of {model_name} completions end in repetition",
    "Repetition-finished completions of {model_name} in {namespace} above 5% (garbage output).",
    signal="rep", threshold=0.05))
_add(Kind(
    "errors", "service", "slo", "critical", ("serving", "gateway"), ("error_rate",),
    ("LLMServingErrorRateHigh",), ("ServingErrorRateHigh", "InferenceAPI5xxHigh", "chat-api-errors"),
    Expr('sum by (namespace, service) (rate(http_requests_total{status="5xx"}[5m])) / '
         'sum by (namespace, service) (rate(http_requests_total[5m])) > 0.02', 300, 90, 150,
         _k("namespace", "service")),
    "{value_pct} of requests to {service} fail",
    "HTTP 5xx ratio of {namespace}/{service} is above 2%.",
    signal="err", threshold=0.02))
_add(Kind(
    "xid", "gpu", "gpu", "critical", ("hardware", "gpu", "node-hw"), ("gpu_error",),
    ("LLMGpuXidError", "GPUXidCritical"), ("DCGMXidErrors", "GpuXidError", "NvidiaGpuXid"),
    Expr("max_over_time(DCGM_FI_DEV_XID_ERRORS[5m]) > 0", 0, 20, 300, POD),
    "Xid {value_int} on {host} GPU {gpu}",
    "GPU {gpu} ({UUID}) on {host} reported Xid {value_int}: {err_msg}.",
    runbook="none"))
_add(Kind(
    "ecc", "gpu", "gpu", "critical", ("hardware", "gpu"), ("gpu_error",),
    ("LLMGpuEccDoubleBitErrors",), ("GpuEccDbeErrors", "DCGMEccDoubleBit"),
    Expr("increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", 0, 30, 600, POD),
    "Double-bit ECC errors on {host} GPU {gpu}",
    "Uncorrectable (double-bit) ECC errors on GPU {gpu} ({UUID}) of {host}; drain the node.",
    runbook="none"))
_add(Kind(
    "disconnects", "istio", "slo", "warning", ("serving", "gateway"), ("timeout", "F3"),
    ("LLMClientDisconnectsHigh",), ("IstioClientDisconnectSpike", "ClientCancelledRequestsHigh"),
    Expr('sum by (destination_workload_namespace, destination_workload) (rate(istio_requests_total{reporter='
         '"destination", response_flags="DC"}[5m])) / sum by (destination_workload_namespace, destination_workload) '
         '(rate(istio_requests_total{reporter="destination"}[5m])) > 0.05', 300, 90, 150,
         _k("destination_workload_namespace", "destination_workload")),
    "{value_pct} of requests to {destination_workload} end in client disconnect",
    "Clients disconnect before the response completes (response_flags=DC) on "
    "{destination_workload_namespace}/{destination_workload}; check client timeouts.",
    signal="dc", threshold=0.05))
_add(Kind(
    "ghost", "pod", "llm", "warning", ("engine", "engine-scheduler"), ("timeout", "F3"),
    ("LLMEngineRunningWithoutCompletions", "LLMGhostRequests"), ("VLLMStuckRequests", "vllm-ghost-requests"),
    Expr("vllm:num_requests_running > 48 and on (pod) sum by (pod) (rate(vllm:request_success_total[5m])) < 1",
         300, 300, 60, POD),
    "{value_int} requests running on {pod} with few completions",
    "{namespace}/{pod} keeps generating for requests whose clients are gone.",
    signal="running", threshold=48))
_add(Kind(
    "spec", "pod", "llm", "warning", ("engine",), ("spec_decode",),
    ("LLMSpecDecodeAcceptanceLow",), ("SpecDecodeAcceptanceDrop", "vllm-spec-accept-rate-low",
                                      "DraftModelAcceptanceLow"),
    Expr("sum by (namespace, pod) (rate(vllm:spec_decode_num_accepted_tokens_total[10m])) / sum by (namespace, pod) "
         "(rate(vllm:spec_decode_num_draft_tokens_total[10m])) < 0.65", 600, 240, 300, _k("namespace", "pod")),
    "Speculative-decoding acceptance {value_pct} on {pod}",
    "Draft-token acceptance on {namespace}/{pod} fell below 65%; speculative decoding now costs latency.",
    signal="spec", threshold=0.65, direction="down"))
_add(Kind(
    "replicas", "deployment_ksm", "k8s", "warning", ("platform", "k8s"), ("restart",),
    ("InferenceDeploymentDegraded",), ("KubeDeploymentReplicasMismatch",),
    Expr('(kube_deployment_spec_replicas{job="kube-state-metrics"} > kube_deployment_status_replicas_available'
         '{job="kube-state-metrics"}) and (changes(kube_deployment_status_replicas_updated{job="kube-state-metrics"}'
         '[10m]) == 0)', 900, 600, 60, POD),
    "Deployment has not matched the expected number of replicas.",
    "Deployment {namespace}/{deployment} has not matched the expected number of replicas for longer than 15 "
    "minutes.", runbook="kube-prometheus"))
# --- noise kinds (no cascade behind them) ---------------------------------------------------
_add(Kind(
    "disk", "node", "node", "warning", ("platform",), ("other",),
    ("NodeDiskAlmostFull",), ("HostOutOfDiskSpace", "NodeFilesystemAlmostOutOfSpace"),
    Expr('(node_filesystem_avail_bytes{fstype!~"tmpfs|overlay"} * 100) / node_filesystem_size_bytes < 10', 120, 0,
         0, POD),
    "Host out of disk space (instance {instance})",
    "Disk is almost full (< 10% left) on {mountpoint} of {instance}.", signal="disk", threshold=10,
    direction="down"))
_add(Kind(
    "cert", "static", "misc", "warning", ("serving",), ("other",),
    ("CertificateExpiringSoon",), ("SSLCertExpiringSoon", "BlackboxSslCertificateWillExpireSoon"),
    Expr("probe_ssl_earliest_cert_expiry - time() < 86400 * 14", 600, 0, 0, POD),
    "TLS certificate of {instance} expires in {value_int} days",
    "The certificate served at {instance} expires in less than 14 days.", runbook="none"))
_add(Kind(
    "job_failed", "static", "k8s", "warning", ("platform", "k8s"), ("other",),
    ("BatchJobFailed",), ("KubeJobFailed",),
    Expr('kube_job_failed{job="kube-state-metrics"} > 0', 900, 0, 60, POD),
    "Job failed to complete.",
    "Job {namespace}/{job_name} failed to complete. Removing failed job after investigation should clear this "
    "alert.", runbook="kube-prometheus"))
_add(Kind(
    "cpu_throttle", "static", "k8s", "info", ("platform",), ("other",),
    ("ContainerCPUThrottled",), ("CPUThrottlingHigh",),
    Expr('sum(increase(container_cpu_cfs_throttled_periods_total{container!=""}[5m])) by (cluster, container, pod, '
         'namespace) / sum(increase(container_cpu_cfs_periods_total[5m])) by (cluster, container, pod, namespace) '
         '> ( 25 / 100 )', 900, 0, 60, _k("container", "pod", "namespace")),
    "Processes experience elevated CPU throttling.",
    "{value_int}% throttling of CPU in namespace {namespace} for container {container} in pod {pod}.",
    runbook="kube-prometheus"))
_add(Kind(
    "clock", "static", "node", "warning", ("platform",), ("other",),
    ("NodeClockSkew",), ("NodeClockNotSynchronising",),
    Expr('min_over_time(node_timex_sync_status{job="node-exporter"}[5m]) == 0 and node_timex_maxerror_seconds'
         '{job="node-exporter"} >= 16', 600, 0, 60, POD),
    "Clock not synchronising.",
    "Clock at {instance} is not synchronising. Ensure NTP is configured on this host.", runbook="kube-prometheus"))
_add(Kind(
    "gpu_temp", "gpu", "gpu", "warning", ("hardware", "gpu"), ("gpu_error",),
    ("LLMGpuTemperatureHigh",), ("GPUHighTemperature", "DcgmGpuTempHigh"),
    Expr("DCGM_FI_DEV_GPU_TEMP > 85", 300, 0, 60, POD),
    "GPU {gpu} on {host} at {value_int} C", "GPU temperature above 85 C on {host} GPU {gpu}.",
    signal="temp", threshold=85, runbook="none"))


def interval_ns(kind: Kind) -> int:
    return GROUP_INTERVAL_S[kind.group] * NS
