import heapq
import random
from dataclasses import fields

from scenarios import LABELS, POD, SIBLING, deploy_change, fragmentation_chain, unrelated_early_alert

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.events import RESOLVED, Alert
from correlate.ranking import _reach, _Reachability, rank
from correlate.results import Edge, Exclude, FalsePositive, Member, Merge, Split
from correlate.testing import BASE_DAY, clock, make_alert
from correlate.topology import Scope

CATALOG = load_catalog(use_env=False)


def names(incident):
    return sorted(m.alertname for m in incident.members)


def root_name(incident):
    return incident.member(incident.root.alert_key).alertname


def only(incidents, alertname):
    found = [i for i in incidents if alertname in names(i)]
    assert len(found) == 1, [names(i) for i in incidents]
    return found[0]


def test_cascade_is_one_incident_with_the_slow_rule_as_root():
    incidents = correlate(fragmentation_chain(), catalog=CATALOG)
    assert len(incidents) == 1
    assert root_name(incidents[0]) == "LLMKVFragmentationHigh"


def test_root_explanation_names_rule_lag_and_relation():
    incident = correlate(fragmentation_chain(), catalog=CATALOG)[0]
    text = incident.root.explanation
    assert "rule fragmentation->" in text and "same pod" in text and "from 01:47" in text
    assert 0 < incident.root.confidence <= 1
    assert incident.root_candidates == tuple(sorted(incident.root_candidates, key=lambda c: -c.confidence))


def test_chain_runs_from_cause_to_effect():
    incident = correlate(fragmentation_chain(), catalog=CATALOG)[0]
    order = [incident.member(k).alertname for k in incident.chain]
    assert order[0] == "LLMKVFragmentationHigh"
    assert (
        order.index("LLMContainerOOMKilled")
        < order.index("KubePodCrashLooping")
        < order.index("LLMTTFTp99High")
    )
    for edge in incident.edges:
        assert incident.chain.index(edge.cause) < incident.chain.index(edge.effect)


def test_edges_carry_rule_and_lag():
    incident = correlate(fragmentation_chain(), catalog=CATALOG)[0]
    by_effect = {incident.member(e.effect).alertname: e for e in incident.edges}
    crash = by_effect["KubePodCrashLooping"]
    assert crash.rule == "oom->restart"
    assert crash.lag_seconds == 240


def test_an_unrelated_alert_that_fired_first_is_not_the_root():
    incidents = correlate(fragmentation_chain() + [unrelated_early_alert()], catalog=CATALOG)
    incident = only(incidents, "LLMContainerOOMKilled")
    assert "HostDiskWillFillIn4Hours" not in names(incident)
    assert root_name(incident) == "LLMKVFragmentationHigh"


def test_unknown_alerts_still_group_with_their_pod():
    odd = make_alert("TeamXCustomThing", "02:01", pod=POD, **LABELS)
    incident = only(correlate(fragmentation_chain() + [odd], catalog=CATALOG), "LLMContainerOOMKilled")
    assert "TeamXCustomThing" in names(incident)
    assert root_name(incident) == "LLMKVFragmentationHigh"


def test_recurrence_an_hour_later_is_a_new_incident():
    first = fragmentation_chain()
    again = fragmentation_chain(shift="01:15")
    incidents = correlate(first + again, catalog=CATALOG)
    assert len(incidents) == 2
    assert all(len(i.members) == 6 for i in incidents)


def test_resolved_and_quiet_incident_stops_absorbing_alerts():
    resolved = make_alert("LLMContainerOOMKilled", "02:00", ends_at="02:01", pod=POD, **LABELS)
    later = make_alert("LLMContainerOOMKilled", "02:14", pod=SIBLING, **LABELS)
    assert len(correlate([resolved, later], catalog=CATALOG)) == 2
    still_firing = make_alert("LLMContainerOOMKilled", "02:00", pod=POD, **LABELS)
    assert len(correlate([still_firing, later], catalog=CATALOG)) == 1


def test_incident_has_a_maximum_span():
    flapping = [
        make_alert("LLMQueueWaitHigh", f"{h:02d}:{m:02d}", pod=POD, **LABELS)
        for h in range(0, 8)
        for m in (0, 10, 20, 30, 40, 50)
    ]
    incidents = correlate(flapping, catalog=CATALOG)
    span = CATALOG.settings.max_span
    assert len(incidents) > 1
    for incident in incidents:
        assert max(m.starts_at for m in incident.members) - incident.started_at <= span


def test_an_alert_linking_two_open_incidents_merges_them():
    a = make_alert("LLMContainerOOMKilled", "02:00", pod=POD, **LABELS)
    b = make_alert("DCGMXidErrors", "02:00", Hostname="gpu-node-3", gpu="1", **LABELS)
    bridge = make_alert(
        "LLMGpuFramebufferExhausted",
        "02:03",
        pod="dcgm-exporter-k2x4p",
        exported_pod=POD,
        Hostname="gpu-node-3",
        gpu="1",
        **LABELS,
    )
    assert len(correlate([a, b], catalog=CATALOG)) == 2
    merged = correlate([a, b, bridge], catalog=CATALOG)
    assert len(merged) == 1


def test_clusters_never_mix():
    incidents = correlate(fragmentation_chain() + fragmentation_chain(cluster="prod-b"), catalog=CATALOG)
    assert len(incidents) == 2


def test_change_is_a_suspect_for_its_scope_within_half_an_hour():
    incident = only(
        correlate(fragmentation_chain() + [deploy_change("01:30")], catalog=CATALOG), "LLMContainerOOMKilled"
    )
    assert "Deploy vllm-llama v0.12" in names(incident)
    assert root_name(incident) == "Deploy vllm-llama v0.12"
    too_early = correlate(fragmentation_chain() + [deploy_change("00:30")], catalog=CATALOG)
    assert len(too_early) == 2


def test_a_change_causes_a_slow_rule_that_fired_after_it_though_its_window_began_before():
    """A 10-minute average that fires 6 minutes after a deploy is placed 4 minutes before it
    (its window's start); the deploy still caused it. One that fired before the deploy did not."""
    window = "avg_over_time(vllm:spec_decode_draft_acceptance_rate[10m]) < 0.4"
    slow = make_alert("SpecDecodeAcceptanceLow", "01:36", expr=window, pod=POD, **LABELS)
    before = make_alert(
        "LLMRequestErrorsHigh",
        "01:29",
        expr="sum(rate(vllm:request_failure_total[10m])) > 1",
        pod=SIBLING,
        **LABELS,
    )
    for order in ([deploy_change("01:30"), slow, before], [slow, before, deploy_change("01:30")]):
        incidents = correlate(order, catalog=CATALOG)
        incident = only(incidents, "Deploy vllm-llama v0.12")
        assert root_name(incident) == "Deploy vllm-llama v0.12"
        assert [e.rule for e in incident.edges] == ["change->any"]
        assert incident.edges[0].lag_seconds == 6 * 60  # from the deploy to when the rule fired
        assert any(
            m.alertname == "SpecDecodeAcceptanceLow" and m.starts_at == clock("01:36")
            for m in incident.members
        )
        assert "LLMRequestErrorsHigh" not in names(incident)  # fired before the deploy


def test_a_root_whose_sibling_holds_the_causal_edge_is_explained_through_it():
    """Two acceptance drops on sibling pods are one trouble; the engine keeps one edge from that
    trouble to the TPOT breach (the later drop's). The earlier drop, the root, is explained
    through its sibling, not as linked to nothing."""
    window = "avg_over_time(vllm:spec_decode_draft_acceptance_rate[10m]) < 0.4"
    first = make_alert(
        "SpecDecodeAcceptanceDrop", "01:31", expr=window, pod=POD, model_name="llama", **LABELS
    )
    second = make_alert(
        "SpecDecodeAcceptanceDrop", "01:34", expr=window, pod=SIBLING, model_name="llama", **LABELS
    )
    tpot = make_alert("LLMTPOTP99SLOBreach", "01:25", model_name="llama", **LABELS)
    [incident] = correlate([first, second, tpot], catalog=CATALOG)
    root = incident.member(incident.root.alert_key)
    assert root.scope.pod == POD
    assert [
        incident.member(e.cause).scope.pod for e in incident.edges if e.rule.startswith("spec_decode")
    ] == [SIBLING]
    text = incident.root.explanation
    assert f"is the same trouble as SpecDecodeAcceptanceDrop on {SIBLING}" in text, text
    assert (
        "LLMTPOTP99SLOBreach" in text
        and "rule spec_decode->slo_tpot" in text
        and "no causal rule" not in text
    )


def test_change_elsewhere_is_not_a_suspect():
    other = make_alert(
        "LLMContainerOOMKilled", "02:00", pod="sglang-qwen-0", cluster="prod-a", namespace="llm"
    )
    incidents = correlate([deploy_change("01:50"), other], catalog=CATALOG)
    assert len(incidents) == 2


def test_resolved_notification_updates_the_occurrence_end():
    firing = make_alert("LLMContainerOOMKilled", "02:00", pod=POD, **LABELS)
    resolved = Alert(
        firing.fingerprint,
        firing.starts_at,
        firing.labels,
        firing.annotations,
        clock("02:05"),
        RESOLVED,
        firing.generator_url,
    )
    correlator = Correlator(CATALOG)
    correlator.add(firing)
    assert correlator.incident_of(firing.key).ended_at is None
    [incident] = correlator.add(resolved)
    assert len(incident.members) == 1
    assert incident.ended_at == clock("02:05")


def test_late_arrival_is_placed_by_event_time():
    chain = fragmentation_chain()
    correlator = Correlator(CATALOG)
    for alert in chain[1:]:
        correlator.add(alert)
    affected = correlator.add(chain[0])
    assert len(affected) == 1 and len(affected[0].members) == 6
    assert [i.alert_keys for i in correlator.incidents()] == [
        i.alert_keys for i in correlate(chain, catalog=CATALOG)
    ]


def test_learned_pod_to_node_link_regroups_earlier_alerts():
    # 10 minutes after the Xid: beyond what timing alone links (gpu_error->restart~unplaced, 6m).
    oom = make_alert("LLMEngineContainerCrashLoop", "02:10", pod=POD, **LABELS)
    xid = make_alert("DCGMXidErrors", "02:00", Hostname="gpu-node-3", gpu="1", **LABELS)
    teacher = make_alert("KubePodInfoNode", "02:09", pod=POD, node="gpu-node-3", **LABELS)
    correlator = Correlator(CATALOG)
    correlator.add(oom)
    correlator.add(xid)
    assert len(correlator.incidents()) == 2
    correlator.add(teacher)
    grouped = only(correlator.incidents(), "DCGMXidErrors")
    assert "LLMEngineContainerCrashLoop" in names(grouped)
    assert [i.alert_keys for i in correlator.incidents()] == [
        i.alert_keys for i in correlate([teacher, xid, oom], catalog=CATALOG)
    ]


def test_a_link_learned_hours_later_does_not_regroup_the_past():
    crash = make_alert("LLMEngineContainerCrashLoop", "02:10", pod=POD, **LABELS)
    xid = make_alert("DCGMXidErrors", "02:00", Hostname="gpu-node-3", gpu="1", **LABELS)
    teacher = make_alert("KubePodInfoNode", "05:00", pod=POD, node="gpu-node-3", **LABELS)
    assert len(correlate([crash, xid, teacher], catalog=CATALOG)) == 3


def test_merge_decision_survives_later_alerts():
    a = fragmentation_chain()
    b = fragmentation_chain(cluster="prod-b")
    decisions = [Merge((a[0].key, b[0].key))]
    correlator = Correlator(CATALOG, decisions)
    for alert in a[:3] + b[:3]:
        correlator.add(alert)
    for alert in a[3:] + b[3:]:
        correlator.add(alert)
    incidents = correlator.incidents()
    assert len(incidents) == 1 and len(incidents[0].members) == 12


def test_split_decision_is_never_undone():
    chain = fragmentation_chain()
    crash = chain[3]
    correlator = Correlator(CATALOG)
    correlator.add_many(chain[:4])
    changed = correlator.decide(Split((crash.key,)))
    assert any(i.alert_keys == (crash.key,) for i in changed)
    correlator.add_many(chain[4:])
    incidents = correlator.incidents()
    assert len(incidents) == 2
    assert any(i.alert_keys == (crash.key,) for i in incidents)


def test_a_split_after_a_merge_takes_its_alerts_out_of_the_merged_incident():
    a = fragmentation_chain()
    b = fragmentation_chain(cluster="prod-b")
    every = tuple(alert.key for alert in a + b)  # a merge names every alert of both incidents
    off = a[-1].key
    incidents = correlate(a + b, decisions=[Merge(every), Split((off,))], catalog=CATALOG)
    assert sorted(len(i.members) for i in incidents) == [1, 11]
    # and a merge after the split brings it back: the later decision wins
    incidents = correlate(a + b, decisions=[Split((off,)), Merge(every)], catalog=CATALOG)
    assert [len(i.members) for i in incidents] == [12]


def test_excluded_alert_leaves_and_links_nothing():
    oom = make_alert("LLMContainerOOMKilled", "02:00", pod=POD, **LABELS)
    other = make_alert("LLMContainerOOMKilled", "02:00", pod="sglang-qwen-0", **LABELS)
    bridge = make_alert("LLMGateway5xxRate", "02:03", model_name="llama", deployment="sglang-qwen", **LABELS)
    assert len(correlate([oom, other, bridge], catalog=CATALOG)) == 1
    incidents = correlate([oom, other, bridge], decisions=[Exclude(bridge.key)], catalog=CATALOG)
    assert len(incidents) == 2
    assert bridge.key not in {k for i in incidents for k in i.alert_keys}


def test_false_positive_is_a_judgement_only():
    chain = fragmentation_chain()
    fragmentation = chain[2]
    plain = correlate(chain, catalog=CATALOG)[0]
    judged = correlate(chain, decisions=[FalsePositive(fragmentation.key)], catalog=CATALOG)[0]
    assert judged.alert_keys == plain.alert_keys
    assert judged.chain == plain.chain
    assert judged.root_candidates == plain.root_candidates
    assert judged.member(fragmentation.key).false_positive
    assert not plain.member(fragmentation.key).false_positive


def test_gpu_error_crash_and_metrics_down_chain_roots_at_the_xid():
    alerts = [
        make_alert("TargetDown", "03:06", pod=POD, job="vllm", **LABELS),
        make_alert("LLMEngineContainerCrashLoop", "03:03", pod=POD, **LABELS),
        make_alert(
            "DCGMXidErrors",
            "03:00",
            pod="dcgm-exporter-k2x4p",
            exported_pod=POD,
            Hostname="n3",
            gpu="0",
            **LABELS,
        ),
    ]
    [incident] = correlate(alerts, catalog=CATALOG)
    assert root_name(incident) == "DCGMXidErrors"


def test_preemption_roots_an_itl_breach_on_its_model():
    alerts = [
        make_alert("LLMInterTokenLatencyJitter", "04:10", model_name="llama", **LABELS),
        make_alert("LLMVllmPreemptionsHigh", "04:05", pod=POD, model_name="llama", **LABELS),
    ]
    [incident] = correlate(alerts, catalog=CATALOG)
    assert root_name(incident) == "LLMVllmPreemptionsHigh"
    assert incident.edges[0].rule == "preemption->slo_itl"


def test_condensed_reach_counts_what_the_plain_walk_counts():
    rng = random.Random(5)
    for _ in range(200):
        size = rng.randint(1, 12)
        members = [
            Member(
                f"k{i}",
                "f",
                "A",
                BASE_DAY,
                BASE_DAY,
                None,
                "engine",
                rng.choice(["oom", "restart", "queueing"]),
                "test",
                Scope(),
            )
            for i in range(size)
        ]
        keys = [m.key for m in members]
        edges = [
            Edge(rng.choice(keys), rng.choice(keys), "r", 1.0, "same_pod") for _ in range(rng.randint(0, 15))
        ]
        links = [(rng.choice(keys), rng.choice(keys)) for _ in range(rng.randint(0, 15))]
        outgoing, neighbours = {}, {}
        for edge in edges:
            outgoing.setdefault(edge.cause, []).append(edge)
        for a, b in links:
            neighbours.setdefault(a, []).append(b)
            neighbours.setdefault(b, []).append(a)
        by_key = {m.key: m for m in members}
        condensed = _Reachability(members, edges, links)
        for key in keys:
            assert condensed.count(key) == _reach(key, outgoing, neighbours, by_key)


def test_members_and_edges_are_the_dataclasses_they_claim_to_be():
    incidents = correlate(fragmentation_chain(), catalog=CATALOG)
    for incident in incidents:
        for member in incident.members:
            assert set(vars(member)) == {f.name for f in fields(Member)} and Member(**vars(member)) == member
        for edge in incident.edges:
            assert set(vars(edge)) == {f.name for f in fields(Edge)} and Edge(**vars(edge)) == edge
    assert any(incident.edges for incident in incidents)


def plain_tree(members, edges):
    """The tree and chain as first written, on keys and dicts: the reference for rank()'s numbered version."""
    depth = {m.key: m.depth for m in members}
    incoming = {}
    for edge in edges:
        incoming.setdefault(edge.effect, []).append(edge)
    return tuple(
        min(incoming[m.key], key=lambda e: (e.lag_seconds < 0, abs(e.lag_seconds), -depth[e.cause], e.cause))
        for m in members
        if m.key in incoming
    )


def plain_chain(members, edges, root):
    order = {m.key: i for i, m in enumerate(members)}
    indegree = {m.key: 0 for m in members}
    successors = {}
    for edge in edges:
        successors.setdefault(edge.cause, []).append(edge.effect)
        indegree[edge.effect] += 1
    heap = [(0 if k == root else 1, order[k], k) for k, d in indegree.items() if d == 0 or k == root]
    heapq.heapify(heap)
    done, out = set(), []
    while len(out) < len(members):
        if not heap:
            rest = next(m.key for m in members if m.key not in done)
            heap.append((1, order[rest], rest))
        _, _, key = heapq.heappop(heap)
        if key in done:
            continue
        done.add(key)
        out.append(key)
        for nxt in successors.get(key, ()):
            indegree[nxt] -= 1
            if indegree[nxt] <= 0 and nxt not in done:
                heapq.heappush(heap, (1, order[nxt], nxt))
    return tuple(out)


def test_ranking_on_member_numbers_gives_the_tree_and_chain_of_the_plain_version():
    rng = random.Random(8)
    for _ in range(300):
        size = rng.randint(2, 14)
        members = [
            Member(
                f"k{i}",
                "f",
                "A",
                BASE_DAY,
                BASE_DAY,
                None,
                "engine",
                rng.choice(["oom", "restart", "queueing"]),
                "test",
                Scope(),
                depth=rng.choice([10, 50, 90]),
            )
            for i in range(size)
        ]
        keys = [m.key for m in members]
        pairs = {
            (rng.choice(keys), rng.choice(keys)) for _ in range(rng.randint(0, 25))
        }  # cycles and self-loops too
        edges = [
            Edge(cause, effect, "r", rng.choice([-60.0, -5.0, 5.0, 60.0, 120.0]), "same_pod")
            for cause, effect in sorted(pairs)
        ]
        links = [(rng.choice(keys), rng.choice(keys)) for _ in range(rng.randint(0, 10))]
        ranked = rank(members, edges, links, CATALOG)
        assert ranked.edges == plain_tree(members, edges)
        assert ranked.chain == plain_chain(members, edges, ranked.candidates[0].alert_key)


def test_a_held_back_ranking_gives_the_members_and_incident_of_gives_the_ranking():
    alerts = fragmentation_chain()
    ranked = correlate(alerts, catalog=CATALOG)[0]
    asked = []

    def hold(incident_id, size):
        asked.append((incident_id, size))
        return False

    engine = Correlator(CATALOG)
    (held,) = engine.add_many(alerts, rank_if=hold)
    assert asked == [(ranked.id, len(ranked.members))]
    assert not held.ranked and held.edges == held.chain == held.root_candidates == ()
    assert (held.id, held.members, held.started_at, held.ended_at) == (
        ranked.id,
        ranked.members,
        ranked.started_at,
        ranked.ended_at,
    )
    assert ranked.ranked and ranked.chain and ranked.root is not None
    assert engine.incident_of(ranked.id) == ranked


def test_an_incident_ranks_as_rank_does_with_every_recorded_edge_made():
    # The engine hands ranking member numbers and makes an edge's `Edge` only when it is shown
    # (the tree, the candidates' explanations); the answer must be rank() of every edge made.
    from correlate.engine import Correlator
    from correlate.entries import _made_edge

    alerts = fragmentation_chain() + [a for a in correlate_storm_alerts()]
    correlator = Correlator(CATALOG)
    correlator.add_many(alerts)
    checked = 0
    for incident in correlator.incidents():
        entries = [correlator._entries[key] for key in incident.alert_keys]
        inside = set(entries)
        edges = [
            record[5] or _made_edge(record)
            for entry in entries
            for record in entry.edges
            if record[0] in inside and record[1] in inside
        ]
        links = [(entry.key, other.key) for entry in entries for other in entry.links if other in inside]
        ranked = rank(list(incident.members), edges, links, CATALOG)
        assert (ranked.edges, ranked.chain, ranked.candidates) == (
            incident.edges,
            incident.chain,
            incident.root_candidates,
        )
        checked += len(edges) > len(incident.edges)
    assert checked  # some incident recorded more edges than its tree shows


def correlate_storm_alerts():
    from test_order_independence import storm

    return storm(waves=3, pods=12)


def test_a_node_gone_not_ready_roots_its_pods_failures_and_its_target_down():
    node = "aks-a100pool-38476521-vmss000004"
    alerts = [
        make_alert(
            "LLMEngineTargetDown",
            "04:59",
            cluster="c1",
            namespace="phi",
            job="vllm-phi-4",
            pod="vllm-phi-4-6d9f7c8b5-x2k9m",
            node=node,
            expr='up{job=~"vllm-.*"} == 0',
        ),
        make_alert(
            "KubeNodeNotReady",
            "05:00",
            cluster="c1",
            namespace="monitoring",
            job="kube-state-metrics",
            node=node,
            condition="Ready",
            status="true",
        ),
        make_alert(
            "KubePodNotReady", "05:02", cluster="c1", namespace="phi", pod="vllm-phi-4-6d9f7c8b5-x2k9m"
        ),
        make_alert(
            "KubePodCrashLooping",
            "05:03",
            cluster="c1",
            namespace="qwen",
            pod="sglang-qwen25-7b-5b8c7d6f9-mq4zn",
            node=node,
        ),
        # another node's pod: not on the lost node, a separate trouble
        make_alert(
            "KubePodNotReady",
            "05:03",
            cluster="c1",
            namespace="training",
            pod="finetune-lora-qwen-0",
            node="aks-systempool-11223344-vmss000001",
        ),
    ]
    incidents = correlate(alerts, catalog=CATALOG)
    incident = only(incidents, "KubeNodeNotReady")
    assert names(incident) == [
        "KubeNodeNotReady",
        "KubePodCrashLooping",
        "KubePodNotReady",
        "LLMEngineTargetDown",
    ]
    assert root_name(incident) == "KubeNodeNotReady"
    assert {e.rule for e in incident.edges} >= {"node_not_ready->restart", "node_not_ready->target_down"}


def test_a_gpu_fault_and_the_engine_target_on_its_host_are_one_incident_without_pod_labels():
    # bare-metal static targets: the engine is named only by `instance`, DCGM by `Hostname`
    xid = make_alert(
        "DCGMXidErrors",
        "07:00",
        job="dcgm",
        instance="10.20.1.11:9400",
        Hostname="gpu-node-3",
        gpu="0",
        err_code="79",
    )
    down = make_alert("TRT-LLM server down", "07:04", job="trtllm", instance="gpu-node-3:8000")
    elsewhere = make_alert("TRT-LLM server down", "07:04", job="trtllm", instance="gpu-node-4:8000")
    by_ip = make_alert("TRT-LLM server down", "07:05", job="trtllm", instance="10.20.1.11:8000")
    incidents = correlate([xid, down, elsewhere, by_ip], catalog=CATALOG)
    incident = only(incidents, "DCGMXidErrors")
    assert len(incident.members) == 2 and root_name(incident) == "DCGMXidErrors"
    assert (incident.edges[0].rule, incident.edges[0].relation) == ("gpu_error->restart", "same_node")
    assert len(incidents) == 3
