"""The pack speaks Rootline's language: contract labels, the catalog agrees by name alone, real
metric names with their gotchas, and renamed metrics matched inside one rule."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import yaml

from correlate.catalog import FAILURE_MODES, LAYERS
from correlate.classify import classify
from correlate.events import Alert
from incidents.runbooks import RULES_DIR, load_sources

STARTS = datetime(2026, 11, 29, 1, 30, tzinfo=UTC)
SOURCES = {name: data for name, data in load_sources()}
ALL_RULES = [(name, rule) for name, data in SOURCES.items() for rule in data["rules"]]
RENAMED = [
    # (older name, its successor): where the older one is read, the newer one is read in the same rule
    ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
    ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
    ("inference_objective_", "llm_d_epp_"),
    ("inference_model_", "llm_d_epp_"),
    ("llm_kv_cache_fragmentation_ratio", "llmops:kv_cache_fragmentation:ratio"),
    ("(rate(time_to_first_token_seconds_bucket", "trtllm_time_to_first_token_seconds_bucket"),
    ("sglang:num_retracted_reqs", "sglang:num_retracted_requests_total"),
]


def pack_names(alerts) -> list[str]:
    return [a.name for a in alerts]


def test_the_pack_covers_every_source_and_the_six_failure_modes(alerts):
    assert {a.source for a in alerts} == {
        "vllm.yml",
        "sglang.yml",
        "tensorrt-llm.yml",
        "triton.yml",
        "dcgm.yml",
        "kubernetes.yml",
        "gateway.yml",
        "kv-fragmentation.yml",
        "rootline.yml",
    }
    modes = {a.failure_mode for a in alerts}
    assert {"oom", "preemption", "timeout", "kv_fragmentation", "hot_instance", "numeric"} <= modes
    assert {"slo_ttft", "slo_tpot", "slo_itl", "queueing", "spec_decode", "gpu_error", "target_down"} <= modes


def test_every_alert_carries_contract_labels_and_annotations(alerts):
    assert len(set(pack_names(alerts))) == len(alerts)
    for alert in alerts:
        assert alert.severity in ("critical", "warning", "info"), alert.name
        assert alert.layer in LAYERS and alert.layer != "unknown", alert.name
        assert alert.failure_mode in FAILURE_MODES and alert.failure_mode != "other", alert.name
        assert alert.summary and alert.description, alert.name
        assert alert.runbook_url == f"http://127.0.0.1:8000/runbooks/{alert.name}/"


def test_shipped_files_carry_the_labels_rootline_reads_first():
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert {"severity", "layer", "failure_mode"} <= set(rule["labels"]), rule["alert"]
                    assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), rule[
                        "alert"
                    ]


@pytest.mark.parametrize("with_labels", [False, True], ids=["name-alone", "with-labels"])
def test_the_catalog_classifies_each_alert_as_its_labels_say(alerts, packaged_catalog, with_labels):
    wrong = []
    for alert in alerts:
        labels = {"alertname": alert.name}
        if with_labels:
            labels.update(severity=alert.severity, layer=alert.layer, failure_mode=alert.failure_mode)
        got = classify(Alert(fingerprint="x", starts_at=STARTS, labels=labels), packaged_catalog)
        if (got.layer, got.failure_mode) != (alert.layer, alert.failure_mode):
            wrong.append(
                f"{alert.name}: labels {alert.layer}/{alert.failure_mode}, "
                f"catalog {got.layer}/{got.failure_mode}"
            )
    assert wrong == []


def test_counters_are_queried_with_their_wire_names():
    """prometheus_client appends _total to vLLM/SGLang/TRT-LLM counters; Triton's C++ counters have none."""
    for source, rule in ALL_RULES:
        expr = rule["expr"]
        for metric in re.findall(r"(?:rate|increase)\(([a-zA-Z_:][a-zA-Z0-9_:]*)", expr):
            if metric.startswith(("nv_inference_", "DCGM_", "envoy_")):
                continue  # Triton's C++ counters, DCGM counters and Envoy stats carry no _total
            assert metric.endswith(("_total", "_bucket", "_sum", "_count")), f"{source}: {metric} in {expr}"
        assert not re.search(r"nv_inference_\w+_total", expr), f"{source}: Triton counters carry no _total"
        assert "vllm:num_preemptions[" not in expr


def test_fractions_named_perc_are_compared_as_fractions():
    for source, rule in ALL_RULES:
        for value in re.findall(
            r"(?:usage_perc|token_usage|kv_cache_utilization|usage:ratio)\S*\s*[<>]\s*([\d.]+)", rule["expr"]
        ):
            assert float(value) <= 1, (
                f"{source}: {rule.get('alert', rule.get('record'))} compares a fraction with {value}"
            )


def test_rate_windows_are_at_least_four_scrape_intervals():
    for source, rule in ALL_RULES:
        for amount, unit in re.findall(r"\[(\d+)([smhd])\]", rule["expr"]):
            seconds = int(amount) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
            assert seconds >= 120, f"{source}: window [{amount}{unit}] is under 4 x 30 s scrapes"


def test_histogram_quantiles_read_bucket_rates_by_le():
    for source, rule in ALL_RULES:
        for call in re.findall(r"histogram_quantile\(([^,]+),\s*(.+)", rule["expr"]):
            argument = call[1]
            assert ("_bucket[" in argument and "le" in argument) or "_bucket:rate5m" in argument, (
                f"{source}: {argument}"
            )
    records = {rule["record"]: rule["expr"] for _, rule in ALL_RULES if "record" in rule}
    for name, expr in records.items():
        if name.endswith("_bucket:rate5m"):
            assert "_bucket[" in expr and ", le)" in expr


def test_ratios_are_guarded_against_division_by_zero():
    for source, rule in ALL_RULES:
        expr = " ".join(rule["expr"].split())
        for denominator in re.findall(r"/\s*(\(.*)", expr):
            depth, end = 0, 0
            for index, char in enumerate(denominator):
                depth += {"(": 1, ")": -1}.get(char, 0)
                if depth == 0:
                    end = index
                    break
            assert "> 0" in denominator[: end + 1], (
                f"{source}: unguarded division in {rule.get('alert', rule.get('record'))}"
            )


@pytest.mark.parametrize("older,newer", RENAMED)
def test_a_renamed_metric_is_matched_inside_one_rule(older, newer):
    records = {rule["record"]: rule["expr"] for _, rule in ALL_RULES if "record" in rule}

    def reads(expr: str) -> str:
        return expr + "".join(records[name] for name in records if name in expr)

    readers = [(source, rule) for source, rule in ALL_RULES if older in reads(rule["expr"])]
    assert readers, f"nothing reads {older}"
    for source, rule in readers:
        assert newer in reads(rule["expr"]), (
            f"{source}: {rule.get('alert', rule.get('record'))} reads {older} without {newer}"
        )


def test_preallocated_gpu_memory_is_judged_by_headroom_not_the_raw_ratio():
    dcgm = SOURCES["dcgm.yml"]["rules"]
    for rule in dcgm:
        if "FB_USED" in rule["expr"]:
            assert (
                "unless on (namespace, pod)" in rule["expr"] and "vllm:kv_cache_usage_perc" in rule["expr"]
            ), rule["alert"]


# The weekly review reads these by name (incidents/review/objectives.py), per model and source;
# a source records a TPOT, an ITL or an availability only where its metrics carry it.
SLO_RECORDS = {
    "vllm": {
        "llmops:slo_ttft_p99_seconds:5m",
        "llmops:slo_tpot_p99_seconds:5m",
        "llmops:slo_itl_jitter_seconds:5m",
        "llmops:slo_requests:rate5m",
        "llmops:slo_request_errors:rate5m",
    },
    "sglang": {"llmops:slo_ttft_p99_seconds:5m", "llmops:slo_itl_jitter_seconds:5m"},
    "trtllm": {"llmops:slo_ttft_p99_seconds:5m", "llmops:slo_tpot_p99_seconds:5m"},
    "gateway": {"llmops:slo_requests:rate5m", "llmops:slo_request_errors:rate5m"},
}


def test_slo_recordings_are_per_model_and_kept_apart_by_their_source():
    """Each group's `llmops:slo_*` series carry a constant `slo_source` (the export keeps a record's
    labels), so one name recorded by several groups never collides, and are summed by `model_name`."""
    found: dict[str, set[str]] = {}
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("record", "")
                if not name.startswith("llmops:slo_"):
                    continue
                source = (rule.get("labels") or {}).get("slo_source")
                assert source, f"{path.name}: {name} has no slo_source label"
                assert name not in found.setdefault(source, set()), f"{path.name}: {name} twice for {source}"
                found[source].add(name)
                groupings = re.findall(r"\bsum by \(([^)]*)\)", rule["expr"])
                assert groupings and groupings[0] in ("model_name", "model_name, le"), f"{path.name}: {name}"
                assert all("model_name" in g.split(", ") for g in groupings), f"{path.name}: {name}"
    assert found == SLO_RECORDS
