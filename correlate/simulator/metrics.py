"""Metric state of a story: each signal a baseline plus bumps; a bump is a trapezoid placed so
that it crosses the rule's threshold exactly when the story says the condition began, which keeps
alerts and series consistent by construction. Rendering it as OpenMetrics is `openmetrics.py`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from .core import NS, rng_for
from .world import Deployment, Gpu, Node, Pod

Labeller = Callable[[Pod], dict[str, str]]

TTFT_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TPOT_BUCKETS = (0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5)
Z99 = 2.3263
SIGMA = {"ttft": 0.6, "tpot": 0.25, "itl": 0.35}

BASELINES = {
    "kv": (0.35, 0.62),
    "frag": (0.05, 0.1),
    "waiting": (0.0, 2.0),
    "running": (16.0, 30.0),
    "preempt": (0.001, 0.004),
    "ttft": (0.55, 1.1),
    "tpot": (0.032, 0.05),
    "itl": (0.035, 0.06),
    "hot": (1.0, 1.0),
    "corrupt": (0.0, 0.0),
    "rep": (0.001, 0.004),
    "err": (0.001, 0.004),
    "dc": (0.002, 0.008),
    "spec": (0.72, 0.8),
    "disk": (18.0, 30.0),
    "rate": (3.0, 7.0),
    "fb": (0.9, 0.93),
    "ghost_stall": (0.0, 0.0),
    "temp": (52.0, 68.0),
}


@dataclass
class Bump:
    """A piecewise-linear excursion from a baseline: [(time, value), ...], outside it no effect."""

    points: tuple[tuple[int, float], ...]

    def value(self, t: int) -> float | None:
        pts = self.points
        if t < pts[0][0] or t > pts[-1][0]:
            return None
        for (t0, v0), (t1, v1) in zip(pts, pts[1:], strict=False):  # consecutive points
            if t <= t1:
                return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return pts[-1][1]


def make_bump(
    base: float,
    threshold: float,
    peak: float,
    cross: int,
    until: int,
    ramp_s: float = 360,
    decay_s: float = 240,
) -> Bump:
    """Leaves `base` `ramp_s` before `cross`, crosses `threshold` exactly at `cross`, reaches `peak`
    (at the same slope, but within 5 minutes and 4 ramps), holds, falls back across `threshold` exactly at
    `until` and reaches `base` `decay_s` later."""
    span = threshold - base
    full = peak - base
    if span == 0 or full == 0 or (span > 0) != (full > 0):
        raise ValueError("bump must cross its threshold")
    rise = min(ramp_s * (peak - threshold) / span, 300.0, max(30.0, 4 * ramp_s))
    fall = min(decay_s * (peak - threshold) / full, 240.0)
    t_peak = int(cross + rise * NS)
    t_hold = max(t_peak, int(until - fall * NS))
    if t_hold == t_peak and until < t_peak:  # too short to reach the peak: a spike
        return Bump(
            (
                (int(cross - ramp_s * NS), base),
                (cross, threshold),
                (max(cross + 1, until), threshold),
                (int(until + decay_s * NS), base),
            )
        )
    return Bump(
        (
            (int(cross - ramp_s * NS), base),
            (cross, threshold),
            (t_peak, peak),
            (t_hold, peak),
            (max(t_hold, until), threshold),
            (int(max(t_hold, until) + decay_s * NS), base),
        )
    )


@dataclass
class Telemetry:
    seed: str
    bumps: dict[tuple[str, str], list[Bump]] = field(default_factory=lambda: defaultdict(list))
    directions: dict[str, str] = field(default_factory=dict)
    base_cache: dict[tuple[str, str], float] = field(default_factory=dict)
    gaps: dict[str, list[tuple[int, int, bool]]] = field(default_factory=lambda: defaultdict(list))
    restarts: dict[str, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    crashloops: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    xids: dict[str, list[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(list))
    ecc: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    gpu_gone: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    lifetimes: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    windows: dict[str, tuple[int, int]] = field(default_factory=dict)
    dense: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    replicas_short: dict[str, list[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(list))
    disks: dict[str, str] = field(default_factory=dict)
    # Request outcomes (`outcomes.py`): the deployments of the story's incidents, and per deployment
    # when its incident's degradation rejects long requests.
    outcomes: set[str] = field(default_factory=set)
    shedding: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    # -- state -----------------------------------------------------------------------------
    def base(self, signal: str, key: str) -> float:
        cached = self.base_cache.get((signal, key))
        if cached is None:
            lo, hi = BASELINES[signal]
            cached = rng_for(self.seed, "base", signal, key).uniform(lo, hi)
            self.base_cache[(signal, key)] = cached
        return cached

    def set_base(self, signal: str, key: str, value: float) -> None:
        self.base_cache[(signal, key)] = value

    def bump(
        self,
        signal: str,
        key: str,
        threshold: float,
        peak: float,
        cross: int,
        until: int,
        direction: str = "up",
        ramp_s: float = 360,
        decay_s: float = 240,
        base: float | None = None,
    ) -> None:
        self.directions[signal] = direction
        b = self.base(signal, key) if base is None else base
        self.bumps[(signal, key)].append(make_bump(b, threshold, peak, cross, until, ramp_s, decay_s))

    def raw(self, signal: str, key: str, t: int) -> float:
        """The noiseless value of a signal: its baseline overlaid by its bumps."""
        value = self.base(signal, key)
        up = self.directions.get(signal, "up") == "up"
        for b in self.bumps.get((signal, key), ()):
            v = b.value(t)
            if v is not None:
                value = max(value, v) if up else min(value, v)
        return value

    def gap(self, pod: Pod, start: int, end: int, reset: bool = True) -> None:
        self.gaps[pod.name].append((start, end, reset))

    def in_gap(self, pod: Pod, t: int) -> bool:
        return any(s <= t < e for s, e, _ in self.gaps.get(pod.name, ()))

    def resets_between(self, pod: Pod, t_prev: int, t: int) -> bool:
        return any(reset and t_prev < e <= t for _, e, reset in self.gaps.get(pod.name, ()))

    def alive(self, pod: Pod, t: int) -> bool:
        born, died = self.lifetimes.get(pod.name, (None, None))
        return (born is None or t >= born) and (died is None or t < died)


# -- rendering ---------------------------------------------------------------------------------


def vllm_labels(pod: Pod) -> dict[str, str]:
    """The engine's scrape labels (SGLang adds engine_type/tp_rank, trtllm-serve engine_type)."""
    dep = pod.deployment
    labels = {
        "cluster": dep.cluster.name,
        "namespace": dep.namespace,
        "pod": pod.name,
        "instance": f"{pod.ip}:{30000 if dep.engine == 'sglang' else 8000}",
        "job": dep.job,
        "model_name": dep.served_name,
    }
    if dep.engine == "sglang":
        labels.update({"engine_type": "unified", "tp_rank": "0"})
    elif dep.engine == "trtllm":
        labels["engine_type"] = "trtllm"
    return labels


def frag_labels(pod: Pod) -> dict[str, str]:
    dep = pod.deployment
    return {
        "cluster": dep.cluster.name,
        "namespace": dep.namespace,
        "pod": pod.name,
        "instance": f"{pod.ip}:9500",
        "job": "kv-frag-exporter",
        "model_name": dep.served_name,
    }


def http_labels(pod: Pod) -> dict[str, str]:
    dep = pod.deployment
    return {
        "cluster": dep.cluster.name,
        "namespace": dep.namespace,
        "service": dep.name,
        "pod": pod.name,
        "instance": f"{pod.ip}:8000",
        "job": dep.job,
        "handler": "/v1/chat/completions",
        "method": "POST",
    }


def ksm_labels(pod: Pod, ksm_ip: str) -> dict[str, str]:
    dep = pod.deployment
    return {
        "cluster": dep.cluster.name,
        "job": "kube-state-metrics",
        "instance": f"{ksm_ip}:8080",
        "namespace": dep.namespace,
        "pod": pod.name,
        "container": dep.container,
        "uid": pod.uid,
    }


def ksm_gpu_request_labels(pod: Pod, ksm_ip: str) -> dict[str, str]:
    """kube_pod_container_resource_requests' labels: the reference's §2.5 gives its sibling
    `kube_pod_container_resource_limits` (kube-state-metrics pod-metrics.md) `resource`
    (`nvidia.com/gpu` sanitised to `nvidia_com_gpu`), `unit` and `node` beside the pod's labels."""
    return dict(ksm_labels(pod, ksm_ip), node=pod.node.name, resource="nvidia_com_gpu", unit="integer")


def envoy_labels(dep: Deployment, proxy: tuple[str, str]) -> dict[str, str]:
    """An Envoy Gateway proxy's scrape labels (its pods run in envoy-gateway-system and serve
    /stats/prometheus on 19001) and the xDS cluster Envoy Gateway names after the HTTPRoute's rule,
    `httproute/<namespace>/<route>/rule/<index>`; the route is named after the deployment."""
    pod, ip = proxy
    return {
        "cluster": dep.cluster.name,
        "namespace": "envoy-gateway-system",
        "pod": pod,
        "instance": f"{ip}:19001",
        "job": "envoy-proxy",
        "envoy_cluster_name": f"httproute/{dep.namespace}/{dep.name}/rule/0",
    }


def dcgm_labels(gpu: Gpu, pod: Pod | None) -> dict[str, str]:
    node = gpu.node
    cl = node.cluster
    d = {
        "cluster": cl.name,
        "job": cl.dcgm_job,
        "instance": f"{node.ip}:9400",
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "device": f"nvidia{gpu.index}",
        "modelName": node.gpu_model,
        cl.dcgm_host_label: node.name,
    }
    if pod is not None:
        dep = pod.deployment
        if cl.honor_labels:
            d.update({"namespace": dep.namespace, "pod": pod.name, "container": dep.container})
        else:
            d.update(
                {
                    "namespace": cl.dcgm_namespace,
                    "pod": cl.dcgm_pods[node.name],
                    "exported_namespace": dep.namespace,
                    "exported_pod": pod.name,
                    "exported_container": dep.container,
                }
            )
    return d


def node_labels(node: Node) -> dict[str, str]:
    return {"cluster": node.cluster.name, "job": "node-exporter", "instance": f"{node.ip}:9100"}


XID_TEXT = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
}
