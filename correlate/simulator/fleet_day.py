"""The labelled `fleet-day` scenario: eleven incidents, noise and decoys over about five hours in
four clusters (overlaps, a recurrence, a late cause, merges and splits by people). Its cast is
fixed so every seed keeps the hard cases; `scenarios.py` lists it in `SCENARIOS`."""

from __future__ import annotations

from .cascades import (
    _decoy_rollout,
    _engine,
    _first,
    _last_end,
    _occs,
    config_oom,
    frag_oom,
    ghost_requests,
    hot_instance,
    noise_cert,
    noise_clock,
    noise_cpu_throttle,
    noise_disk_flap,
    noise_gpu_temp,
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
from .core import MINUTE, NS, rng_for
from .story import Story

M = MINUTE


def sc_fleet_day(s: Story) -> None:
    """Several incidents, noise and decoys over hours in several clusters: the labelled set.

    The cast is fixed (so every seed keeps the hard cases); clusters, deployments, offsets,
    rule styles and options vary with the seed."""
    w = s.world
    r = rng_for(s.key, "fleet")
    c0, c1, c2, c3 = r.sample(w.clusters, 4)
    e = {k: _engine(s, f"fd-{k}") for k in ("a", "c", "e", "g", "k", "b0", "b1", "b2", "b3")}
    e["a"] = _engine(s, "fd-a", ("vllm", "vllm", "sglang"))
    big = [
        w.deployment(c0, pods=4, engine=e["a"]),
        w.deployment(c0, pods=3),
        w.deployment(c1, pods=3, engine=e["c"]),
        w.deployment(c2, pods=4),
        w.deployment(c3, pods=4, engine=e["e"]),
        w.deployment(c1, pods=4),
        w.deployment(c2, pods=3, engine=e["g"]),
        w.deployment(c3, pods=4),
        w.deployment(c0, pods=3),
        w.deployment(r.choice([c1, c2]), pods=3, engine=e["k"]),
    ]
    bystander = [w.deployment(c, pods=3, engine=e[f"b{i}"]) for i, c in enumerate((c0, c1, c2, c3))]
    t = s.start + 60 * M + int(r.uniform(0, 20) * M)

    def at(lo: float, hi: float) -> int:
        return t + int(r.uniform(lo, hi) * M)

    def ack() -> float:
        return r.uniform(100, 420)

    # A: fragmentation cascade on c0 (slow root rule), an unrelated job failure just before it
    inc_a = s.incident()
    job = noise_job_failed(s, big[0], t - int(r.uniform(3, 7) * M))  # fires a few minutes before A
    a = frag_oom(s, big[0], t, inc_a, slow=True, fb_alert=r.random() < 0.7, bad=r.randrange(4))
    fa = _first(_occs(a))
    respond(
        s,
        fa,
        who=0,
        ack_s=ack(),
        assign_to=1,
        severity="critical",
        notes=("OOM on one replica, the others queue; KV cache full before the OOM",),
        mitigate_after=a["t_fix"] + 2 * M,
        resolve_after=_last_end(a) + 6 * M,
    )
    s.act(
        "degrade", fa, at=a["t_oom"] + int(r.uniform(6, 12) * M), by=s.person(1), level=r.choice(["L2", "L3"])
    )

    # B: preemption cascade on another model in the same cluster, overlapping A
    inc_b = s.incident()
    b = preemption_itl(s, big[1], at(8, 20), inc_b)
    fb_ = _first(_occs(b))
    respond(s, fb_, who=2, ack_s=ack(), resolve_after=_last_end(b) + 4 * M)
    s.act(
        "note",
        fb_,
        after_s=ack() + 200,
        by=s.person(2),
        text="TPOT breach is on a different model than the OOM; not the same incident",
    )
    # whoever holds the failed eval job with A's cascade splits it out (a no-op if it stood alone)
    s.act("split", job, after_s=240, by=s.person(1), alerts=[job])

    # C: GPU Xid cascade in c1 while A runs (another cluster); its cause is delivered late
    inc_c = s.incident()
    c = xid_crash(s, big[2], at(-5, 15), inc_c, code=r.choice([79, 48, 94, 95]), late_s=r.uniform(360, 600))
    fc = _first(_occs(c))
    respond(
        s,
        fc,
        who=3,
        ack_s=ack(),
        notes=("drained the node with the failing GPU",),
        mitigate_after=c["t_drain"] + 2 * M,
        resolve_after=_last_end(c) + 5 * M,
    )
    s.act("merge", c["crash"], after_s=240, by=s.person(3), into=c["ttft"])

    # D: a rollout in c2 as root, with a decoy rollout of a bystander just before it
    inc_d = s.incident()
    t_d = at(60, 95)
    _decoy_rollout(s, bystander[2], t_d - int(r.uniform(4, 12) * M))
    d = rollout_crash(s, big[3], t_d, inc_d)
    fd = _first(_occs(d))
    respond(
        s,
        fd,
        who=4,
        ack_s=ack(),
        notes=("new vLLM image crash-loops; rolled back",),
        resolve_after=_last_end(d) + 5 * M,
    )

    # E: hot instance in c3 (the skew rule is slow in most seeds and fires last)
    inc_e = s.incident()
    hot = hot_instance(s, big[4], at(30, 55), inc_e, slow=r.random() < 0.75, idx=r.randrange(4))
    fe = _first(_occs(hot))
    respond(s, fe, who=5, ack_s=ack(), resolve_after=_last_end(hot) + 3 * M)

    # F: numeric trouble in c1, later in the day
    inc_f = s.incident()
    f = numeric(s, big[5], at(135, 165), inc_f, corrupt_metric=r.random() < 0.5, idx=r.randrange(4))
    ff = _first(_occs(f))
    respond(
        s,
        ff,
        who=0,
        ack_s=ack(),
        severity="critical",
        mitigate_after=f["end"] - 3 * M,
        resolve_after=_last_end(f) + 4 * M,
    )

    # G: ghost requests in c2
    inc_g = s.incident()
    g = ghost_requests(s, big[6], at(175, 210), inc_g)
    fg = _first(_occs(g))
    respond(s, fg, who=1, ack_s=ack(), resolve_after=_last_end(g) + 3 * M)

    # H: speculative decoding in c3 (acceptance rule has a 10m window: fires after the TPOT breach)
    inc_h = s.incident()
    h = spec_decode(s, big[7], at(105, 135), inc_h)
    fh = _first(_occs(h))
    respond(s, fh, who=2, ack_s=ack(), resolve_after=_last_end(h) + 3 * M)
    s.act("degrade", fh, at=h["end"] - 8 * M, by=s.person(2), level="L1")

    # I: config change -> CUDA OOM in c0 (another model than A), with a reviewed threshold-edit decoy
    inc_i = s.incident()
    i_ = config_oom(s, big[8], at(195, 230), inc_i)
    fi = _first(_occs(i_))
    respond(s, fi, who=3, ack_s=ack(), resolve_after=_last_end(i_) + 4 * M)
    _decoy_rollout(s, bystander[0], at(80, 110), kind="threshold_edit")

    # J: recurrence of A on the same deployment, an hour+ after A ended: a new incident
    inc_j = s.incident()
    t_j = max(_last_end(a) + int(r.uniform(60, 90) * M), t + 160 * M)
    j = frag_oom(
        s,
        big[0],
        t_j,
        inc_j,
        slow=r.random() < 0.5,
        fb_alert=False,
        crash_minutes=16,
        bad=a["bad"] if r.random() < 0.7 else (a["bad"] + 1) % 4,
    )
    fj = _first(_occs(j))
    respond(
        s,
        fj,
        who=4,
        ack_s=ack(),
        notes=("same pool as this morning; fragmentation again",),
        resolve_after=_last_end(j) + 5 * M,
    )
    s.act("resolve", fj, at=j["t_fix"] + 60 * NS, by=s.person(4))  # too early: the TTFT breach is still open
    s.act("reopen", j["ttft"], at=j["t_fix"] + 3 * M, by=s.person(4))

    # K: an unreviewed threshold edit as root: the queue rule now fires on every busy replica
    inc_k = s.incident()
    k = threshold_storm(s, big[9], at(120, 250), inc_k)
    respond(
        s,
        k["queue0"],
        who=5,
        ack_s=ack(),
        notes=("alert storm right after the rules PR; reverting the threshold",),
        resolve_after=k["end"] + 6 * M,
    )

    # noise and decoys
    n1 = noise_disk_flap(s, c1.nodes[-1], at(-25, -10), flaps=r.choice([3, 4]))
    noise_cert(s, c3, at(20, 60))
    noise_cpu_throttle(s, bystander[1], at(90, 130))
    noise_clock(s, c2.nodes[-2], at(120, 170))
    blip = noise_kv_blip(s, bystander[3], at(45, 80))
    noise_gpu_temp(s, bystander[0], at(220, 270))
    _decoy_rollout(s, bystander[1], at(140, 180))
    _decoy_rollout(s, bystander[3], at(180, 230))
    s.act("false_positive", blip, after_s=120, by=s.person(5))
    s.act("exclude_alert", n1[0], after_s=100, by=s.person(3))
