"""A node- or GPU-level fault and the pods on that node whose alerts name no node (`unplaced`).

The topology learns pod->node only from alerts that carry both; when none does, a GPU fault or a
node gone NotReady relates to a pod's crash, restart or Pending on timing alone: the pod is
placed nowhere, the fault's node has no pod the topology knows of, and the effect follows the
fault's onset within a tight lag (gpu_error->restart~unplaced 6m, node_not_ready->restart~unplaced
and ->target_down~unplaced 10m; correlate/catalog.yaml)."""

import itertools
import random
from datetime import timedelta

import pytest

from correlate.batch import correlate
from correlate.catalog import CatalogError, load_catalog
from correlate.engine import Correlator
from correlate.testing import clock, make_alert

CATALOG = load_catalog(use_env=False)
CLUSTER = {"cluster": "edge-ams"}
EMBED = "embed-bge-6d9f7c8b5d-gnjq2"
PHI = "classifier-phi-5b8c7d6f9c-n7w46"


def xid(at: str = "12:40", node: str = "ams-gpu-02", **extra: str):
    """DCGM's Xid alert as dcgm-exporter's DaemonSet pod scrapes it: the node as `Hostname`, the
    GPU as `gpu`/`UUID`, the exporter's own pod (dropped from the scope)."""
    return make_alert(
        "GPUXidError",
        at,
        expr="max_over_time(DCGM_FI_DEV_XID_ERRORS[10m]) > 0",
        Hostname=node,
        UUID="GPU-42f46391-c0fd-aa0d-5b31-7f7997064415",
        gpu="3",
        pod="nvidia-dcgm-exporter-fkq2r",
        namespace="gpu-operator",
        container="nvidia-dcgm-exporter",
        job="nvidia-dcgm-exporter",
        **CLUSTER,
        **extra,
    )


def restarted(pod: str, at, namespace: str = "llm", **extra: str):
    """kube-state-metrics' restart counter: the workload's pod and namespace, no node."""
    return make_alert(
        "EngineContainerRestarted",
        at,
        expr="increase(kube_pod_container_status_restarts_total[5m]) > 0",
        pod=pod,
        namespace=namespace,
        container="vllm",
        job="kube-state-metrics",
        **CLUSTER,
        **extra,
    )


def node_not_ready(at: str = "14:45", node: str = "gpu-node-03"):
    """kube-prometheus KubeNodeNotReady (kube-state-metrics, `node`, for: 15m: fires after its effects)."""
    return make_alert(
        "KubeNodeNotReady",
        at,
        expr='kube_node_status_condition{job="kube-state-metrics",condition="Ready",status="true"} == 0',
        annotations={"description": "{{ $labels.node }} has been unready for more than 15 minutes."},
        node=node,
        condition="Ready",
        status="true",
        job="kube-state-metrics",
        namespace="monitoring",
        **CLUSTER,
    )


def pod_not_ready(pod: str, at: str, namespace: str):
    return make_alert(
        "KubePodNotReady",
        at,
        annotations={
            "description": f"Pod {namespace}/{pod} has been in a non-ready state for longer than 15 minutes.",
            "summary": "Pod has been in a non-ready state for more than 15 minutes.",
        },
        pod=pod,
        namespace=namespace,
        job="kube-state-metrics",
        **CLUSTER,
    )


def incident_of(incidents, alert):
    return next(i for i in incidents if alert.key in i.alert_keys)


def shape(incidents):
    return sorted(
        (i.alert_keys, i.chain, i.edges, tuple((c.alert_key, c.confidence) for c in i.root_candidates))
        for i in incidents
    )


def test_an_xid_roots_the_restarts_of_pods_that_name_no_node():
    fault = xid("12:40")
    a = restarted(EMBED, clock("12:40") + timedelta(seconds=26), namespace="embeddings")
    b = restarted(PHI, clock("12:40") + timedelta(seconds=26), namespace="moderation")
    incidents = correlate([a, fault, b], catalog=CATALOG)
    assert len(incidents) == 1
    incident = incidents[0]
    assert incident.root.alert_key == fault.key
    assert {(e.cause, e.rule, e.relation) for e in incident.edges} == {
        (fault.key, "gpu_error->restart~unplaced", "unplaced")
    }
    assert "timing alone: the pod is placed on no node" in incident.root.explanation


def test_a_node_not_ready_roots_the_not_ready_and_target_down_of_pods_that_name_no_node():
    node = node_not_ready("14:45")  # placed at 14:30 (15 minutes before it fired)
    chat = pod_not_ready("chat-70b-m8zrh7ksq-55tdm", "14:51", "chat")  # placed at 14:36
    target = make_alert(
        "TargetDown", "14:33", expr='up{job="vllm"} == 0', pod="vision-0", namespace="vision", **CLUSTER
    )
    incidents = correlate([chat, target, node], catalog=CATALOG)
    assert len(incidents) == 1
    incident = incidents[0]
    assert incident.root.alert_key == node.key
    assert {(e.cause, e.rule) for e in incident.edges} == {
        (node.key, "node_not_ready->restart~unplaced"),
        (node.key, "node_not_ready->target_down~unplaced"),
    }


def test_a_pod_the_topology_places_on_another_node_stays_apart():
    fault = xid("12:40", node="ams-gpu-02")
    crash = restarted(EMBED, "12:41")
    placing = make_alert("KubePodInfo", "12:42", pod=EMBED, namespace="llm", node="ams-gpu-07", **CLUSTER)
    incidents = correlate([fault, crash, placing], catalog=CATALOG)
    assert incident_of(incidents, fault) is not incident_of(incidents, crash)
    # Without the placing alert the pod is placed nowhere: one incident.
    assert len(correlate([fault, crash], catalog=CATALOG)) == 1


def test_a_restart_long_after_the_faults_lag_stays_apart():
    assert len(correlate([xid("12:40"), restarted(EMBED, "12:50")], catalog=CATALOG)) == 2
    assert len(correlate([node_not_ready("14:45"), pod_not_ready(PHI, "14:56", "llm")], catalog=CATALOG)) == 2


def test_a_restart_before_the_fault_stays_apart():
    # No onset slack: the link rests on timing alone.
    assert len(correlate([xid("12:40"), restarted(EMBED, "12:39")], catalog=CATALOG)) == 2


def test_a_fault_whose_node_has_known_pods_does_not_reach_a_pod_placed_nowhere():
    fault = xid("12:40")
    known = make_alert(
        "KubePodInfo", "12:35", pod="resident-0", namespace="llm", Hostname="ams-gpu-02", **CLUSTER
    )
    crash = restarted(EMBED, "12:41")
    incidents = correlate([fault, known, crash], catalog=CATALOG)
    assert incident_of(incidents, fault) is not incident_of(incidents, crash)


def test_the_pair_is_found_in_any_arrival_order_and_one_at_a_time():
    alerts = [
        xid("12:40"),
        restarted(EMBED, clock("12:40") + timedelta(seconds=26), namespace="embeddings"),
        restarted(PHI, "12:43", namespace="moderation"),
        restarted("unrelated-0", "12:58"),
        node_not_ready("13:20", node="gpu-node-03"),
        pod_not_ready("chat-70b-m8zrh7ksq-55tdm", "13:26", "chat"),
    ]
    expected = shape(correlate(alerts, catalog=CATALOG))
    assert len(expected) == 3
    orders = list(itertools.permutations(alerts))
    for order in random.Random(3).sample(orders, 120):
        engine = Correlator(CATALOG)
        for alert in order:
            engine.add(alert)
        assert shape(engine.incidents()) == expected


def test_a_pod_placed_later_on_another_node_leaves_the_fault():
    fault = xid("12:40", node="ams-gpu-02")
    crash = restarted(EMBED, "12:41")
    placing = make_alert("KubePodInfo", "12:45", pod=EMBED, namespace="llm", node="ams-gpu-07", **CLUSTER)
    engine = Correlator(CATALOG)
    engine.add_many([fault, crash])
    assert len(engine.incidents()) == 1
    changed = engine.add(placing)
    assert any(crash.key in i.alert_keys for i in changed)
    assert engine.incident_of(crash.key).alert_keys != engine.incident_of(fault.key).alert_keys
    assert shape(engine.incidents()) == shape(correlate([placing, crash, fault], catalog=CATALOG))


def test_a_pod_learned_on_the_faults_node_ends_the_timing_link_for_others():
    fault = xid("12:40")
    crash = restarted(EMBED, "12:41")
    known = make_alert(
        "KubePodInfo", "12:48", pod="resident-0", namespace="llm", Hostname="ams-gpu-02", **CLUSTER
    )
    engine = Correlator(CATALOG)
    engine.add_many([crash, fault])
    assert len(engine.incidents()) == 1
    engine.add(known)  # holds from 12:38 on: the topology sees a pod on ams-gpu-02 at 12:41
    assert shape(engine.incidents()) == shape(correlate([known, crash, fault], catalog=CATALOG))
    assert engine.incident_of(crash.key).alert_keys != engine.incident_of(fault.key).alert_keys


def test_random_orders_and_batches_agree_on_a_small_fleet():
    rng = random.Random(5)
    alerts = []
    for hour in range(6):
        base = clock(f"{10 + hour}:00")
        node = f"ams-gpu-0{hour % 3}"
        alerts.append(xid(f"{10 + hour}:00", node=node, gpu_index=str(hour)))
        for number in range(rng.randint(1, 4)):
            alerts.append(restarted(f"pod-{hour}-{number}", base + timedelta(seconds=rng.randint(-90, 500))))
        if hour % 2:
            alerts.append(
                make_alert("KubePodInfo", base, pod=f"pod-{hour}-0", namespace="llm", node=node, **CLUSTER)
            )
    expected = shape(correlate(alerts, catalog=CATALOG))
    for seed in range(6):
        order = alerts[:]
        random.Random(seed).shuffle(order)
        engine = Correlator(CATALOG)
        at = 0
        while at < len(order):
            size = random.Random(seed + at).randint(1, 3)
            engine.add_many(order[at : at + size])
            at += size
        assert shape(engine.incidents()) == expected


def test_unplaced_is_for_causal_rules_only(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text("modes:\n  restart: {same_mode_scope: [same_pod, unplaced]}\n")
    with pytest.raises(CatalogError, match="unplaced"):
        load_catalog(team, use_env=False)


def test_a_pod_placed_later_on_a_gpu_alone_leaves_the_node_fault():
    # A GPU link of a pod alone on its GPU usually changes nothing (being on one GPU is implied by
    # being on one pod, for the catalog): here it ends the pod's `unplaced` link.
    node = node_not_ready("14:45")
    chat = pod_not_ready("chat-70b-m8zrh7ksq-55tdm", "14:51", "chat")
    gpu = make_alert(
        "GPUFramebufferNearlyFull",
        "14:40",
        pod="chat-70b-m8zrh7ksq-55tdm",
        namespace="chat",
        UUID="GPU-9427c248-39ae-1d5b-4116-783b9fcf9bc2",
        **CLUSTER,
    )
    engine = Correlator(CATALOG)
    engine.add_many([node, chat])
    assert len(engine.incidents()) == 1
    engine.add(gpu)
    assert shape(engine.incidents()) == shape(correlate([gpu, chat, node], catalog=CATALOG))
    assert engine.incident_of(chat.key).alert_keys != engine.incident_of(node.key).alert_keys
