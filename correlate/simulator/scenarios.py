"""Scenarios: the families of `cascades.py` placed on the fleet with the people, the March
incident, and the labelled `fleet-day` set (`SCENARIOS`, `build`; the fleet day itself is
`fleet_day.py`'s).
"""

from __future__ import annotations

from collections.abc import Callable

from .cascades import (
    _decoy_rollout,
    _engine,
    _first,
    _j,
    _last_end,
    _occs,
    config_oom,
    frag_oom,
    ghost_requests,
    hot_instance,
    noise_cert,
    noise_job_failed,
    noise_kv_blip,
    numeric,
    preemption_itl,
    respond,
    rollout_crash,
    spec_decode,
    threshold_storm,
    xid_crash,
)
from .core import HOUR, MINUTE, NS, day_start, hex_id, rng_for
from .fleet_day import sc_fleet_day
from .rules import KINDS
from .story import Story

M = MINUTE


def sc_frag_oom(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4, engine=_engine(s, "frag", ("vllm", "vllm", "sglang")))
    other = s.world.deployment(cl)
    t0 = s.start + 70 * M
    inc = s.incident()
    out = frag_oom(s, dep, t0, inc, slow=True)
    noise_job_failed(s, dep, t0 - 5 * M)  # fires (for: 15m) minutes before the cascade's first alert
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=0,
        assign_to=1,
        severity="critical",
        notes=(
            f"{out['oom'].labels['pod']} OOMKilled, siblings queueing; KV cache pinned at 98%",
            "fragmentation alert fired late (15m avg rule); compaction not enabled on this pool",
        ),
        mitigate_after=out["t_fix"] + 60 * NS,
        resolve_after=_last_end(out) + 5 * M,
    )
    s.act("degrade", first, at=out["t_oom"] + 9 * M, by=s.person(1), level="L2")
    noise_kv_blip(s, other, t0 - 25 * M)


def sc_preemption(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=3)
    t0 = s.start + 65 * M
    inc = s.incident()
    out = preemption_itl(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=1,
        notes=("long-context batch job hitting the chat pool; asked them to route to the batch deployment",),
        resolve_after=_last_end(out) + 4 * M,
    )
    s.act("degrade", first, after_s=600, by=s.person(1), level="L1")


def sc_hot(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4, engine=_engine(s, "hot"))
    t0 = s.start + 65 * M
    inc = s.incident()
    out = hot_instance(s, dep, t0, inc, slow=True)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=2,
        notes=(
            "one replica takes ~60% of traffic: shared system prompt "
            "hashes to it; enabling prefix-aware routing",
        ),
        resolve_after=_last_end(out) + 3 * M,
    )


def sc_numeric(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4)
    t0 = s.start + 62 * M
    inc = s.incident()
    corrupt = rng_for(s.key, "corrupt").random() < 0.6
    out = numeric(s, dep, t0, inc, corrupt_metric=corrupt)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=0,
        severity="critical",
        notes=("garbage completions from one replica; quarantined the pod, batch fence to follow",),
        mitigate_after=out["end"] - 2 * M,
        resolve_after=_last_end(out) + 5 * M,
    )


def sc_xid(s: Story) -> None:
    cl = s.world.clusters[-1]
    dep = s.world.deployment(cl, pods=3, engine=_engine(s, "xid"))
    t0 = s.start + 66 * M
    inc = s.incident()
    code = rng_for(s.key, "xid").choice([79, 48, 94, 79])
    node_name = dep.pods[0].gpu.node.name
    out = xid_crash(s, dep, t0, inc, code=code, late_s=rng_for(s.key, "late").uniform(360, 540))
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=2,
        assign_to=3,
        notes=(f"GPU on {node_name} throws Xid {code}; cordoned and drained the node",),
        mitigate_after=out["t_drain"] + 2 * M,
        resolve_after=_last_end(out) + 6 * M,
    )


def sc_ghost(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=3, engine=_engine(s, "ghost"))
    t0 = s.start + 64 * M
    inc = s.incident()
    out = ghost_requests(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=1,
        notes=("clients time out at 30 s but the engine keeps generating; enabling abort-on-disconnect",),
        resolve_after=_last_end(out) + 4 * M,
    )


def sc_spec(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=3)
    t0 = s.start + 62 * M
    inc = s.incident()
    out = spec_decode(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=0,
        notes=("draft acceptance collapsed after a traffic mix shift",),
        resolve_after=_last_end(out) + 3 * M,
    )
    s.act("degrade", first, at=out["end"] - 6 * M, by=s.person(0), level="L1")


def sc_rollout(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4)
    decoy = s.world.deployment(cl)
    t0 = s.start + 62 * M
    inc = s.incident()
    out = rollout_crash(s, dep, t0, inc)
    _decoy_rollout(s, decoy, t0 - 9 * M)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=1,
        notes=("new image crash-loops at start-up; rolling back",),
        resolve_after=_last_end(out) + 4 * M,
    )


def sc_config(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4)
    t0 = s.start + 52 * M
    inc = s.incident()
    out = config_oom(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(
        s,
        first,
        who=2,
        notes=("CUDA OOM on two replicas since the helm change; reverting gpu_memory_utilization to 0.90",),
        resolve_after=_last_end(out) + 4 * M,
    )


def sc_march(s: Story) -> None:
    """The March incident of DOMAIN.md at T = 01:00 UTC of --start's date."""
    T = day_start(s.start) + 1 * HOUR
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4)
    dep.kv_series = False  # no preallocation: the FB ratio carries the memory bands
    dep.fb_base = 0.62
    key_pods = dep.pods[:3]
    inc = s.incident()
    inc.family = "march-oom"
    s.touch(dep, T)
    frag_kind_name = s._style(cl, KINDS["kv_frag"], None, None)[0]
    r = rng_for(s.key, "march")
    s.change(
        T + 10 * M,
        "threshold_edit",
        f"prometheus-rules: raise {frag_kind_name} threshold 0.25 -> 0.40",
        "prometheus-rules-ci",
        {
            "cluster": cl.name,
            "namespace": dep.namespace,
            "alertname": frag_kind_name,
            "rule_file": "llm-serving/kv-cache.rules.yaml",
            "old_threshold": "0.25",
            "new_threshold": "0.40",
            "reviewed": "false",
            "verified_in_staging": "false",
            "author": s.person(5),
            "deployment": dep.name,
            "model": dep.served_name,
        },
        inc=inc,
        dep=dep,
        links=[
            {
                "href": f"https://git.{s.world.domain}/sre/prometheus-rules/commit/{hex_id(r, 40)}",
                "text": "commit (pushed to main, no review)",
            }
        ],
    )
    for i, p in enumerate(key_pods):
        s.effect(
            "frag",
            p,
            0.25,
            0.47 - 0.04 * i,
            T + 15 * M + i * 4 * M,
            T + 60 * M + i * 2 * M,
            ramp_s=900,
            decay_s=60,
        )
        s.effect("fb", p, 0.85, 0.985, T + 30 * M + i * 3 * M, T + 60 * M + i * 2 * M, ramp_s=900, decay_s=30)
    # the raised threshold (0.40) is what the rule checks since T+10m: it fires at T+45m
    frag = s.fire(
        "kv_frag",
        key_pods[0],
        T + 40 * M,
        T + 60 * M,
        inc=inc,
        root=True,
        bump=False,
        value=0.43,
        threshold=0.40,
    )
    frag.annotations["description"] = frag.annotations["description"].replace("25%", "40%")
    s.tel.bump("frag", key_pods[0].name, 0.40, 0.47, T + 40 * M, T + 60 * M, "up", ramp_s=500, decay_s=60)
    frag.signal = ("frag", [key_pods[0].name], 0.40, "up")
    ooms = []
    for i, p in enumerate(key_pods):
        t = T + 60 * M + i * 2 * M + _j(s, "m", i, lo=0, hi=0.5)
        s.oom(p, t, downtime_s=100 + 20 * i)
        ooms.append(s.fire("oom_killed", p, t, t + 20 * M, inc=inc))
    s.crashloop(key_pods[0], T + 64 * M, T + 84 * M, reason="OOMKilled")
    s.fire("crashloop", key_pods[0], T + 64 * M + 10 * NS, T + 84 * M, inc=inc)
    survivor = dep.pods[3]
    s.fire("queue", survivor, T + 61 * M, T + 92 * M, inc=inc)
    s.fire("ttft", dep, T + 62 * M, T + 95 * M, inc=inc, pods=[survivor] + key_pods[1:])
    for p in key_pods[1:]:
        s.effect("waiting", p, 15, 40, T + 66 * M, T + 90 * M, ramp_s=120)
    oncall, lead = s.person(0), s.person(1)
    s.act("acknowledge", frag, at=T + 46 * M + 40 * NS, by=oncall)
    s.act(
        "note",
        frag,
        at=T + 47 * M,
        by=oncall,
        text="fragmentation alert again; threshold was raised today, looks like noise. "
        "Judged false positive.",
    )
    s.act("false_positive", frag, at=T + 47 * M + 20 * NS, by=oncall)
    s.act("severity", ooms[0], at=T + 62 * M, by=oncall, level="critical")
    s.act("assign", ooms[0], at=T + 63 * M, by=oncall, username=lead)
    s.act(
        "note",
        ooms[0],
        at=T + 66 * M,
        by=lead,
        text="key nodes OOM one after another; GPU memory above 85% since 01:30 per DCGM",
    )
    s.act("degrade", ooms[0], at=T + 75 * M, by=lead, level="L3")
    s.act(
        "note",
        ooms[0],
        at=T + 75 * M + 30 * NS,
        by=lead,
        text="degradation plan: switched long-context traffic to the small-model replica (banner on)",
    )
    s.act("mitigate", ooms[0], at=T + 88 * M, by=lead)
    s.act("resolve", ooms[0], at=T + 112 * M, by=lead)
    noise_cert(s, cl, T + 5 * M)


def sc_threshold_storm(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4, engine=_engine(s, "storm"))
    t0 = s.start + 61 * M
    inc = s.incident()
    out = threshold_storm(s, dep, t0, inc)
    respond(
        s,
        out["queue0"],
        who=1,
        notes=("alert storm right after the rules PR",),
        resolve_after=out["end"] + 5 * M,
    )


SCENARIOS: dict[str, tuple[Callable[[Story], None], dict, str]] = {
    "frag-oom": (
        sc_frag_oom,
        {},
        "KV fragmentation -> KV pool exhaustion -> OOM -> crash loop -> sibling "
        "queueing -> TTFT breach (slow root rule fires after its effects)",
    ),
    "preemption-itl": (
        sc_preemption,
        {},
        "long-context burst -> preemption storm -> ITL jitter and TPOT breach",
    ),
    "hot-instance": (sc_hot, {}, "prefix-hash hotspot -> queueing on one replica -> TTFT"),
    "numeric-nan": (sc_numeric, {}, "NaN logits -> repetition / garbage output -> error rate"),
    "gpu-xid-crash": (
        sc_xid,
        {"clusters": 2},
        "GPU Xid / ECC -> engine crash -> target down, crash loop -> TTFT (cause delivered late)",
    ),
    "ghost-requests": (sc_ghost, {}, "client disconnects -> ghost requests -> queueing -> TTFT"),
    "spec-decode-tpot": (sc_spec, {}, "speculative-decoding acceptance drop -> TPOT breach"),
    "rollout-crashloop": (
        sc_rollout,
        {},
        "rollout (root) -> crash loop, replicas mismatch, queueing, TTFT; plus a decoy rollout",
    ),
    "config-oom": (sc_config, {}, "config change (root) -> GPU memory -> CUDA OOM -> queueing -> TTFT"),
    "threshold-storm": (
        sc_threshold_storm,
        {},
        "unreviewed threshold edit (root) -> queue alerts on every busy replica -> revert",
    ),
    "march-oom": (
        sc_march,
        {"step_s": 15},
        "the March incident: unreviewed threshold edit, GPU memory > 85%, "
        "fragmentation alert judged false positive, OOMs, degradation",
    ),
    "fleet-day": (
        sc_fleet_day,
        {"clusters": 4, "per_scope_windows": True, "sparse_s": 180},
        "labelled set: 11 incidents over ~5 h in 4 clusters, overlaps, recurrence, noise, decoys",
    ),
}


def build(name: str, start: int, seed: int) -> Story:
    fn, opts, _ = SCENARIOS[name]
    story = Story(
        name,
        seed,
        start,
        clusters=opts.get("clusters", 1),
        step_s=opts.get("step_s", 30),
        per_scope_windows=True,
        sparse_s=opts.get("sparse_s", 60),
    )
    fn(story)
    return story
