"""What every family of a story's OpenMetrics text rests on (`FamilyWriter`: the sample grid of
a scope, family headers, label and value text), and the families of the cluster's own exporters
written with it: DCGM (framebuffer, temperature, Xid, ECC), kube-state-metrics (restarts,
termination and waiting reasons, pod info, deployment replicas) and node-exporter (filesystem).
`openmetrics.Renderer` adds the serving engines' and gateways' families and writes the whole."""

from __future__ import annotations

from .core import NS, om_ts, rng_for
from .metrics import XID_TEXT, Telemetry, dcgm_labels, ksm_labels, node_labels
from .world import Deployment, Gpu, Node, Pod


def _labels(d: dict[str, str]) -> str:
    parts = []
    for k, v in d.items():
        v = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        parts.append(f'{k}="{v}"')
    return "{" + ",".join(parts) + "}"


def _val(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


class FamilyWriter:
    """Samples a story's telemetry on each scope's grid and writes families into `out`."""

    def __init__(
        self, tel: Telemetry, step_s: int, ksm_ips: dict[str, str], sparse_s: int | None = None
    ) -> None:
        self.tel = tel
        self.step = step_s * NS
        self.sparse = (sparse_s or step_s) * NS
        self.ksm_ips = ksm_ips
        self.out: list[str] = []
        self._grids: dict[str, list[int]] = {}
        self.hist_step = (
            max(self.step, min(self.sparse, 60 * NS)) if sparse_s and sparse_s >= 120 else self.step
        )

    def grid(self, key: str) -> list[int]:
        """Sample times of a scope: every step inside its dense spans, every sparse step elsewhere."""
        cached = self._grids.get(key)
        if cached is not None:
            return cached
        w0, w1 = self.tel.windows[key]
        first = -(-w0 // self.step) * self.step
        spans = self.tel.dense.get(key)
        points = []
        for t in range(first, w1 + 1, self.step):
            if spans is None or t % self.sparse == 0 or any(a <= t <= b for a, b in spans):
                points.append(t)
        self._grids[key] = points
        return points

    def family(self, name: str, kind: str, help_: str) -> None:
        self.out.append(f"# TYPE {name} {kind}")
        self.out.append(f"# HELP {name} {help_}")

    def pods(self, dep: Deployment) -> list[Pod]:
        return list(dep.old_pods) + list(dep.pods)


class ExporterFamilies(FamilyWriter):
    """The DCGM, kube-state-metrics and node-exporter families of what a story touched."""

    def _dcgm(self, deps: list[Deployment]) -> None:
        tel = self.tel
        targets: list[tuple[Gpu, Pod | None, str, str]] = []
        seen = set()
        for dep in deps:
            for served in self.pods(dep):
                if served.gpu.uuid + served.name not in seen:
                    seen.add(served.gpu.uuid + served.name)
                    targets.append((served.gpu, served, dep.name, "fb"))
        if not targets:
            return
        rows_used, rows_free = [], []
        for gpu, pod, window, _ in targets:
            node = gpu.node
            usable = node.fb_mib - 512
            r = rng_for(tel.seed, "fb", gpu.uuid, pod.name if pod else "")
            labels = dcgm_labels(gpu, pod)
            key = pod.name if pod else gpu.uuid
            for t in self.grid(window):
                if pod is not None and not tel.alive(pod, t):
                    continue
                if any(s <= t < e for s, e in tel.gpu_gone.get(gpu.uuid, ())):
                    continue
                ratio = tel.raw("fb", key, t)
                if pod is not None and tel.in_gap(pod, t):
                    ratio = 0.006
                noise = r.uniform(-0.002, 0.002) if abs(ratio - tel.base("fb", key)) < 1e-9 else 0.0
                used = int(round(max(0.0, min(1.0, ratio + noise)) * usable))
                rows_used.append(f"DCGM_FI_DEV_FB_USED{_labels(labels)} {used} {om_ts(t)}")
                rows_free.append(f"DCGM_FI_DEV_FB_FREE{_labels(labels)} {usable - used} {om_ts(t)}")
        self.family("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).")
        self.out.extend(rows_used)
        self.family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).")
        self.out.extend(rows_free)
        temp_targets = [
            (g, p, wnd) for g, p, wnd, _ in targets if p is not None and ("temp", p.name) in tel.bumps
        ]
        if temp_targets:
            self.family("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).")
            for gpu, pod, window in temp_targets:
                r = rng_for(tel.seed, "temp", gpu.uuid)
                ls = _labels(dcgm_labels(gpu, pod))
                for t in self.grid(window):
                    if tel.alive(pod, t):
                        raw = tel.raw("temp", pod.name, t)
                        noisy = raw + (r.uniform(-1.5, 1.5) if raw == tel.base("temp", pod.name) else 0)
                        self.out.append(f"DCGM_FI_DEV_GPU_TEMP{ls} {int(round(noisy))} {om_ts(t)}")
        xid_targets = [(g, p, wnd) for g, p, wnd, _ in targets if g.uuid in tel.xids]
        if xid_targets:
            self.family("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.")
            for gpu, pod, window in xid_targets:
                labels = dcgm_labels(gpu, pod)
                for t in self.grid(window):
                    if pod is not None and not tel.alive(pod, t):
                        continue
                    if any(s <= t < e for s, e in tel.gpu_gone.get(gpu.uuid, ())):
                        continue
                    code = 0
                    for s, e, c in tel.xids[gpu.uuid]:
                        if s <= t < e:
                            code = c
                    extra_ls = dict(labels)
                    if code:
                        extra_ls.update(
                            {"err_code": str(code), "err_msg": XID_TEXT.get(code, "Unknown Error")}
                        )
                    self.out.append(f"DCGM_FI_DEV_XID_ERRORS{_labels(extra_ls)} {code} {om_ts(t)}")
        ecc_targets = [(g, p, wnd) for g, p, wnd, _ in targets if g.uuid in tel.ecc]
        if ecc_targets:
            # dcgm-exporter's own name already ends in _TOTAL; as an OpenMetrics counter it would need a
            # lower-case _total suffix the rules do not use, so it is written as an untyped family
            self.family(
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "unknown", "Total number of double-bit volatile ECC errors."
            )
            for gpu, pod, window in ecc_targets:
                ls = _labels(dcgm_labels(gpu, pod))
                for t in self.grid(window):
                    if pod is not None and not tel.alive(pod, t):
                        continue
                    n = sum(1 for s in tel.ecc[gpu.uuid] if s <= t)
                    self.out.append(f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{ls} {n} {om_ts(t)}")

    def _ksm(self, deps: list[Deployment]) -> None:
        tel = self.tel
        if not deps:
            return
        deps = [d for d in deps if any(tel.restarts.get(p.name) for p in self.pods(d))]
        if not deps:
            return
        self.family(
            "kube_pod_container_status_restarts", "counter", "The number of container restarts per container."
        )
        for dep in deps:
            ip = self.ksm_ips[dep.cluster.name]
            for pod in self.pods(dep):
                ls = _labels(ksm_labels(pod, ip))
                events = sorted(tel.restarts.get(pod.name, ()))
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t):
                        continue
                    n = sum(1 for s, _ in events if s <= t)
                    self.out.append(f"kube_pod_container_status_restarts_total{ls} {n} {om_ts(t)}")
        rows = []
        for dep in deps:
            ip = self.ksm_ips[dep.cluster.name]
            for pod in self.pods(dep):
                events = sorted(tel.restarts.get(pod.name, ()))
                if not events:
                    continue
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t):
                        continue
                    last = [reason for s, reason in events if s <= t]
                    if last:
                        ls = _labels(dict(ksm_labels(pod, ip), reason=last[-1]))
                        rows.append(f"kube_pod_container_status_last_terminated_reason{ls} 1 {om_ts(t)}")
        if rows:
            self.family(
                "kube_pod_container_status_last_terminated_reason",
                "gauge",
                "Describes the last reason the container was in terminated state.",
            )
            self.out.extend(rows)
        rows = []
        for dep in deps:
            ip = self.ksm_ips[dep.cluster.name]
            for pod in self.pods(dep):
                for s, e in tel.crashloops.get(pod.name, ()):
                    ls = _labels(dict(ksm_labels(pod, ip), reason="CrashLoopBackOff"))
                    rows.extend(
                        f"kube_pod_container_status_waiting_reason{ls} 1 {om_ts(t)}"
                        for t in self.grid(dep.name)
                        if s <= t < e and tel.alive(pod, t)
                    )
        if rows:
            self.family(
                "kube_pod_container_status_waiting_reason",
                "gauge",
                "Describes the reason the container is currently in waiting state.",
            )
            self.out.extend(rows)
        # kube_pod_info carries the node, which the OOM rules join in (`group_left (node)`)
        self.family("kube_pod_info", "gauge", "Information about pod.")
        for dep in deps:
            ip = self.ksm_ips[dep.cluster.name]
            for pod in self.pods(dep):
                ls = _labels(
                    {
                        "cluster": dep.cluster.name,
                        "job": "kube-state-metrics",
                        "instance": f"{ip}:8080",
                        "namespace": dep.namespace,
                        "pod": pod.name,
                        "uid": pod.uid,
                        "node": pod.node.name,
                        "pod_ip": pod.ip,
                        "host_ip": pod.node.ip,
                        "created_by_kind": "ReplicaSet",
                        "created_by_name": pod.name.rsplit("-", 1)[0],
                    }
                )
                self.out.extend(
                    f"kube_pod_info{ls} 1 {om_ts(t)}" for t in self.grid(dep.name) if tel.alive(pod, t)
                )
        rdeps = [d for d in deps if "replicas" in d.families]
        for fam, help_ in (
            ("kube_deployment_spec_replicas", "Number of desired pods for a deployment."),
            ("kube_deployment_status_replicas_available", "The number of available replicas per deployment."),
            ("kube_deployment_status_replicas_updated", "The number of updated replicas per deployment."),
        ):
            if not rdeps:
                break
            self.family(fam, "gauge", help_)
            for dep in rdeps:
                ls = _labels(
                    {
                        "cluster": dep.cluster.name,
                        "job": "kube-state-metrics",
                        "instance": f"{self.ksm_ips[dep.cluster.name]}:8080",
                        "namespace": dep.namespace,
                        "deployment": dep.name,
                    }
                )
                for t in self.grid(dep.name):
                    spans = [(s, e, n) for s, e, n in tel.replicas_short.get(dep.name, ()) if s <= t < e]
                    if fam == "kube_deployment_spec_replicas":
                        value = dep.replicas
                    elif fam == "kube_deployment_status_replicas_available":
                        value = dep.replicas - sum(n for _, _, n in spans)
                    else:  # a stuck rollout: the updated (new) pods never become more than the surge
                        value = 2 if spans else dep.replicas
                    self.out.append(f"{fam}{ls} {value} {om_ts(t)}")

    def _nodes(self, nodes: list[tuple[Node, str]]) -> None:
        tel = self.tel
        if not nodes:
            return
        self.family(
            "node_filesystem_avail_bytes", "gauge", "Filesystem space available to non-root users in bytes."
        )
        size = 500 * 1024**3
        for node, mount in nodes:
            r = rng_for(tel.seed, "disk", node.name)
            ls = _labels(dict(node_labels(node), device="/dev/nvme1n1", fstype="ext4", mountpoint=mount))
            for t in self.grid(node.name):
                pct = tel.raw("disk", node.name, t) + r.uniform(-0.2, 0.2)
                self.out.append(f"node_filesystem_avail_bytes{ls} {int(size * pct / 100)} {om_ts(t)}")
        self.family("node_filesystem_size_bytes", "gauge", "Filesystem size in bytes.")
        for node, mount in nodes:
            ls = _labels(dict(node_labels(node), device="/dev/nvme1n1", fstype="ext4", mountpoint=mount))
            for t in self.grid(node.name):
                self.out.append(f"node_filesystem_size_bytes{ls} {size} {om_ts(t)}")
