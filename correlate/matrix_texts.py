"""The words the suggested root-cause matrix uses, kept as data: per failure mode, what happened
(direct cause) and which design defect let it happen (system defect), from DOMAIN.md's failure
modes and defences. Cited as evidence `{kind: catalog, id: "defect:<mode>"}`."""

from __future__ import annotations

DIRECT = {
    "oom": "memory exhausted / OOM",
    "preemption": "KV blocks preempted (swap or recompute)",
    "timeout": "client timeouts leaving ghost requests generating",
    "kv_fragmentation": "KV block allocation conflict: fragmentation over 25%, free pages not contiguous",
    "hot_instance": "a hot prefix concentrated traffic on one replica",
    "numeric": "NaN/Inf in one sequence poisoned its batch",
    "gpu_error": "GPU hardware error (Xid/ECC)",
    "restart": "containers crashed and restarted",
    "node_not_ready": "a node stopped posting status (NotReady/unreachable) and its pods failed with it",
    "queueing": "requests queued on the surviving replicas",
    "slo_ttft": "TTFT SLO breached",
    "slo_tpot": "TPOT SLO breached",
    "slo_itl": "ITL jitter SLO breached",
    "spec_decode": "speculative-decoding acceptance dropped",
    "error_rate": "error rate rose",
    "target_down": "metrics target down",
    "change": "a change",
}

DEFECT = {
    "kv_fragmentation": (
        "no fragmentation reclamation (no defragmenter, no compaction) and no dynamic block size"
    ),
    "oom": (
        "no admission control on KV bytes: sequences admitted beyond the free KV budget, "
        "no ~10% free-block reserve"
    ),
    "preemption": "one preemption policy for all lengths (recompute short < 2K, swap long > 8K)",
    "timeout": "requests not reaped on client disconnect; no chunked prefill",
    "hot_instance": "prefix-hash routing without prefix-aware balancing",
    "numeric": "no batch fence: logits not checked per request, poisoned sequence not quarantined",
    "gpu_error": "no automatic cordon of a GPU reporting Xid/ECC errors",
    "restart": "rescheduling (~90 s) with no spare capacity for the survivors",
    "node_not_ready": "no spare capacity to reschedule a lost node's pods on",
    "queueing": "no admission limit or rate limiting in front of the surviving replicas",
    "slo_ttft": "no graceful-degradation trigger tied to the TTFT SLO",
    "slo_tpot": "no graceful-degradation trigger tied to the TPOT SLO",
    "slo_itl": "no graceful-degradation trigger tied to ITL jitter",
    "spec_decode": "no automatic fallback when speculative acceptance drops below 65%",
    "error_rate": "no circuit breaker in front of the failing replicas",
    "target_down": "no alert on missing evidence while replicas were down",
    "change": "changes reach production without a canary or drift check",
}

# A judgement made on one alert while related evidence was already red: nothing put them side by side.
NO_CORRELATION = "no alert correlation: the alert was judged alone while related evidence was already red"

# Which failure mode a band's red crossing stands for.
BAND_MODES = {
    "kv_pool_usage": "oom",
    "framebuffer_headroom": "oom",
    "framebuffer_ratio": "oom",
    "kv_fragmentation": "kv_fragmentation",
    "queue_wait": "queueing",
    "batch_fill": "queueing",
    "ttft_p99": "slo_ttft",
    "tpot_p99": "slo_tpot",
    "itl_jitter": "slo_itl",
    "spec_acceptance": "spec_decode",
}
# How a band's red crossing reads as a direct cause in its layer.
BAND_DIRECT = {
    "framebuffer_ratio": "GPU memory exhausted",
    "framebuffer_headroom": "GPU memory exhausted",
    "kv_pool_usage": "KV-cache pool exhausted",
    "kv_fragmentation": "KV fragmentation over 25%",
    "queue_wait": "requests queued",
    "batch_fill": "batches under-filled",
    "ttft_p99": "TTFT SLO breached",
    "tpot_p99": "TPOT SLO breached",
    "itl_jitter": "ITL jitter SLO breached",
    "spec_acceptance": "speculative acceptance dropped",
}

FALSY = {"false", "no", "0", "none", "n", "unreviewed", "not reviewed", ""}
REVIEW_KEYS = ("reviewed", "review", "approved", "peer_reviewed", "change_reviewed")
STAGING_KEYS = ("verified_in_staging", "staging_verified", "tested_in_staging", "staging")
