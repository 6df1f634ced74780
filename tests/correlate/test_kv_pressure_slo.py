"""A saturated KV pool (vLLM's kv_cache_usage_perc, SGLang's token_usage, classified with memory
exhaustion) preempts running sequences, so decoding stalls: the model's ITL jitter and TPOT
breaches that follow are its effects; another model's breach at the same time is not."""

from __future__ import annotations

from correlate.batch import correlate
from correlate.testing import make_alert


def saturation(name: str, expr: str, pod: str, model: str):
    return make_alert(name, "09:35", expr=expr, cluster="c1", pod=pod, model_name=model)


def breaches(model: str, namespace: str, at: str = "09:38"):
    return [
        make_alert("ITLJitterHigh", at, cluster="c1", model_name=model, namespace=namespace),
        make_alert("TPOTHigh", at, cluster="c1", model_name=model, namespace=namespace),
    ]


def test_a_saturated_kv_pool_roots_its_models_itl_and_tpot_breaches_in_either_engines_words():
    for cause in (
        saturation(
            "LLMDKVCacheSaturation",
            "vllm:kv_cache_usage_perc > 0.95",
            "llama-4-scout-decode-8d8dx7whwv-qt9b8",
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        ),
        saturation(
            "SGLangTokenUsageHigh",
            "sglang:token_usage > 0.95",
            "llama-4-scout-decode-8d8dx7whwv-qt9b8",
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        ),
    ):
        effects = breaches("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llm-d")
        [incident] = correlate([cause, *effects])
        assert incident.root is not None and incident.root.alert_key == cause.key
        assert len(incident.members) == 3


def test_another_models_breaches_at_the_same_time_stay_apart():
    cause = saturation(
        "VLLMKVCacheUsageHigh", "vllm:kv_cache_usage_perc > 0.95", "chat-a-7d9f8b6c4-x2k9p", "chat-a-13b"
    )
    others = breaches("embed-b-7b", "embed")
    incidents = correlate([cause, *others])
    assert not any(cause.key in {m.key for m in i.members} and len(i.members) > 1 for i in incidents)
