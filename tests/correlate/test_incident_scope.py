"""Incident.scope: the scope fields every member naming them agrees on, in first-seen order."""

from __future__ import annotations

from datetime import timedelta

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.testing import BASE_DAY, make_alert

CATALOG = load_catalog(use_env=False)


def scope_member_by_member(incident) -> dict[str, str]:
    common: dict[str, str] = {}
    conflicting: set[str] = set()
    for member in incident.members:
        for name, value in member.scope.as_dict().items():
            if name in conflicting:
                continue
            if common.setdefault(name, value) != value:
                conflicting.add(name)
                del common[name]
    return common


def test_scope_is_what_all_members_agree_on_in_first_seen_order():
    alerts = []
    for minute in range(0, 60, 3):  # one pod's alerts again and again, its siblings', the model's
        at = BASE_DAY + timedelta(minutes=minute)
        pod = f"vllm-llama-7d9f8b6c5d-{minute % 9:05d}"
        alerts.append(
            make_alert(
                "LLMKVFragmentationHigh", at, cluster="prod", namespace="llm", pod=pod, model_name="llama"
            )
        )
        alerts.append(
            make_alert(
                "LLMQueueWaitHigh",
                at + timedelta(seconds=30),
                cluster="prod",
                namespace="llm",
                pod=pod,
                model_name="llama",
                node=f"gpu-node-{minute % 2}",
            )
        )
        alerts.append(
            make_alert("LLMTTFTp99High", at + timedelta(minutes=1), cluster="prod", model_name="llama")
        )
    incidents = correlate(alerts, catalog=CATALOG)
    big = max(incidents, key=lambda incident: len(incident.members))
    assert len(big.members) > 20 and len({id(m.scope) for m in big.members}) < len(big.members)
    for incident in incidents:
        assert list(incident.scope.items()) == list(scope_member_by_member(incident).items())
    # Pods and nodes differ; the TTFT alerts name no namespace or deployment, so those stand.
    assert list(big.scope.items()) == [
        ("cluster", "prod"),
        ("namespace", "llm"),
        ("deployment", "vllm-llama"),
        ("model", "llama"),
    ]
