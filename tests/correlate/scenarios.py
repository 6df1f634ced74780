"""Hand-written alert stories shared by the engine tests (plain functions, no fixtures)."""

from correlate.testing import make_alert, make_change

POD = "vllm-llama-7d9f8b6c5d-x2k4p"
SIBLING = "vllm-llama-7d9f8b6c5d-q8r7s"
LABELS = {"cluster": "prod-a", "namespace": "llm"}


def fragmentation_chain(
    shift: str = "00:00", pod: str = POD, sibling: str = SIBLING, cluster: str = "prod-a"
):
    """The March incident: fragmentation (a slow 15m rule, fires last) -> OOM -> crash loop ->
    queueing -> TTFT."""
    h, m = (int(x) for x in shift.split(":"))

    def at(hhmm: str) -> str:
        hh, mm = (int(x) for x in hhmm.split(":"))
        total = (hh + h) * 60 + mm + m
        return f"{total // 60:02d}:{total % 60:02d}"

    labels = {**LABELS, "cluster": cluster}
    return [
        make_alert("LLMKVCachePoolUtilizationHigh", at("01:50"), pod=pod, model_name="llama", **labels),
        make_alert("LLMContainerOOMKilled", at("02:00"), pod=pod, **labels),
        make_alert(
            "LLMKVFragmentationHigh",
            at("02:02"),
            expr="avg_over_time(llmops:kv_cache_fragmentation:ratio[15m]) > 0.25",
            pod=pod,
            **labels,
        ),
        make_alert("KubePodCrashLooping", at("02:04"), pod=pod, **labels),
        make_alert("LLMQueueWaitHigh", at("02:07"), pod=sibling, model_name="llama", **labels),
        make_alert("LLMTTFTp99High", at("02:10"), model_name="llama", **labels),
    ]


def unrelated_early_alert():
    return make_alert("HostDiskWillFillIn4Hours", "01:40", instance="n9:9100", job="node-exporter", **LABELS)


def deploy_change(at: str = "01:30"):
    return make_change(
        "Deploy vllm-llama v0.12", at, cluster="prod-a", namespace="llm", deployment="vllm-llama"
    )
