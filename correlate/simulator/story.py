"""The story builder scenarios write with: fire alerts (labels, timing, metric bumps), change
events, pod and GPU events, human actions and the ground truth, then render the five files."""

from __future__ import annotations

import os
from urllib.parse import quote_plus

from ..events import event_fingerprint
from . import alertmanager as am
from .core import MINUTE, NS, am_fingerprint, iso_ms, rng_for
from .metrics import (
    Telemetry,
    dcgm_labels,
    frag_labels,
    ksm_labels,
    node_labels,
    vllm_labels,
)
from .output import build_files
from .records import Change, Incident, Intent
from .rules import KINDS, Expr, Kind, interval_ns
from .targets import Target, resolve, static_target
from .world import Cluster, Deployment, Gpu, Node, Pod, World, translate

PEAKS = {
    "frag": 0.38,
    "kv": 0.985,
    "waiting": 46.0,
    "ttft": 6.5,
    "tpot": 0.15,
    "itl": 0.22,
    "preempt": 0.7,
    "hot": 2.5,
    "corrupt": 0.05,
    "rep": 0.16,
    "err": 0.09,
    "dc": 0.32,
    "running": 72.0,
    "spec": 0.42,
    "disk": 4.0,
    "temp": 88.0,
}
FAMILY_OF_SIGNAL = {
    "ttft": "ttft",
    "tpot": "tpot",
    "itl": "itl",
    "hot": "success",
    "rep": "success",
    "corrupt": "corrupt",
    "err": "http",
    "dc": "istio",
    "spec": "spec",
    "running": "success",
}
BACKOFF_S = (10, 20, 40, 80, 160, 300)
ENGINE_SOURCES = {"pod", "deployment", "hot", "service", "frag"}


class Story:
    # Set by `build()` (output.build_files): Alertmanager's deliveries, and per (fingerprint,
    # startsAt) when it was first delivered and first delivered firing.
    deliveries: list[am.Delivery]
    first_seen: dict[tuple[str, str], int]
    first_firing: dict[tuple[str, str], int]

    def __init__(
        self,
        scenario: str,
        seed: int,
        start: int,
        clusters: int = 1,
        step_s: int = 30,
        per_scope_windows: bool = False,
        sparse_s: int | None = None,
    ) -> None:
        self.sparse_s = sparse_s
        self.scenario = scenario
        self.seed = seed
        self.key = f"{scenario}:{seed}"
        self.rng = rng_for("story", scenario, seed)
        self.start = start
        self.world = World(rng_for("world", seed), clusters)
        self.tel = Telemetry(seed=self.key)
        self.step_s = step_s
        self.per_scope_windows = per_scope_windows
        self.occs: list[am.Occurrence] = []
        self.changes: list[Change] = []
        self.intents: list[Intent] = []
        self.incidents: list[Incident] = []
        self.noise: list[am.Occurrence | Change] = []
        self.touched: dict[str, Deployment] = {}
        self.scope_times: dict[str, list[int]] = {}
        self.dense_marks: dict[str, list[int]] = {}
        self.disk_nodes: list[tuple[Node, str]] = []
        self._seq = 0
        w = self.world
        ra = rng_for("am", seed)
        self.am_configs = {
            # a central Alertmanager for the cloud clusters, routing tuned per organisation
            "central": am.AlertmanagerConfig(
                "central",
                w.am_urls["central"],
                (
                    am.Route(
                        "rootline-pager",
                        ra.choice([("alertname", "cluster", "namespace"), ("cluster", "namespace")]),
                        30,
                        ra.choice([60, 120, 180]),
                        ra.choice([1800, 2700, 3600]),
                        (("severity", "critical"),),
                    ),
                    am.Route(
                        "rootline",
                        ra.choice([("namespace",), ("alertname", "cluster"), ("cluster", "namespace")]),
                        30,
                        ra.choice([180, 300]),
                        ra.choice([2 * 3600, 3 * 3600, 4 * 3600]),
                    ),
                ),
            ),
            # the on-prem data centre's own, slower one
            "edge": am.AlertmanagerConfig(
                "edge",
                w.am_urls["edge"],
                (
                    am.Route(
                        f"{w.org}-dc-critical", ("...",), 60, 600, 3 * 3600, (("severity", "critical"),)
                    ),
                    am.Route(f"{w.org}-dc-oncall", ("cluster", "namespace"), 60, 600, 3 * 3600),
                ),
            ),
        }
        r = rng_for("ksm", seed)
        self.ksm_ips = {
            c.name: f"10.{r.randint(64, 127)}.{r.randint(0, 255)}.{r.randint(2, 250)}" for c in w.clusters
        }

    # -- people and incidents ------------------------------------------------------------------
    def person(self, i: int = 0) -> str:
        return self.world.people[i % len(self.world.people)]

    def incident(self) -> Incident:
        inc = Incident(id=f"inc-{len(self.incidents) + 1:03d}")
        self.incidents.append(inc)
        return inc

    def _place(self, item: am.Occurrence | Change, inc: Incident | None, root: bool) -> None:
        if inc is None:
            self.noise.append(item)
            return
        inc.members.append(item)
        if root:
            inc.root = item

    def touch(self, dep: Deployment, *times: int) -> None:
        """Marks a deployment as part of the story: its series are written around `times`."""
        if dep.name not in self.touched:
            self.touched[dep.name] = dep
            self.tel.set_base("rate", dep.name, rng_for(self.key, "rate", dep.name).uniform(3.0, 7.0))
        for pod in dep.pods + dep.old_pods:
            if ("fb", pod.name) not in self.tel.base_cache:
                jitter = rng_for(self.key, "fbb", pod.name).uniform(-0.01, 0.01)
                self.tel.set_base("fb", pod.name, dep.fb_base + jitter)
        self.scope_times.setdefault(dep.name, []).extend(times)

    # -- rule choice ---------------------------------------------------------------------------
    def _style(
        self, cluster: Cluster, kind: Kind, labelled: bool | None, name_idx: int | None
    ) -> tuple[str, dict[str, str]]:
        key = kind.name
        if not cluster.style:
            # a cluster's rule packs: about half of its kinds come from the labelled platform pack
            r = rng_for(self.key, "style", cluster.name)
            kinds = sorted(KINDS)
            r.shuffle(kinds)
            flip = r.random() < 0.5
            for i, name in enumerate(kinds):
                cluster.style[name] = (
                    (i % 2 == 0) != flip,
                    r.randrange(100),
                    r.randrange(100),
                    r.randrange(100),
                )
        lab, ni, li, mi = cluster.style[key]
        if labelled is not None:
            lab = labelled
        names = kind.labelled_names if lab else kind.plain_names
        name = names[(name_idx if name_idx is not None else ni) % len(names)]
        extra: dict[str, str] = {}
        if lab:
            extra["layer"] = kind.layers[li % len(kind.layers)]
            extra["failure_mode"] = kind.modes[mi % len(kind.modes)]
        return name, extra

    def _tick(self, cluster: Cluster, kind: Kind, t: int) -> int:
        """The first evaluation of the rule's group at or after `t` (groups tick at a fixed offset)."""
        step = interval_ns(kind)
        frac = cluster.eval_frac_ns[kind.group] % step
        k = -(-(t - frac) // step)
        return k * step + frac

    # -- alerts ---------------------------------------------------------------------------------
    def fire(
        self,
        kind_name: str,
        target: Target,
        cross: int,
        until: int | None,
        *,
        inc: Incident | None,
        root: bool = False,
        slow: bool = False,
        peak: float | None = None,
        delay_s: float = 0,
        pods: list[Pod] | None = None,
        value: float | None = None,
        labelled: bool | None = None,
        name_idx: int | None = None,
        bump: bool = True,
        labels: dict[str, str] | None = None,
        severity: str | None = None,
        threshold: float | None = None,
        decay_s: float = 240,
        ramp_s: float = 360,
    ) -> am.Occurrence:
        """One alert occurrence of rule `kind_name` on `target`: the watched condition holds from
        `cross` to `until` (None: still firing at the end); startsAt and endsAt follow the rule's
        lag, `for` and eval ticks. `threshold` overrides the rule's (after a threshold edit)."""
        kind = KINDS[kind_name]
        expr: Expr = kind.slow if (slow and kind.slow) else kind.fast
        dep, pod, gpu, node, cluster = resolve(target)
        scope = self._scope(kind, target, dep, pod, gpu, node)
        starts = self._tick(cluster, kind, cross + (expr.lag_s + expr.for_s) * NS)
        if until is not None and until + expr.end_lag_s * NS <= starts + 60 * NS:
            until = starts + 90 * NS - expr.end_lag_s * NS
        ends = None if until is None else self._tick(cluster, kind, until + expr.end_lag_s * NS)
        name, extra = self._style(cluster, kind, labelled, name_idx)
        engine = dep.engine if dep is not None and kind.source in ENGINE_SOURCES else "vllm"
        name = translate(engine, name)
        alert_labels = {k: v for k, v in scope.items() if expr.keys is None or k in expr.keys}
        alert_labels.update(kind.extra)
        alert_labels.update(extra)
        alert_labels.update(labels or {})
        alert_labels["alertname"] = name
        alert_labels["severity"] = severity or kind.severity
        for k, v in cluster.ext_labels.items():
            alert_labels.setdefault(k, v)
        if kind.group in ("llm", "slo") and rng_for(self.key, "team", cluster.name).random() < 0.5:
            alert_labels.setdefault(
                "team",
                rng_for(self.key, "teamname", cluster.name).choice(
                    ["ml-platform", "llm-serving", "inference", "genai-sre"]
                ),
            )
        signal = kind.signal
        pk = peak if peak is not None else PEAKS.get(signal or "", 1.0)
        shown = value if value is not None else pk
        annotations = self._annotations(kind, expr, name, alert_labels, shown, cluster)
        promql = translate(engine, expr.promql)
        annotations = {k: translate(engine, v) if k != "runbook_url" else v for k, v in annotations.items()}
        if threshold is not None and kind.threshold is not None:
            promql = promql.replace(f" {_num(kind.threshold)}", f" {_num(threshold)}")
            annotations["description"] = annotations["description"].replace(
                f" {_num(kind.threshold)} ", f" {_num(threshold)} "
            )
        fp = am_fingerprint(alert_labels)
        self._seq += 1
        arrival = (
            starts + rng_for(self.key, "arr", fp, starts).randint(20, 900) * 1_000_000 + int(delay_s * NS)
        )
        occ = am.Occurrence(
            labels=alert_labels,
            annotations=annotations,
            starts=starts,
            ends=ends,
            generator_url=f"{cluster.prom_url}/graph?g0.expr={quote_plus(promql)}&g0.tab=1",
            fingerprint=fp,
            arrival=arrival,
            am=cluster.am,
            kind=kind_name,
            seq=self._seq,
            dep=dep,
            node=node,
        )
        if dep is not None:
            self.touch(dep, starts, ends or starts)
        if signal and bump:
            self._bump(
                kind, signal, dep, pod, gpu, node, pods, cross, until, pk, occ, threshold, decay_s, ramp_s
            )
        self.occs.append(occ)
        self._place(occ, inc, root)
        return occ

    def _scope(
        self,
        kind: Kind,
        target: Target,
        dep: Deployment | None,
        pod: Pod | None,
        gpu: Gpu | None,
        node: Node | None,
    ) -> dict[str, str]:
        """The labels of the series the rule watches, before the rule keeps some of them."""
        src = kind.source
        if isinstance(target, dict):
            return {k: v for k, v in target.items() if k != "cluster_obj"}
        if src == "gpu" and gpu is not None:
            return dcgm_labels(gpu, pod)
        if src == "node" and node is not None:
            return dict(
                node_labels(node), device="/dev/nvme1n1", fstype="ext4", mountpoint="/var/lib/containerd"
            )
        if dep is None or pod is None:  # every other source watches a workload: a pod or a deployment
            raise ValueError(f"no scope for {kind.name} on {target!r}")
        if src == "pod" or src == "hot":
            return vllm_labels(pod)
        if src == "frag":
            return frag_labels(pod)
        if src == "ksm":
            labels = ksm_labels(pod, self.ksm_ips[dep.cluster.name])
            if kind.name in ("oom_killed", "cuda_oom"):
                labels["node"] = pod.node.name
            return labels
        if src == "deployment":
            return {"cluster": dep.cluster.name, "namespace": dep.namespace, "model_name": dep.served_name}
        if src == "service":
            return {"cluster": dep.cluster.name, "namespace": dep.namespace, "service": dep.name}
        if src == "istio":
            return {
                "cluster": dep.cluster.name,
                "destination_workload_namespace": dep.namespace,
                "destination_workload": dep.name,
            }
        if src == "target":
            return {
                "cluster": dep.cluster.name,
                "job": dep.job,
                "namespace": dep.namespace,
                "service": dep.name,
            }
        if src == "deployment_ksm":
            return {
                "cluster": dep.cluster.name,
                "job": "kube-state-metrics",
                "instance": f"{self.ksm_ips[dep.cluster.name]}:8080",
                "namespace": dep.namespace,
                "deployment": dep.name,
            }
        raise ValueError(f"no scope for {kind.name}")

    def _annotations(
        self, kind: Kind, expr: Expr, name: str, labels: dict[str, str], value: float, cluster: Cluster
    ) -> dict[str, str]:
        fmt = _SafeDict(labels)
        fmt["host"] = labels.get("Hostname") or labels.get("hostname") or labels.get("node", "")
        fmt.update(
            {
                "value_pct": f"{value * 100:.1f}%",
                "value_int": f"{int(round(value))}",
                "value_s": f"{value:.2f}s",
                "value_ms": f"{value * 1000:.0f}ms",
                "value_rate": f"{value:.2f}",
                "value_x": f"{value:.1f}x",
                "value_mib": f"{int(value)}",
            }
        )
        ann = {"summary": kind.summary.format_map(fmt), "description": kind.description.format_map(fmt)}
        if expr.for_s >= 900:
            ann["description"] += f" (sustained for {expr.for_s // 60}m)"
        if kind.runbook == "kube-prometheus":
            area = "kubernetes" if kind.group == "k8s" else "node" if kind.group == "node" else "general"
            ann["runbook_url"] = f"https://runbooks.prometheus-operator.dev/runbooks/{area}/{name.lower()}"
        elif kind.runbook == "team" and rng_for(self.key, "rb", cluster.name, kind.name).random() < 0.7:
            ann["runbook_url"] = f"https://runbooks.{self.world.domain}/llm/{name}"
        return ann

    def _bump(
        self,
        kind: Kind,
        signal: str,
        dep: Deployment | None,
        pod: Pod | None,
        gpu: Gpu | None,
        node: Node | None,
        pods: list[Pod] | None,
        cross: int,
        until: int | None,
        peak: float,
        occ: am.Occurrence,
        threshold: float | None = None,
        decay_s: float = 240,
        ramp_s: float = 360,
    ) -> None:
        until = until if until is not None else cross + 24 * 60 * MINUTE
        thr = kind.threshold if threshold is None else threshold
        if thr is None:  # every kind that watches a signal has a threshold (rules.KINDS)
            raise ValueError(f"{kind.name} watches {signal} with no threshold")
        direction = kind.direction
        keys: list[str]
        if signal == "fbfree":
            assert pod is not None  # a GPU's framebuffer is watched with the pod using it
            usable = pod.gpu.node.fb_mib - 512
            signal, direction = "fb", "up"
            thr = 1 - 1024 / usable
            peak = 1 - (peak if peak < 1024 else 380) / usable
            keys = [pod.name]
        elif signal == "hot":
            assert dep is not None and pod is not None  # a pod's share of its deployment's traffic
            n = len(dep.pods)
            thr = 2.0 * (n - 1) / (n - 2)
            peak = peak * (n - 1) / (n - peak)
            keys = [pod.name]
        elif signal == "dc" or signal == "disk":
            watched = dep if signal == "dc" else node
            assert watched is not None  # a deployment's disconnects, a node's disk
            keys = [watched.name]
        elif kind.source in ("deployment", "service"):
            assert dep is not None  # a deployment-level rule's target is its deployment
            keys = [p.name for p in (pods or dep.pods)]
            if signal in ("rep", "err"):
                # a ratio over the whole deployment: the affected pods must go further for it to cross
                scale = len(dep.pods) / len(keys)
                thr, peak = thr * scale, max(peak, thr * scale * 1.6)
        else:
            assert pod is not None  # any other signal is a pod's
            keys = [pod.name]
        for key in keys:
            self.tel.bump(signal, key, thr, peak, cross, until, direction, ramp_s=ramp_s, decay_s=decay_s)
        if dep is not None and signal in FAMILY_OF_SIGNAL:
            dep.families.add(FAMILY_OF_SIGNAL[signal])
        if dep is not None and signal in ("frag", "preempt"):
            dep.families.add(signal)
        if node is not None and signal == "disk":
            if all(n is not node for n, _ in self.disk_nodes):
                self.disk_nodes.append((node, "/var/lib/containerd"))
        occ.signal = (signal, keys, thr, direction)

    def effect(
        self,
        signal: str,
        key_obj: Pod | Deployment,
        threshold: float,
        peak: float,
        cross: int,
        until: int,
        direction: str = "up",
        ramp_s: float = 360,
        decay_s: float = 240,
    ) -> None:
        """A metric movement with no alert of its own (e.g. GPU memory crossing 85% in March)."""
        key = key_obj.name if hasattr(key_obj, "name") else str(key_obj)
        self.tel.bump(signal, key, threshold, peak, cross, until, direction, ramp_s, decay_s)
        dep_key = key_obj.deployment.name if isinstance(key_obj, Pod) else key
        self.dense_marks.setdefault(dep_key, []).append(cross)
        if signal in ("frag", "preempt"):
            dep_of = key_obj.deployment if isinstance(key_obj, Pod) else key_obj
            if isinstance(dep_of, Deployment):
                dep_of.families.add(signal)
        if isinstance(key_obj, Pod):
            self.touch(key_obj.deployment, cross)
            if signal in FAMILY_OF_SIGNAL:
                key_obj.deployment.families.add(FAMILY_OF_SIGNAL[signal])
        elif isinstance(key_obj, Deployment):
            self.touch(key_obj, cross)
            if signal in FAMILY_OF_SIGNAL:
                key_obj.families.add(FAMILY_OF_SIGNAL[signal])

    # -- pod and GPU events ----------------------------------------------------------------------
    def oom(self, pod: Pod, at: int, reason: str = "OOMKilled", downtime_s: int = 95) -> int:
        self.tel.gap(pod, at, at + downtime_s * NS)
        self.dense_marks.setdefault(pod.deployment.name, []).append(at)
        self.tel.restarts[pod.name].append((at, reason))
        self.touch(pod.deployment, at)
        return at + downtime_s * NS

    def crashloop(self, pod: Pod, start: int, end: int, reason: str = "Error") -> None:
        t = start
        i = 0
        while t < end:
            self.tel.restarts[pod.name].append((t, reason))
            t += (BACKOFF_S[min(i, len(BACKOFF_S) - 1)] + 45) * NS
            i += 1
        self.tel.gap(pod, start, end)
        self.tel.crashloops[pod.name].append((start + 10 * NS, end))
        self.touch(pod.deployment, start, end)

    def scrape_fail(self, pod: Pod, start: int, end: int) -> None:
        self.tel.gap(pod, start, end, reset=False)
        pod.deployment.families.add("up")
        self.touch(pod.deployment, start, end)

    def xid(self, gpu: Gpu, at: int, code: int, hold_s: int) -> None:
        self.tel.xids[gpu.uuid].append((at, at + hold_s * NS, code))

    def ecc(self, gpu: Gpu, at: int, count: int = 3) -> None:
        self.tel.ecc[gpu.uuid].extend(at + i * 7 * NS for i in range(count))

    def lifetime(self, pod: Pod, born: int | None = None, died: int | None = None) -> None:
        self.tel.lifetimes[pod.name] = (born, died)

    # -- changes and actions ----------------------------------------------------------------------
    def change(
        self,
        at: int,
        change_type: str,
        summary: str,
        source: str,
        details: dict[str, str],
        *,
        inc: Incident | None,
        root: bool = False,
        links: list[dict] | None = None,
        ts_style: str = "z",
        dep: Deployment | None = None,
    ) -> Change:
        ts = iso_ms(at, ts_style)
        cd = {"change_type": change_type}
        cd.update({k: str(v) for k, v in details.items()})
        body = {
            "routing_key": self.world.routing_key,
            "payload": {"summary": summary, "timestamp": ts, "source": source, "custom_details": cd},
            "links": links or [],
        }
        self._seq += 1
        ch = Change(
            at=at,
            body=body,
            fingerprint=event_fingerprint(source=source, summary=summary),
            starts_at=ts,
            seq=self._seq,
        )
        self.changes.append(ch)
        if dep is not None:
            self.touch(dep, at)
        self._place(ch, inc, root)
        return ch

    def act(
        self,
        action: str,
        occ: am.Occurrence | Change,
        *,
        after_s: float | None = None,
        at: int | None = None,
        by: str | None = None,
        **fields: object,
    ) -> None:
        """A human action on the incident holding `occ`: at `at`, or `after_s` after `occ` was first
        delivered (resolved to times and fingerprints once Alertmanager's deliveries are known)."""
        self.intents.append(Intent(action, occ, after_s, at, by or self.person(0), fields))

    # -- output -----------------------------------------------------------------------------------
    def build(self) -> dict[str, str]:
        """The five files (see `output.build_files`); sets `deliveries`, `first_seen`, `first_firing`."""
        return build_files(self)

    def write(self, out_dir: str) -> dict[str, int]:
        files = self.build()
        os.makedirs(out_dir, exist_ok=True)
        sizes = {}
        for name, text in files.items():
            with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            sizes[name] = len(text.encode())
        return sizes


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


class _SafeDict(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


__all__ = ["Change", "Incident", "Story", "static_target"]
