"""Scenario families, one cascade each: a function `(story, deployment, t0, incident, **options)
-> dict of occurrences` fires the alerts of one cascade with realistic rule timing, moves the
metrics underneath and records which occurrence is the root; the noise alerts, decoy changes
and how people respond. `scenarios.py` places them on the fleet."""

from __future__ import annotations

from typing import Any

from .alertmanager import Occurrence
from .core import MINUTE, NS, hex_id, rng_for
from .metrics import XID_TEXT
from .records import Change, Incident
from .rules import KINDS
from .story import Story
from .targets import static_target
from .world import Cluster, Deployment, Node, translate

M = MINUTE
# What a cascade returns: its occurrences and changes by role ("frag", "oom", "queue0", "change"...)
# and its times and choices ("t_oom", "t_fix", "end": ns; "bad": the pod's index).
Outcome = dict[str, Any]


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


def frag_oom(
    s: Story,
    dep: Deployment,
    t0: int,
    inc: Incident | None,
    *,
    slow: bool = True,
    bad: int = 0,
    fb_alert: bool = True,
    crash_minutes: int = 22,
) -> Outcome:
    """Fragmentation -> KV pool exhaustion -> OOM -> crash loop -> sibling queueing -> TTFT."""
    _family(inc, "frag-oom")
    pod = dep.pods[bad]
    sibs = [p for p in dep.pods if p is not pod]
    t_oom = t0 + 23 * M + _j(s, dep.name, t0, "oom")
    t_cl = t_oom + 6 * M
    t_fix = t_cl + crash_minutes * M
    out: Outcome = {}
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


def preemption_itl(
    s: Story, dep: Deployment, t0: int, inc: Incident | None, *, slow: bool = False
) -> Outcome:
    """Long-context burst -> preemption storm -> ITL jitter and TPOT breach."""
    _family(inc, "preemption-itl")
    p1, p2 = dep.pods[0], dep.pods[1]
    end = t0 + 26 * M + _j(s, dep.name, t0, "pe", lo=-3, hi=3)
    out: Outcome = {}
    for p in (p1, p2):
        s.effect("kv", p, 0.8, 0.885, t0 - 4 * M, end, ramp_s=300)
    out["preempt"] = s.fire("preempt", p1, t0, end, inc=inc, root=True)
    s.effect("preempt", p2, 0.05, 0.09, t0 + 1 * M, end)
    out["itl"] = s.fire("itl", p1, t0 + 70 * NS, end + 1 * M, inc=inc)
    out["tpot"] = s.fire("tpot", dep, t0 + 2 * M, end + 1 * M, inc=inc, pods=[p1, p2])
    s.effect("waiting", p1, 6, 12, t0 + 1 * M, end)
    out["end"] = end
    return out


def hot_instance(
    s: Story, dep: Deployment, t0: int, inc: Incident | None, *, slow: bool = False, idx: int = 1
) -> Outcome:
    """Prefix-hash hotspot -> queueing on that pod -> its TTFT."""
    _family(inc, "hot-instance")
    pod = dep.pods[idx]
    end = t0 + 38 * M + _j(s, dep.name, t0, "hot", lo=-4, hi=4)
    out: Outcome = {}
    out["hot"] = s.fire("hot", pod, t0, end, inc=inc, root=True, slow=slow)
    out["queue"] = s.fire("queue", pod, t0 + 2 * M, end, inc=inc)
    s.effect("kv", pod, 0.8, 0.875, t0 + 1 * M, end)
    out["ttft"] = s.fire("ttft_pod", pod, t0 + 3 * M, end + 1 * M, inc=inc)
    out["end"] = end
    return out


def numeric(
    s: Story, dep: Deployment, t0: int, inc: Incident | None, *, corrupt_metric: bool = True, idx: int = 0
) -> Outcome:
    """NaN/Inf in one batch -> repetition / garbage completions -> error rate."""
    _family(inc, "numeric-nan")
    pod = dep.pods[idx]
    end = t0 + 30 * M + _j(s, dep.name, t0, "nan", lo=-4, hi=4)
    out: Outcome = {}
    if corrupt_metric:
        out["nan"] = s.fire("nan", pod, t0, end, inc=inc, root=True, ramp_s=20)  # NaNs start abruptly
    n = len(dep.pods)
    out["rep"] = s.fire(
        "repetition",
        dep,
        t0 + 60 * NS,
        end,
        inc=inc,
        pods=[pod],
        peak=min(0.6, 0.4 * n / 4),
        root=not corrupt_metric,
    )
    out["err"] = s.fire("errors", dep, t0 + 3 * M, end, inc=inc, pods=[pod], peak=0.22)
    out["end"] = end
    return out


def xid_crash(
    s: Story, dep: Deployment, t0: int, inc: Incident | None, *, code: int = 79, late_s: float = 0
) -> Outcome:
    """GPU Xid (and ECC) -> engine crash -> target down, crash loop -> siblings' TTFT."""
    _family(inc, "gpu-xid-crash")
    pod = dep.pods[0]
    sibs = dep.pods[1:]
    gpu = pod.gpu
    t_drain = t0 + 34 * M + _j(s, dep.name, t0, "drain", lo=-3, hi=3)
    out: Outcome = {}
    s.xid(gpu, t0, code, hold_s=int((t_drain - t0) / NS))
    out["xid"] = s.fire(
        "xid",
        (gpu, pod),
        t0,
        t_drain,
        inc=inc,
        root=True,
        delay_s=late_s,
        value=code,
        labels={"err_code": str(code), "err_msg": XID_TEXT[code]},
    )
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


def ghost_requests(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> Outcome:
    """Client disconnects (30 s client timeout) -> ghost requests keep generating -> queueing -> TTFT."""
    _family(inc, "ghost-requests")
    p1, p2 = dep.pods[0], dep.pods[1]
    end = t0 + 34 * M + _j(s, dep.name, t0, "gh", lo=-4, hi=4)
    out: Outcome = {}
    out["dc"] = s.fire("disconnects", dep, t0, end, inc=inc, root=True)
    for i, p in enumerate((p1, p2)):
        s.effect("ghost_stall", p, 0.3, 0.93, t0 + 1 * M, end, ramp_s=60)
        out[f"ghost{i}"] = s.fire("ghost", p, t0 + (2 + i) * M, end, inc=inc)
    out["queue"] = s.fire("queue", p1, t0 + 4 * M, end + 2 * M, inc=inc)
    out["ttft"] = s.fire("ttft", dep, t0 + 5 * M, end + 2 * M, inc=inc, pods=[p1, p2])
    out["end"] = end
    return out


def spec_decode(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> Outcome:
    """Speculative-decoding acceptance collapses (traffic mix shift) -> TPOT breach."""
    _family(inc, "spec-decode-tpot")
    p1, p2 = dep.pods[0], dep.pods[1]
    end = t0 + 36 * M + _j(s, dep.name, t0, "sp", lo=-4, hi=4)
    out: Outcome = {}
    out["spec"] = s.fire("spec", p1, t0, end, inc=inc, root=True)
    out["spec2"] = s.fire("spec", p2, t0 + 3 * M, end, inc=inc)
    out["tpot"] = s.fire("tpot", dep, t0 + 60 * NS, end + 1 * M, inc=inc, pods=[p1, p2])
    out["end"] = end
    return out


def rollout_crash(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> Outcome:
    """A rollout whose new pods crash-loop -> replicas mismatch -> survivors queue -> TTFT."""
    _family(inc, "rollout-crashloop")
    old = list(dep.pods)
    cl = dep.cluster
    r = rng_for(s.key, "rollout", dep.name)
    v_old, v_new = r.choice([("v0.10.1", "v0.11.0"), ("v0.9.2", "v0.10.1"), ("v0.11.2", "v0.12.0")])
    t_back = t0 + 40 * M + _j(s, dep.name, "rb", lo=-3, hi=3)
    out: Outcome = {}
    author = s.person(3)
    image = {
        "vllm": "vllm/vllm-openai",
        "sglang": "lmsysorg/sglang",
        "trtllm": "nvcr.io/nvidia/tritonserver",
    }[dep.engine]
    if r.random() < 0.6:
        kind, summary, source = (
            "rollout",
            f"Argo CD sync {dep.namespace}/{dep.name}: {image}:{v_old} -> {v_new}",
            f"argocd.{cl.name}",
        )
    else:
        kind, summary, source = (
            "deploy",
            f"Deploy {dep.name} {v_new} to {cl.name} (workflow run #{r.randint(2000, 9000)})",
            "github-actions",
        )
    out["change"] = s.change(
        t0,
        kind,
        summary,
        source,
        {
            "cluster": cl.name,
            "namespace": dep.namespace,
            "deployment": dep.name,
            "model": dep.served_name,
            "image": f"{image}:{v_new}",
            "previous_image": f"{image}:{v_old}",
            "revision": hex_id(r, 7),
            "author": author,
        },
        inc=inc,
        root=True,
        dep=dep,
        links=[
            {
                "href": f"https://argocd.{s.world.domain}/applications/{dep.name}",
                "text": "Argo CD application",
            }
            if kind == "rollout"
            else {
                "href": f"https://github.com/{s.world.org}/ml-deploy/actions/runs/{r.randint(10**9, 10**10)}",
                "text": "workflow run",
            },
            {
                "href": f"https://git.{s.world.domain}/ml-platform/deploy/commit/{hex_id(r, 40)}",
                "text": "commit",
            },
        ],
    )
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
        t_back,
        "rollback",
        f"Argo CD rollback {dep.namespace}/{dep.name} to {image}:{v_old}",
        f"argocd.{cl.name}",
        {
            "cluster": cl.name,
            "namespace": dep.namespace,
            "deployment": dep.name,
            "model": dep.served_name,
            "image": f"{image}:{v_old}",
            "author": s.person(1),
        },
        inc=inc,
        dep=dep,
    )
    dep.rs_hash = old_hash
    back = s.world._pod(dep)
    dep.pods = survivors + [back]
    dep.old_pods = [old[-1]] + new
    s.lifetime(back, born=t_back + 2 * M)
    out["t_back"] = t_back
    return out


def config_oom(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> Outcome:
    """A config change (gpu_memory_utilization up, max_num_seqs doubled) -> CUDA OOMs under load."""
    _family(inc, "config-oom")
    cl = dep.cluster
    r = rng_for(s.key, "cfg", dep.name)
    out: Outcome = {}
    out["change"] = s.change(
        t0,
        "config",
        f"helm upgrade {dep.name}: gpu_memory_utilization 0.90 -> 0.95, max_num_seqs 256 -> 512",
        r.choice(["helm", "github-actions", "flux"]),
        {
            "cluster": cl.name,
            "namespace": dep.namespace,
            "deployment": dep.name,
            "model": dep.served_name,
            "chart": "vllm-stack",
            "values_diff": "gpu_memory_utilization: 0.95; max_num_seqs: 512",
            "author": s.person(4),
        },
        inc=inc,
        root=True,
        dep=dep,
        ts_style="pd",
        links=[
            {
                "href": f"https://git.{s.world.domain}/ml-platform/helm-values/pull/{r.randint(300, 2000)}",
                "text": "pull request",
            }
        ],
    )
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


def threshold_storm(s: Story, dep: Deployment, t0: int, inc: Incident | None) -> Outcome:
    """An unreviewed threshold edit (queue rule 20 -> 5) makes the busy replicas alert at once."""
    _family(inc, "threshold-storm")
    cl = dep.cluster
    name = translate(dep.engine, s._style(cl, KINDS["queue"], None, None)[0])
    t_rev = t0 + 24 * M + _j(s, dep.name, "rev", lo=-3, hi=3)
    r = rng_for(s.key, "storm", dep.name)
    details = {
        "cluster": cl.name,
        "namespace": dep.namespace,
        "alertname": name,
        "rule_file": f"{dep.namespace}/vllm-queue.rules.yaml",
        "deployment": dep.name,
        "model": dep.served_name,
    }
    out: Outcome = {
        "change": s.change(
            t0,
            "threshold_edit",
            f"prometheus-rules: lower {name} threshold 20 -> 5 for {dep.namespace}",
            "prometheus-rules-ci",
            dict(details, old_threshold="20", new_threshold="5", reviewed="false", author=s.person(2)),
            inc=inc,
            root=True,
            dep=dep,
            links=[
                {
                    "href": f"https://git.{s.world.domain}/sre/prometheus-rules/pull/{r.randint(100, 900)}",
                    "text": "merged PR",
                }
            ],
        )
    }
    for i, p in enumerate(dep.pods[:3]):
        s.effect("waiting", p, 5, 7.5 + i, t0 - 50 * M, t_rev + 20 * M, ramp_s=600)
        occ = s.fire(
            "queue", p, t0 + (i * 20 - 90) * NS, t_rev, inc=inc, threshold=5, bump=False, value=7 + i
        )
        occ.signal = ("waiting", [p.name], 5, "up")
        out[f"queue{i}"] = occ
    out["revert"] = s.change(
        t_rev,
        "threshold_edit",
        f"prometheus-rules: revert {name} threshold 5 -> 20 for {dep.namespace}",
        "prometheus-rules-ci",
        dict(details, old_threshold="5", new_threshold="20", reviewed="true", author=s.person(0)),
        inc=inc,
        dep=dep,
    )
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
    labels = {
        "namespace": dep.namespace,
        "job_name": f"eval-{dep.name[:20]}-{r.randint(28000000, 29999999)}",
        "job": "kube-state-metrics",
        "instance": f"{s.ksm_ips[dep.cluster.name]}:8080",
        "condition": "true",
    }
    return s.fire("job_failed", static_target(dep.cluster, labels), t0, t0 + 50 * M, inc=None, bump=False)


def noise_cpu_throttle(s: Story, dep: Deployment, t0: int) -> Occurrence:
    r = rng_for(s.key, "cpu", dep.name, t0)
    pod = f"{dep.name}-router-{hex_id(r, 9)}-{hex_id(r, 5)}"
    labels = {"namespace": dep.namespace, "pod": pod, "container": "router"}
    return s.fire(
        "cpu_throttle", static_target(dep.cluster, labels), t0, t0 + 40 * M, inc=None, bump=False, value=38
    )


def noise_clock(s: Story, node: Node, t0: int) -> Occurrence:
    labels = {"instance": f"{node.ip}:9100", "job": "node-exporter"}
    return s.fire("clock", static_target(node.cluster, labels), t0, t0 + 25 * M, inc=None, bump=False)


def noise_kv_blip(s: Story, dep: Deployment, t0: int) -> Occurrence:
    """A lone KV-usage spike that clears by itself: same names as real trouble, no cascade."""
    return s.fire("kv_usage", dep.pods[-1], t0, t0 + 13 * M, inc=None)


def noise_gpu_temp(s: Story, dep: Deployment, t0: int) -> Occurrence:
    pod = dep.pods[-1]
    return s.fire("gpu_temp", (pod.gpu, pod), t0, t0 + 12 * M, inc=None, peak=88, value=88)


def _decoy_rollout(s: Story, dep: Deployment, at: int, kind: str = "rollout") -> Change:
    cl = dep.cluster
    r = rng_for(s.key, "decoy", dep.name, at)
    if kind == "threshold_edit":
        summary = f"prometheus-rules: raise VLLMRequestsQueued threshold 20 -> 30 ({cl.name})"
        return s.change(
            at,
            "threshold_edit",
            summary,
            "prometheus-rules-ci",
            {
                "cluster": cl.name,
                "namespace": dep.namespace,
                "alertname": "VLLMRequestsQueued",
                "old_threshold": "20",
                "new_threshold": "30",
                "reviewed": "true",
                "author": s.person(5),
            },
            inc=None,
        )
    tag = r.choice(["2025.11.3", "2025.12.1", "r142", "r157", "sha-" + hex_id(r, 7)])
    if r.random() < 0.4:
        return s.change(
            at,
            "deploy",
            f"Deploy {dep.namespace}/{dep.name}-router {tag}",
            "github-actions",
            {
                "cluster": cl.name,
                "namespace": dep.namespace,
                "deployment": f"{dep.name}-router",
                "model": dep.served_name,
                "image": f"{s.world.org}/llm-router:{tag}",
                "author": s.person(4),
            },
            inc=None,
            links=[
                {
                    "href": f"https://github.com/{s.world.org}/llm-router/actions/runs/"
                    f"{r.randint(10**9, 10**10)}",
                    "text": "workflow run",
                }
            ],
        )
    return s.change(
        at,
        "rollout",
        f"Argo CD sync {dep.namespace}/{dep.name}: router image {tag}",
        f"argocd.{cl.name}",
        {
            "cluster": cl.name,
            "namespace": dep.namespace,
            "deployment": dep.name,
            "model": dep.served_name,
            "image": f"{s.world.org}/llm-router:{tag}",
            "author": s.person(4),
        },
        inc=None,
        links=[
            {
                "href": f"https://argocd.{s.world.domain}/applications/{dep.name}",
                "text": "Argo CD application",
            }
        ],
    )


# -- people ---------------------------------------------------------------------------------------


def respond(
    s: Story,
    first: Occurrence,
    *,
    who: int,
    ack_s: float = 240,
    resolve_after: int | None = None,
    notes: tuple[str, ...] = (),
    mitigate_after: int | None = None,
    severity: str | None = None,
    assign_to: int | None = None,
) -> None:
    """The on-call's usual moves on an incident, named by its first alert (retargeted at replay
    time to whichever of the incident's alerts is firing)."""
    by = s.person(who)
    s.act("acknowledge", first, after_s=ack_s, by=by)
    if assign_to is not None:
        s.act("assign", first, after_s=ack_s + 30, by=by, username=s.person(assign_to))
    if severity:
        s.act("severity", first, after_s=ack_s + 60, by=by, level=severity)
    for i, text in enumerate(notes):
        s.act(
            "note",
            first,
            after_s=ack_s + 120 + 240 * i,
            by=s.person(assign_to if assign_to is not None else who),
            text=text,
        )
    if mitigate_after is not None:
        s.act("mitigate", first, at=mitigate_after, by=by)
    if resolve_after is not None:
        s.act("resolve", first, at=resolve_after, by=s.person(assign_to if assign_to is not None else who))


def _first(occs: list[Occurrence]) -> Occurrence:
    items = [o for o in occs if hasattr(o, "starts")]
    return min(items, key=lambda o: (o.starts, o.seq))


def _occs(out: Outcome) -> list[Occurrence]:
    return [v for v in out.values() if hasattr(v, "starts")]


def _last_end(out: Outcome) -> int:
    return max((o.ends or o.starts) for o in _occs(out))


# -- scenarios ------------------------------------------------------------------------------------
