"""Scenario families (one cascade each), the March incident, and the labelled `fleet-day` set.

A family is a function `(story, deployment, t0, incident, **options) -> dict of occurrences`; it
fires the alerts of one cascade with realistic rule timing, moves the metrics underneath, and
records which occurrence is the root. Scenarios place families on the fleet and add the people.
"""
from __future__ import annotations

from typing import Callable

from .core import HOUR, MINUTE, NS, day_start, hex_id, rng_for
from .metrics import XID_TEXT
from .rules import KINDS
from .alertmanager import Occurrence
from .story import Change, Incident, Story, static_target
from .world import Cluster, Deployment, Node, translate

M = MINUTE


def _engine(s: Story, key: str, choices: tuple[str, ...] = ("vllm", "vllm", "sglang", "trtllm")) -> str:
    """Which serving engine a deployment runs (the fleet mixes vLLM, SGLang and TensorRT-LLM)."""
    return rng_for(s.key, "engine", key).choice(choices)


def _family(inc: Incident | None, name: str) -> None:
    if inc is not None and not inc.family:
        inc.family = name


def _j(s: Story, *key: object, lo: float = -1.0, hi: float = 1.0) -> int:
    """A deterministic jitter in minutes, as nanoseconds."""
    return int(rng_for(s.key, "jit", *key).uniform(lo, hi) * M)


# -- families --------------------------------------------------------------------------------------

def frag_oom(s: Story, dep: Deployment, t0: int, inc: Incident | None, *, slow: bool = True, bad: int = 0,
             fb_alert: bool = True, crash_minutes: int = 22) -> dict:
    """Fragmentation -> KV pool exhaustion -> OOM -> crash loop -> sibling queueing -> TTFT."""
    _family(inc, "frag-oom")
    pod = dep.pods[bad]
    sibs = [p for p in dep.pods if p is not pod]
    t_oom = t0 + 23 * M + _j(s, dep.name, t0, "oom")
    t_cl = t_oom + 6 * M
    t_fix = t_cl + crash_minutes * M
    out = {}
    cut = t_oom + 5 * NS  # the OOM wipes the pool: the signals drop with it
    out["frag"] = s.fire("kv_frag", pod, t0, cut, inc=inc, root=True, slow=slow, decay_s=5)
    out["kv"] = s.fire("kv_usage", pod, t0 + 11 * M, cut, inc=inc, decay_s=5)
    if fb_alert:
        out["fb"] = s.fire("gpu_fb", pod, t0 + 19 * M, cut, inc=inc, peak=420, decay_s=5)
    else:  # the framebuffer still fills up; this cluster just has no rule on it
        s.effect("fb", pod, 0.95, 0.985, t0 + 15 * M, cut, decay_s=5)
    back = s.oom(pod, t_oom)
    s.effect("kv", pod, 0.8, 0.97, back + 2 * M, t_cl, ramp_s=120)
    s.crashloop(pod, t_cl, t_fix, reason="OOMKilled")
    out["oom"] = s.fire("oom_killed", pod, t_oom, t_fix - 2 * M, inc=inc)
    out["crash"] = s.fire("crashloop", pod, t_cl + 10 * NS, t_fix, inc=inc)
    queued = sibs[:2]
    for i, sib in enumerate(queued):
        out[f"queue{i}"] = s.fire("queue", sib, t_oom + (90 + 40 * i) * NS, t_fix + 3 * M, inc=inc)
        s.effect("kv", sib, 0.75, 0.86, t_oom + 60 * NS, t_fix + 3 * M, ramp_s=120)
    for sib in sibs[2:]:
        s.effect("waiting", sib, 10, 16, t_oom + 2 * M, t_fix + 2 * M, ramp_s=120)
    out["ttft"] = s.fire("ttft", dep, t_oom + 3 * M, t_fix + 4 * M, inc=inc, pods=sibs)
    out["t_oom"], out["t_fix"], out["bad"] = t_oom, t_fix, bad
    return out


def preemption_itl(s: Story, dep: Deployment, t0: int, inc: Incident | None, *, slow: bool = False) -> dict:
    """Long-context burst -> preemption storm -> ITL jitter and TPOT breach."""
    _family(inc, "preemption-itl")
    p1, p2 = dep.pods[0], dep.pods[1]
    end = t0 + 26 * M + _j(s, dep.name, t0, "pe", lo=-3, hi=3)
    out = {}
    for p in (p1, p2):
        s.effect("kv", p, 0.8, 0.885, t0 - 4 * M, end, ramp_s=300)
    out["preempt"] = s.fire("preempt", p1, t0, end, inc=inc, root=True)
    s.effect("preempt", p2, 0.05, 0.09, t0 + 1 * M, end)
    out["itl"] = s.fire("itl", p1, t0 + 70 * NS, end + 1 * M, inc=inc)
    out["tpot"] = s.fire("tpot", dep, t0 + 2 * M, end + 1 * M, inc=inc, pods=[p1, p2])
    s.effect("waiting", p1, 6, 12, t0 + 1 * M, end)
    out["end"] = end
    return out


def hot_instance(s: Story, dep: Deployment, t0: int, inc: Incident | None, *, slow: bool = False,
                 idx: int = 1) -> dict:
    """Prefix-hash hotspot -> queueing on that pod -> its TTFT."""
    _family(inc, "hot-instance")
    pod = dep.pods[idx]
    end = t0 + 38 * M + _j(s, dep.name, t0, "hot", lo=-4, hi=4)
    out = {}
    out["hot"] = s.fire("hot", pod, t0, end, inc=inc, root=True, slow=slow)
    out["queue"] = s.fire("queue", pod, t0 + 2 * M, end, inc=inc)
    s.effect("kv", pod, 0.8, 0.875, t0 + 1 * M, end)
    out["ttft"] = s.fire("ttft_pod", pod, t0 + 3 * M, end + 1 * M, inc=inc)
    out["end"] = end
    return out


def numeric(s: Story, dep: Deployment, t0: int, inc: Incident | None, *, corrupt_metric: bool = True,
            idx: int = 0) -> dict:
    """NaN/Inf in one batch -> repetition / garbage completions -> error rate."""
    _family(inc, "numeric-nan")
    pod = dep.pods[idx]
    end = t0 + 30 * M + _j(s, dep.name, t0, "nan", lo=-4, hi=4)
    out = {}
    if corrupt_metric:
        out["nan"] = s.fire("nan", pod, t0, end, inc=inc, root=True, ramp_s=20)  # NaNs start abruptly
    n = len(dep.pods)
    out["rep"] = s.fire("repetition", dep, t0 + 60 * NS, end, inc=inc, pods=[pod], peak=min(0.6, 0.4 * n / 4),
                        root=not corrupt_metric)
    out["err"] = s.fire("errors", dep, t0 + 3 * M, end, inc=inc, pods=[pod], peak=0.22)
    out["end"] = end
    return out


def xid_crash(s: Story, dep: Deployment, t0: int, inc: Incident | None, *, code: int = 79,
              late_s: float = 0) -> dict:
    """GPU Xid (and ECC) -> engine crash -> target down, crash loop -> siblings' TTFT."""
    _family(inc, "gpu-xid-crash")
    pod = dep.pods[0]
    sibs = dep.pods[1:]
    gpu = pod.gpu
    t_drain = t0 + 34 * M + _j(s, dep.name, t0, "drain", lo=-3, hi=3)
    out = {}
    s.xid(gpu, t0, code, hold_s=int((t_drain - t0) / NS))
    out["xid"] = s.fire("xid", (gpu, pod), t0, t_drain, inc=inc, root=True, delay_s=late_s, value=code,
                        labels={"err_code": str(code), "err_msg": XID_TEXT[code]})
    if code in (48, 94, 95):
        s.ecc(gpu, t0 + 35 * NS)  # the DBE counter moves on the exporter's next poll
        out["ecc"] = s.fire("ecc", (gpu, pod), t0 + 35 * NS, t0 + 35 * NS, inc=inc, delay_s=late_s)
    s.scrape_fail(pod, t0 + 20 * NS, t0 + 3 * M + 30 * NS)
    s.crashloop(pod, t0 + 3 * M + 30 * NS, t_drain, reason="Error")
    out["down"] = s.fire("target_down", dep, t0 + 20 * NS, t_drain, inc=inc)
    out["restart"] = s.fire("engine_restart", pod, t0 + 3 * M + 30 * NS, t_drain, inc=inc)
    out["crash"] = s.fire("crashloop", pod, t0 + 3 * M + 40 * NS, t_drain, inc=inc)
    out["ttft"] = s.fire("ttft", dep, t0 + 2 * M, t_drain + 3 * M, inc=inc, pods=sibs)
    for sib in sibs:
        s.effect("waiting", sib, 10, 17, t0 + 1 * M, t_drain + 2 * M, ramp_s=120)
    s.lifetime(pod, died=t_drain)
    new = s.world.replace_pod(pod)
    s.lifetime(new, born=t_drain + 40 * NS)
    s.touch(dep, t_drain)
    out["t_drain"] = t_drain
    return out


def ghost_requests(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> dict:
    """Client disconnects (30 s client timeout) -> ghost requests keep generating -> queueing -> TTFT."""
    _family(inc, "ghost-requests")
    p1, p2 = dep.pods[0], dep.pods[1]
    end = t0 + 34 * M + _j(s, dep.name, t0, "gh", lo=-4, hi=4)
    out = {}
    out["dc"] = s.fire("disconnects", dep, t0, end, inc=inc, root=True)
    for i, p in enumerate((p1, p2)):
        s.effect("ghost_stall", p, 0.3, 0.93, t0 + 1 * M, end, ramp_s=60)
        out[f"ghost{i}"] = s.fire("ghost", p, t0 + (2 + i) * M, end, inc=inc)
    out["queue"] = s.fire("queue", p1, t0 + 4 * M, end + 2 * M, inc=inc)
    out["ttft"] = s.fire("ttft", dep, t0 + 5 * M, end + 2 * M, inc=inc, pods=[p1, p2])
    out["end"] = end
    return out


def spec_decode(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> dict:
    """Speculative-decoding acceptance collapses (traffic mix shift) -> TPOT breach."""
    _family(inc, "spec-decode-tpot")
    p1, p2 = dep.pods[0], dep.pods[1]
    end = t0 + 36 * M + _j(s, dep.name, t0, "sp", lo=-4, hi=4)
    out = {}
    out["spec"] = s.fire("spec", p1, t0, end, inc=inc, root=True)
    out["spec2"] = s.fire("spec", p2, t0 + 3 * M, end, inc=inc)
    out["tpot"] = s.fire("tpot", dep, t0 + 60 * NS, end + 1 * M, inc=inc, pods=[p1, p2])
    out["end"] = end
    return out


def rollout_crash(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> dict:
    """A rollout whose new pods crash-loop -> replicas mismatch -> survivors queue -> TTFT."""
    _family(inc, "rollout-crashloop")
    old = list(dep.pods)
    cl = dep.cluster
    r = rng_for(s.key, "rollout", dep.name)
    v_old, v_new = r.choice([("v0.10.1", "v0.11.0"), ("v0.9.2", "v0.10.1"), ("v0.11.2", "v0.12.0")])
    t_back = t0 + 40 * M + _j(s, dep.name, "rb", lo=-3, hi=3)
    out = {}
    author = s.person(3)
    image = {"vllm": "vllm/vllm-openai", "sglang": "lmsysorg/sglang", "trtllm": "nvcr.io/nvidia/tritonserver"}[
        dep.engine]
    if r.random() < 0.6:
        kind, summary, source = ("rollout", f"Argo CD sync {dep.namespace}/{dep.name}: {image}:{v_old} -> {v_new}",
                                 f"argocd.{cl.name}")
    else:
        kind, summary, source = ("deploy", f"Deploy {dep.name} {v_new} to {cl.name} (workflow run "
                                           f"#{r.randint(2000, 9000)})", "github-actions")
    out["change"] = s.change(
        t0, kind, summary, source, {"cluster": cl.name, "namespace": dep.namespace, "deployment": dep.name,
                               "model": dep.served_name, "image": f"{image}:{v_new}",
                               "previous_image": f"{image}:{v_old}", "revision": hex_id(r, 7),
                               "author": author},
        inc=inc, root=True, dep=dep,
        links=[{"href": f"https://argocd.{s.world.domain}/applications/{dep.name}", "text": "Argo CD application"}
               if kind == "rollout" else
               {"href": f"https://github.com/{s.world.org}/ml-deploy/actions/runs/{r.randint(10**9, 10**10)}",
                "text": "workflow run"},
               {"href": f"https://git.{s.world.domain}/ml-platform/deploy/commit/{hex_id(r, 40)}", "text": "commit"}])
    old_hash = dep.rs_hash
    new = s.world.roll(dep, 2)
    for p in new:
        s.lifetime(p, born=t0 + 20 * NS, died=t_back)
        s.crashloop(p, t0 + 2 * M, t_back, reason="Error")
    s.lifetime(old[-1], died=t0 + 60 * NS)
    s.tel.replicas_short[dep.name].append((t0 + 60 * NS, t_back, 1))
    dep.families.add("replicas")
    for i, p in enumerate(new):
        out[f"crash{i}"] = s.fire("crashloop", p, t0 + 2 * M + 10 * NS, t_back, inc=inc)
    out["replicas"] = s.fire("replicas", dep, t0 + 60 * NS, t_back, inc=inc)
    survivors = old[:-1]
    out["ttft"] = s.fire("ttft", dep, t0 + 4 * M, t_back + 3 * M, inc=inc, pods=survivors)
    out["queue"] = s.fire("queue", survivors[0], t0 + 3 * M, t_back + 2 * M, inc=inc)
    out["rollback"] = s.change(
        t_back, "rollback", f"Argo CD rollback {dep.namespace}/{dep.name} to {image}:{v_old}",
        f"argocd.{cl.name}", {"cluster": cl.name, "namespace": dep.namespace, "deployment": dep.name,
                               "model": dep.served_name, "image": f"{image}:{v_old}", "author": s.person(1)},
        inc=inc, dep=dep)
    dep.rs_hash = old_hash
    back = s.world._pod(dep)
    dep.pods = survivors + [back]
    dep.old_pods = [old[-1]] + new
    s.lifetime(back, born=t_back + 2 * M)
    out["t_back"] = t_back
    return out


def config_oom(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> dict:
    """A config change (gpu_memory_utilization up, max_num_seqs doubled) -> CUDA OOMs under load."""
    _family(inc, "config-oom")
    cl = dep.cluster
    r = rng_for(s.key, "cfg", dep.name)
    out = {}
    out["change"] = s.change(
        t0, "config", f"helm upgrade {dep.name}: gpu_memory_utilization 0.90 -> 0.95, max_num_seqs 256 -> 512",
        r.choice(["helm", "github-actions", "flux"]),
        {"cluster": cl.name, "namespace": dep.namespace, "deployment": dep.name, "model": dep.served_name,
         "chart": "vllm-stack", "values_diff": "gpu_memory_utilization: 0.95; max_num_seqs: 512",
         "author": s.person(4)},
        inc=inc, root=True, dep=dep, ts_style="pd",
        links=[{"href": f"https://git.{s.world.domain}/ml-platform/helm-values/pull/{r.randint(300, 2000)}",
                "text": "pull request"}])
    p1, p2 = dep.pods[0], dep.pods[1]
    t1 = t0 + 16 * M + _j(s, dep.name, "o1", lo=0, hi=3)
    t2 = t1 + 4 * M
    out["fb"] = s.fire("gpu_fb", p1, t0 + 10 * M, t1, inc=inc, peak=300)
    s.effect("fb", p2, 0.975, 0.992, t0 + 14 * M, t2)
    s.oom(p1, t1, reason="Error", downtime_s=150)
    s.oom(p2, t2, reason="Error", downtime_s=150)
    out["oom1"] = s.fire("cuda_oom", p1, t1, t1, inc=inc)
    out["oom2"] = s.fire("cuda_oom", p2, t2, t2, inc=inc)
    rest = dep.pods[2:]
    out["queue"] = s.fire("queue", rest[0], t1 + 90 * NS, t2 + 8 * M, inc=inc)
    out["ttft"] = s.fire("ttft", dep, t1 + 2 * M, t2 + 9 * M, inc=inc, pods=rest)
    out["end"] = t2 + 9 * M
    return out


def threshold_storm(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> dict:
    """An unreviewed threshold edit (queue rule 20 -> 5) makes the busy replicas alert at once."""
    _family(inc, "threshold-storm")
    cl = dep.cluster
    name = translate(dep.engine, s._style(cl, KINDS["queue"], None, None)[0])
    t_rev = t0 + 24 * M + _j(s, dep.name, "rev", lo=-3, hi=3)
    r = rng_for(s.key, "storm", dep.name)
    details = {"cluster": cl.name, "namespace": dep.namespace, "alertname": name,
               "rule_file": f"{dep.namespace}/vllm-queue.rules.yaml", "deployment": dep.name,
               "model": dep.served_name}
    out = {"change": s.change(
        t0, "threshold_edit", f"prometheus-rules: lower {name} threshold 20 -> 5 for {dep.namespace}",
        "prometheus-rules-ci", dict(details, old_threshold="20", new_threshold="5", reviewed="false",
                                    author=s.person(2)),
        inc=inc, root=True, dep=dep,
        links=[{"href": f"https://git.{s.world.domain}/sre/prometheus-rules/pull/{r.randint(100, 900)}",
                "text": "merged PR"}])}
    for i, p in enumerate(dep.pods[:3]):
        s.effect("waiting", p, 5, 7.5 + i, t0 - 50 * M, t_rev + 20 * M, ramp_s=600)
        occ = s.fire("queue", p, t0 + (i * 20 - 90) * NS, t_rev, inc=inc, threshold=5, bump=False,
                     value=7 + i)
        occ.signal = ("waiting", [p.name], 5, "up")
        out[f"queue{i}"] = occ
    out["revert"] = s.change(
        t_rev, "threshold_edit", f"prometheus-rules: revert {name} threshold 5 -> 20 for {dep.namespace}",
        "prometheus-rules-ci", dict(details, old_threshold="5", new_threshold="20", reviewed="true",
                                    author=s.person(0)), inc=inc, dep=dep)
    out["end"] = t_rev
    return out


# -- noise ------------------------------------------------------------------------------------------

def noise_disk_flap(s: Story, node: Node, t0: int, flaps: int = 3) -> list[Occurrence]:
    occs = []
    t = t0
    for i in range(flaps):
        dur = (6 + 5 * i) * M + _j(s, node.name, i, "df", lo=0, hi=4)
        occs.append(s.fire("disk", node, t, t + dur, inc=None))
        t += dur + (25 + 10 * i) * M + _j(s, node.name, i, "dg", lo=0, hi=10)
    return occs


def noise_cert(s: Story, cluster: Cluster, t0: int) -> Occurrence:
    labels = {"instance": f"https://api.{s.world.org}-llm.com", "job": "blackbox-exporter"}
    return s.fire("cert", static_target(cluster, labels), t0, None, inc=None, value=11, bump=False)


def noise_job_failed(s: Story, dep: Deployment, t0: int) -> Occurrence:
    r = rng_for(s.key, "jobf", dep.name, t0)
    labels = {"namespace": dep.namespace, "job_name": f"eval-{dep.name[:20]}-{r.randint(28000000, 29999999)}",
              "job": "kube-state-metrics", "instance": f"{s.ksm_ips[dep.cluster.name]}:8080", "condition": "true"}
    return s.fire("job_failed", static_target(dep.cluster, labels), t0, t0 + 50 * M, inc=None, bump=False)


def noise_cpu_throttle(s: Story, dep: Deployment, t0: int) -> Occurrence:
    r = rng_for(s.key, "cpu", dep.name, t0)
    pod = f"{dep.name}-router-{hex_id(r, 9)}-{hex_id(r, 5)}"
    labels = {"namespace": dep.namespace, "pod": pod, "container": "router"}
    return s.fire("cpu_throttle", static_target(dep.cluster, labels), t0, t0 + 40 * M, inc=None, bump=False,
                  value=38)


def noise_clock(s: Story, node: Node, t0: int) -> Occurrence:
    labels = {"instance": f"{node.ip}:9100", "job": "node-exporter"}
    return s.fire("clock", static_target(node.cluster, labels), t0, t0 + 25 * M, inc=None, bump=False)


def noise_kv_blip(s: Story, dep: Deployment, t0: int) -> Occurrence:
    """A lone KV-usage spike that clears by itself: same names as real trouble, no cascade."""
    return s.fire("kv_usage", dep.pods[-1], t0, t0 + 13 * M, inc=None)


def noise_gpu_temp(s: Story, dep: Deployment, t0: int) -> Occurrence:
    pod = dep.pods[-1]
    return s.fire("gpu_temp", (pod.gpu, pod), t0, t0 + 12 * M, inc=None, peak=88, value=88)


# -- people ---------------------------------------------------------------------------------------

def respond(s: Story, first: Occurrence, *, who: int, ack_s: float = 240, resolve_after: int | None = None,
            notes: tuple[str, ...] = (), mitigate_after: int | None = None, severity: str | None = None,
            assign_to: int | None = None) -> None:
    """The on-call's usual moves on an incident, named by its first alert (retargeted at replay
    time to whichever of the incident's alerts is firing)."""
    by = s.person(who)
    s.act("acknowledge", first, after_s=ack_s, by=by)
    if assign_to is not None:
        s.act("assign", first, after_s=ack_s + 30, by=by, username=s.person(assign_to))
    if severity:
        s.act("severity", first, after_s=ack_s + 60, by=by, level=severity)
    for i, text in enumerate(notes):
        s.act("note", first, after_s=ack_s + 120 + 240 * i, by=s.person(assign_to if assign_to is not None else who),
              text=text)
    if mitigate_after is not None:
        s.act("mitigate", first, at=mitigate_after, by=by)
    if resolve_after is not None:
        s.act("resolve", first, at=resolve_after, by=s.person(assign_to if assign_to is not None else who))


def _first(occs: list[Occurrence]) -> Occurrence:
    items = [o for o in occs if hasattr(o, "starts")]
    return min(items, key=lambda o: (o.starts, o.seq))


def _occs(out: dict) -> list:
    return [v for v in out.values() if hasattr(v, "starts")]


def _last_end(out: dict) -> int:
    return max((o.ends or o.starts) for o in _occs(out))


# -- scenarios ------------------------------------------------------------------------------------

def sc_frag_oom(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4, engine=_engine(s, "frag", ("vllm", "vllm", "sglang")))
    other = s.world.deployment(cl)
    t0 = s.start + 70 * M
    inc = s.incident()
    out = frag_oom(s, dep, t0, inc, slow=True)
    noise_job_failed(s, dep, t0 - 5 * M)  # fires (for: 15m) minutes before the cascade's first alert
    first = _first(_occs(out))
    respond(s, first, who=0, assign_to=1, severity="critical",
            notes=(f"{out['oom'].labels['pod']} OOMKilled, siblings queueing; KV cache pinned at 98%",
                   "fragmentation alert fired late (15m avg rule); compaction not enabled on this pool"),
            mitigate_after=out["t_fix"] + 60 * NS, resolve_after=_last_end(out) + 5 * M)
    s.act("degrade", first, at=out["t_oom"] + 9 * M, by=s.person(1), level="L2")
    noise_kv_blip(s, other, t0 - 25 * M)


def sc_preemption(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=3)
    t0 = s.start + 65 * M
    inc = s.incident()
    out = preemption_itl(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(s, first, who=1, notes=("long-context batch job hitting the chat pool; "
                                                        "asked them to route to the batch deployment",),
            resolve_after=_last_end(out) + 4 * M)
    s.act("degrade", first, after_s=600, by=s.person(1), level="L1")


def sc_hot(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4, engine=_engine(s, "hot"))
    t0 = s.start + 65 * M
    inc = s.incident()
    out = hot_instance(s, dep, t0, inc, slow=True)
    first = _first(_occs(out))
    respond(s, first, who=2, notes=("one replica takes ~60% of traffic: shared system prompt "
                                                    "hashes to it; enabling prefix-aware routing",),
            resolve_after=_last_end(out) + 3 * M)


def sc_numeric(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4)
    t0 = s.start + 62 * M
    inc = s.incident()
    corrupt = rng_for(s.key, "corrupt").random() < 0.6
    out = numeric(s, dep, t0, inc, corrupt_metric=corrupt)
    first = _first(_occs(out))
    respond(s, first, who=0, severity="critical",
            notes=("garbage completions from one replica; quarantined the pod, batch fence to follow",),
            mitigate_after=out["end"] - 2 * M, resolve_after=_last_end(out) + 5 * M)


def sc_xid(s: Story) -> None:
    cl = s.world.clusters[-1]
    dep = s.world.deployment(cl, pods=3, engine=_engine(s, "xid"))
    t0 = s.start + 66 * M
    inc = s.incident()
    code = rng_for(s.key, "xid").choice([79, 48, 94, 79])
    node_name = dep.pods[0].gpu.node.name
    out = xid_crash(s, dep, t0, inc, code=code, late_s=rng_for(s.key, "late").uniform(360, 540))
    first = _first(_occs(out))
    respond(s, first, who=2, assign_to=3,
            notes=(f"GPU on {node_name} throws Xid {code}; cordoned and drained the node",),
            mitigate_after=out["t_drain"] + 2 * M, resolve_after=_last_end(out) + 6 * M)


def sc_ghost(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=3, engine=_engine(s, "ghost"))
    t0 = s.start + 64 * M
    inc = s.incident()
    out = ghost_requests(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(s, first, who=1, notes=("clients time out at 30 s but the engine keeps generating; "
                                                   "enabling abort-on-disconnect",),
            resolve_after=_last_end(out) + 4 * M)


def sc_spec(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=3)
    t0 = s.start + 62 * M
    inc = s.incident()
    out = spec_decode(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(s, first, who=0, notes=("draft acceptance collapsed after a traffic mix shift",),
            resolve_after=_last_end(out) + 3 * M)
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
    respond(s, first, who=1, notes=("new image crash-loops at start-up; rolling back",),
            resolve_after=_last_end(out) + 4 * M)


def sc_config(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4)
    t0 = s.start + 52 * M
    inc = s.incident()
    out = config_oom(s, dep, t0, inc)
    first = _first(_occs(out))
    respond(s, first, who=2, notes=("CUDA OOM on two replicas since the helm change; "
                                                     "reverting gpu_memory_utilization to 0.90",),
            resolve_after=_last_end(out) + 4 * M)


def _decoy_rollout(s: Story, dep: Deployment, at: int, kind: str = "rollout") -> Change:
    cl = dep.cluster
    r = rng_for(s.key, "decoy", dep.name, at)
    if kind == "threshold_edit":
        summary = f"prometheus-rules: raise VLLMRequestsQueued threshold 20 -> 30 ({cl.name})"
        return s.change(at, "threshold_edit", summary, "prometheus-rules-ci",
                        {"cluster": cl.name, "namespace": dep.namespace, "alertname": "VLLMRequestsQueued",
                         "old_threshold": "20", "new_threshold": "30", "reviewed": "true",
                         "author": s.person(5)}, inc=None)
    tag = r.choice(["2025.11.3", "2025.12.1", "r142", "r157", "sha-" + hex_id(r, 7)])
    if r.random() < 0.4:
        return s.change(at, "deploy", f"Deploy {dep.namespace}/{dep.name}-router {tag}", "github-actions",
                        {"cluster": cl.name, "namespace": dep.namespace, "deployment": f"{dep.name}-router",
                         "model": dep.served_name, "image": f"{s.world.org}/llm-router:{tag}",
                         "author": s.person(4)}, inc=None,
                        links=[{"href": f"https://github.com/{s.world.org}/llm-router/actions/runs/"
                                        f"{r.randint(10**9, 10**10)}", "text": "workflow run"}])
    return s.change(at, "rollout", f"Argo CD sync {dep.namespace}/{dep.name}: router image {tag}",
                    f"argocd.{cl.name}", {"cluster": cl.name, "namespace": dep.namespace, "deployment": dep.name,
                                          "model": dep.served_name, "image": f"{s.world.org}/llm-router:{tag}",
                                          "author": s.person(4)}, inc=None,
                    links=[{"href": f"https://argocd.{s.world.domain}/applications/{dep.name}",
                            "text": "Argo CD application"}])


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
    s.change(T + 10 * M, "threshold_edit",
             f"prometheus-rules: raise {frag_kind_name} threshold 0.25 -> 0.40", "prometheus-rules-ci",
             {"cluster": cl.name, "namespace": dep.namespace, "alertname": frag_kind_name,
              "rule_file": "llm-serving/kv-cache.rules.yaml", "old_threshold": "0.25", "new_threshold": "0.40",
              "reviewed": "false", "verified_in_staging": "false", "author": s.person(5),
              "deployment": dep.name, "model": dep.served_name},
             inc=inc, dep=dep,
             links=[{"href": f"https://git.{s.world.domain}/sre/prometheus-rules/commit/{hex_id(r, 40)}",
                     "text": "commit (pushed to main, no review)"}])
    for i, p in enumerate(key_pods):
        s.effect("frag", p, 0.25, 0.47 - 0.04 * i, T + 15 * M + i * 4 * M, T + 60 * M + i * 2 * M,
                 ramp_s=900, decay_s=60)
        s.effect("fb", p, 0.85, 0.985, T + 30 * M + i * 3 * M, T + 60 * M + i * 2 * M, ramp_s=900, decay_s=30)
    # the raised threshold (0.40) is what the rule checks since T+10m: it fires at T+45m
    frag = s.fire("kv_frag", key_pods[0], T + 40 * M, T + 60 * M, inc=inc, root=True, bump=False,
                  value=0.43, threshold=0.40)
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
    s.act("note", frag, at=T + 47 * M, by=oncall,
          text="fragmentation alert again; threshold was raised today, looks like noise. Judged false positive.")
    s.act("false_positive", frag, at=T + 47 * M + 20 * NS, by=oncall)
    s.act("severity", ooms[0], at=T + 62 * M, by=oncall, level="critical")
    s.act("assign", ooms[0], at=T + 63 * M, by=oncall, username=lead)
    s.act("note", ooms[0], at=T + 66 * M, by=lead,
          text="key nodes OOM one after another; GPU memory above 85% since 01:30 per DCGM")
    s.act("degrade", ooms[0], at=T + 75 * M, by=lead, level="L3")
    s.act("note", ooms[0], at=T + 75 * M + 30 * NS, by=lead,
          text="degradation plan: switched long-context traffic to the small-model replica (banner on)")
    s.act("mitigate", ooms[0], at=T + 88 * M, by=lead)
    s.act("resolve", ooms[0], at=T + 112 * M, by=lead)
    noise_cert(s, cl, T + 5 * M)


def sc_fleet_day(s: Story) -> None:
    """Several incidents, noise and decoys over hours in several clusters: the labelled set.

    The cast is fixed (so every seed keeps the hard cases); clusters, deployments, offsets,
    rule styles and options vary with the seed."""
    w = s.world
    r = rng_for(s.key, "fleet")
    c0, c1, c2, c3 = r.sample(w.clusters, 4)
    e = {k: _engine(s, f"fd-{k}") for k in ("a", "c", "e", "g", "k", "b0", "b1", "b2", "b3")}
    e["a"] = _engine(s, "fd-a", ("vllm", "vllm", "sglang"))
    big = [w.deployment(c0, pods=4, engine=e["a"]), w.deployment(c0, pods=3),
           w.deployment(c1, pods=3, engine=e["c"]), w.deployment(c2, pods=4),
           w.deployment(c3, pods=4, engine=e["e"]), w.deployment(c1, pods=4),
           w.deployment(c2, pods=3, engine=e["g"]), w.deployment(c3, pods=4),
           w.deployment(c0, pods=3), w.deployment(r.choice([c1, c2]), pods=3, engine=e["k"])]
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
    respond(s, fa, who=0, ack_s=ack(), assign_to=1, severity="critical",
            notes=("OOM on one replica, the others queue; KV cache full before the OOM",),
            mitigate_after=a["t_fix"] + 2 * M, resolve_after=_last_end(a) + 6 * M)
    s.act("degrade", fa, at=a["t_oom"] + int(r.uniform(6, 12) * M), by=s.person(1), level=r.choice(["L2", "L3"]))

    # B: preemption cascade on another model in the same cluster, overlapping A
    inc_b = s.incident()
    b = preemption_itl(s, big[1], at(8, 20), inc_b)
    fb_ = _first(_occs(b))
    respond(s, fb_, who=2, ack_s=ack(), resolve_after=_last_end(b) + 4 * M)
    s.act("note", fb_, after_s=ack() + 200, by=s.person(2),
          text="TPOT breach is on a different model than the OOM; not the same incident")
    # whoever holds the failed eval job with A's cascade splits it out (a no-op if it stood alone)
    s.act("split", job, after_s=240, by=s.person(1), alerts=[job])

    # C: GPU Xid cascade in c1 while A runs (another cluster); its cause is delivered late
    inc_c = s.incident()
    c = xid_crash(s, big[2], at(-5, 15), inc_c, code=r.choice([79, 48, 94, 95]), late_s=r.uniform(360, 600))
    fc = _first(_occs(c))
    respond(s, fc, who=3, ack_s=ack(), notes=("drained the node with the failing GPU",),
            mitigate_after=c["t_drain"] + 2 * M, resolve_after=_last_end(c) + 5 * M)
    s.act("merge", c["crash"], after_s=240, by=s.person(3), into=c["ttft"])

    # D: a rollout in c2 as root, with a decoy rollout of a bystander just before it
    inc_d = s.incident()
    t_d = at(60, 95)
    _decoy_rollout(s, bystander[2], t_d - int(r.uniform(4, 12) * M))
    d = rollout_crash(s, big[3], t_d, inc_d)
    fd = _first(_occs(d))
    respond(s, fd, who=4, ack_s=ack(), notes=("new vLLM image crash-loops; rolled back",),
            resolve_after=_last_end(d) + 5 * M)

    # E: hot instance in c3 (the skew rule is slow in most seeds and fires last)
    inc_e = s.incident()
    hot = hot_instance(s, big[4], at(30, 55), inc_e, slow=r.random() < 0.75, idx=r.randrange(4))
    fe = _first(_occs(hot))
    respond(s, fe, who=5, ack_s=ack(), resolve_after=_last_end(hot) + 3 * M)

    # F: numeric trouble in c1, later in the day
    inc_f = s.incident()
    f = numeric(s, big[5], at(135, 165), inc_f, corrupt_metric=r.random() < 0.5, idx=r.randrange(4))
    ff = _first(_occs(f))
    respond(s, ff, who=0, ack_s=ack(), severity="critical",
            mitigate_after=f["end"] - 3 * M, resolve_after=_last_end(f) + 4 * M)

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
    j = frag_oom(s, big[0], t_j, inc_j, slow=r.random() < 0.5, fb_alert=False, crash_minutes=16,
                 bad=a["bad"] if r.random() < 0.7 else (a["bad"] + 1) % 4)
    fj = _first(_occs(j))
    respond(s, fj, who=4, ack_s=ack(),
            notes=("same pool as this morning; fragmentation again",), resolve_after=_last_end(j) + 5 * M)
    s.act("resolve", fj, at=j["t_fix"] + 60 * NS, by=s.person(4))  # too early: the TTFT breach is still open
    s.act("reopen", j["ttft"], at=j["t_fix"] + 3 * M, by=s.person(4))

    # K: an unreviewed threshold edit as root: the queue rule now fires on every busy replica
    inc_k = s.incident()
    k = threshold_storm(s, big[9], at(120, 250), inc_k)
    respond(s, k["queue0"], who=5, ack_s=ack(),
            notes=("alert storm right after the rules PR; reverting the threshold",),
            resolve_after=k["end"] + 6 * M)

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


def sc_threshold_storm(s: Story) -> None:
    cl = s.world.clusters[0]
    dep = s.world.deployment(cl, pods=4, engine=_engine(s, "storm"))
    t0 = s.start + 61 * M
    inc = s.incident()
    out = threshold_storm(s, dep, t0, inc)
    respond(s, out["queue0"], who=1, notes=("alert storm right after the rules PR",),
            resolve_after=out["end"] + 5 * M)


SCENARIOS: dict[str, tuple[Callable[[Story], None], dict, str]] = {
    "frag-oom": (sc_frag_oom, {}, "KV fragmentation -> KV pool exhaustion -> OOM -> crash loop -> sibling "
                                  "queueing -> TTFT breach (slow root rule fires after its effects)"),
    "preemption-itl": (sc_preemption, {}, "long-context burst -> preemption storm -> ITL jitter and TPOT breach"),
    "hot-instance": (sc_hot, {}, "prefix-hash hotspot -> queueing on one replica -> TTFT"),
    "numeric-nan": (sc_numeric, {}, "NaN logits -> repetition / garbage output -> error rate"),
    "gpu-xid-crash": (sc_xid, {"clusters": 2}, "GPU Xid / ECC -> engine crash -> target down, crash loop -> "
                                               "TTFT (cause delivered late)"),
    "ghost-requests": (sc_ghost, {}, "client disconnects -> ghost requests -> queueing -> TTFT"),
    "spec-decode-tpot": (sc_spec, {}, "speculative-decoding acceptance drop -> TPOT breach"),
    "rollout-crashloop": (sc_rollout, {}, "rollout (root) -> crash loop, replicas mismatch, queueing, TTFT; "
                                          "plus a decoy rollout"),
    "config-oom": (sc_config, {}, "config change (root) -> GPU memory -> CUDA OOM -> queueing -> TTFT"),
    "threshold-storm": (sc_threshold_storm, {}, "unreviewed threshold edit (root) -> queue alerts on every busy "
                                                "replica -> revert"),
    "march-oom": (sc_march, {"step_s": 15}, "the March incident: unreviewed threshold edit, GPU memory > 85%, "
                                            "fragmentation alert judged false positive, OOMs, degradation"),
    "fleet-day": (sc_fleet_day, {"clusters": 4, "per_scope_windows": True, "sparse_s": 180},
                  "labelled set: 11 incidents over ~5 h in 4 clusters, overlaps, recurrence, noise, decoys"),
}


def build(name: str, start: int, seed: int) -> Story:
    fn, opts, _ = SCENARIOS[name]
    story = Story(name, seed, start, clusters=opts.get("clusters", 1), step_s=opts.get("step_s", 30),
                  per_scope_windows=True, sparse_s=opts.get("sparse_s", 60))
    fn(story)
    return story
