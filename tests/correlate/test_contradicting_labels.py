"""When a team's labels contradict each other or the alert itself (class 1 of the unseen fleets).

A `failure_mode` label copied from another rule's template ("slo_ttft" on a DCGM Xid rule) is
outvoted when the alert's own `layer` label and its name or rule expression agree on another
mode; an SLO-flavoured label on an alert whose name or rule says what broke keeps that mode. A
mode label that agrees with its layer, or that has no layer label against it, still wins (the
contract's "explicit labels win"), and the explanation says which evidence decided.
"""

from __future__ import annotations

import pytest

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.classify import Classifier
from correlate.testing import make_alert

CLASSIFIER = Classifier(load_catalog(use_env=False))


@pytest.mark.parametrize(
    "alert, mode",
    [
        # dcgm-exporter's Xid rule (NVIDIA/dcgm-exporter, gpu-operator's sample rules)
        (make_alert("GPUXidErrors", "01:00", layer="hardware", failure_mode="slo_ttft"), "gpu_error"),
        # kubernetes-mixin's crash loop, labelled by a team template meant for latency rules
        (make_alert("KubePodCrashLooping", "01:00", layer="platform", failure_mode="ttft"), "restart"),
        # a vague name: the rule's vLLM metric decides, the layer label agrees with it
        (
            make_alert(
                "InferencePage7",
                "01:00",
                expr="rate(vllm:num_preemptions_total[5m]) > 1",
                layer="engine",
                failure_mode="error_rate",
            ),
            "preemption",
        ),
    ],
)
def test_a_mode_label_against_its_layer_label_and_the_alerts_own_evidence_is_outvoted(alert, mode):
    got = CLASSIFIER.classify(alert)
    assert got.failure_mode == mode
    assert got.source.startswith("over-label:")


@pytest.mark.parametrize(
    "name, mode",
    [
        ("DCGMXidErrors", "gpu_error"),  # dcgm-exporter
        ("VLLMPreemptionsHigh", "preemption"),  # vLLM's example rules
        ("KubePodCrashLooping", "restart"),  # kubernetes-mixin
    ],
)
def test_an_slo_flavoured_label_does_not_make_a_fault_a_latency_breach(name, mode):
    assert CLASSIFIER.classify(make_alert(name, "01:00", failure_mode="SLO")).failure_mode == mode


@pytest.mark.parametrize(
    "alert, mode",
    [
        # labels agree with each other: a GPU's memory can run out (layer hardware, mode oom)
        (make_alert("GPUXidErrors", "01:00", layer="hardware", failure_mode="oom"), "oom"),
        # no layer label against it: the mode label wins, as the contract says
        (make_alert("VLLMPreemptionsHigh", "01:00", failure_mode="oom"), "oom"),
        # an SLO label on a name that says nothing keeps its latency reading
        (make_alert("TeamPageSevere", "01:00", failure_mode="SLO"), "slo_ttft"),
        (make_alert("ChatTTFTBudgetBurn", "01:00", failure_mode="SLO"), "slo_ttft"),
    ],
)
def test_labels_that_do_not_contradict_each_other_still_win(alert, mode):
    assert CLASSIFIER.classify(alert).failure_mode == mode


def test_the_explanation_names_the_evidence_that_decided_the_roots_mode():
    xid = make_alert(
        "GPUXidErrors", "03:00", cluster="c1", layer="hardware", failure_mode="slo_ttft",
        Hostname="gpu-node-3", gpu="2", pod="llama-70b-7d9f8b6c4-x2k9p", namespace="llm",
    )  # fmt: skip
    crash = make_alert(
        "KubePodCrashLooping", "03:04", cluster="c1", pod="llama-70b-7d9f8b6c4-x2k9p", namespace="llm"
    )
    [incident] = correlate([xid, crash])
    assert incident.root is not None and incident.root.alert_key == xid.key
    text = incident.root.explanation
    assert "contradicts its layer label (hardware)" in text and "its name agrees" in text


def test_the_explanation_says_when_the_mode_label_overruled_the_name():
    kv = make_alert(
        "VLLMKVCacheUsageHigh", "03:00", cluster="c1", failure_mode="kv_fragmentation",
        pod="chat-7d9f8b6c4-x2k9p", namespace="chat", model_name="chat-13b",
    )  # fmt: skip
    oom = make_alert("KubePodOOMKilled", "03:03", cluster="c1", pod="chat-7d9f8b6c4-x2k9p", namespace="chat")
    [incident] = correlate([kv, oom])
    assert incident.root is not None and incident.root.alert_key == kv.key
    assert "failure_mode label decided the mode" in incident.root.explanation
    assert "its name reads as" in incident.root.explanation
