"""A story's metrics as OpenMetrics text (for `promtool tsdb create-blocks-from openmetrics`):
seconds timestamps, counters as `<family>_total`, histograms as buckets + count + sum per
timestamp, each family contiguous, `# EOF` at the end. The signals are `metrics.Telemetry`'s."""

from __future__ import annotations

import math

from .core import NS, om_ts, rng_for
from .metrics import (
    SIGMA,
    TPOT_BUCKETS,
    TTFT_BUCKETS,
    XID_TEXT,
    Z99,
    Labeller,
    Telemetry,
    dcgm_labels,
    frag_labels,
    http_labels,
    ksm_labels,
    node_labels,
    vllm_labels,
)
from .world import ENGINES, Deployment, Gpu, Node, Pod, metric_name


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


def _lognorm_cdf(x: float, median: float, sigma: float) -> float:
    if median <= 0:
        return 1.0
    return 0.5 * (1.0 + math.erf((math.log(x) - math.log(median)) / (sigma * math.sqrt(2.0))))


class Renderer:
    """Writes the families of the deployments and nodes a story touched, over their windows."""

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

    def render(self, deployments: list[Deployment], nodes: list[tuple[Node, str]]) -> str:
        tel = self.tel
        w = self.out.append
        deps = [d for d in deployments if d.name in tel.windows]

        def by_engine(vllm_name: str, need: str | None = None) -> list[tuple[str, list[Deployment]]]:
            out = []
            for engine in ENGINES:
                name = metric_name(engine, vllm_name)
                chosen = [d for d in deps if d.engine == engine and (need is None or need in d.families)]
                if name and chosen:
                    out.append((name, chosen))
            return out

        def gauge_family(
            vllm_name: str,
            help_: str,
            signal: str,
            as_int: bool = False,
            noise: float = 0.02,
            need: str | None = None,
            cap: float = 1e9,
        ) -> None:
            for name, chosen in by_engine(vllm_name, need):
                chosen = [d for d in chosen if signal != "kv" or d.kv_series]
                if not chosen:
                    continue
                self.family(name, "gauge", help_)
                for dep in chosen:
                    self._gauge_rows(name, dep, signal, vllm_labels, noise=noise, cap=cap, as_int=as_int)

        gauge_family(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            "kv",
            noise=0.03,
            cap=1.0,
        )
        if any(d.frag_series and "frag" in d.families for d in deps):
            self.family(
                "llm_kv_cache_fragmentation_ratio",
                "gauge",
                "Fraction of allocated KV-cache blocks that are unusable fragments.",
            )
            for dep in deps:
                if dep.frag_series and "frag" in dep.families:
                    self._gauge_rows(
                        "llm_kv_cache_fragmentation_ratio", dep, "frag", frag_labels, noise=0.04, cap=1.0
                    )
        gauge_family(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            "waiting",
            as_int=True,
            noise=0.15,
        )
        gauge_family(
            "vllm:num_requests_running",
            "Number of requests currently running on GPU.",
            "running",
            as_int=True,
            noise=0.08,
            need="success",
        )
        for name, chosen in by_engine("vllm:num_preemptions", "preempt"):
            self._all_deps = chosen
            self._counter(
                name, "Cumulative number of preemption from the engine.", "preempt", vllm_labels, "preempt"
            )
        for name, chosen in by_engine("vllm:corrupted_requests", "corrupt"):
            self._all_deps = chosen
            self._counter(
                name,
                "Corrupted requests, in terms of total number of requests with NaNs in logits.",
                "corrupt",
                vllm_labels,
                "corrupt",
            )
        for name, chosen in by_engine("vllm:request_success", "success"):
            self._all_deps = chosen
            self._success(name)
        for name, chosen in by_engine("vllm:spec_decode_num_draft_tokens", "spec"):
            self._all_deps = chosen
            self._spec()
        self._all_deps = deps
        self._http()
        for vllm_name, help_, signal, buckets in (
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                "ttft",
                TTFT_BUCKETS,
            ),
            (
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                "tpot",
                TPOT_BUCKETS,
            ),
            (
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                "itl",
                TPOT_BUCKETS,
            ),
        ):
            for name, chosen in by_engine(vllm_name, signal):
                self._all_deps = chosen
                self._hist(name, help_, signal, buckets, signal)
        self._all_deps = deps
        self._up()
        self._istio()
        self._dcgm(deps)
        self._ksm(deps)
        self._nodes(nodes)
        w("# EOF")
        return "\n".join(self.out) + "\n"

    # -- signal helpers --------------------------------------------------------------------
    def _gauge_rows(
        self,
        name: str,
        dep: Deployment,
        signal: str,
        labeller: Labeller,
        noise: float,
        cap: float,
        as_int: bool = False,
    ) -> None:
        tel = self.tel
        for pod in self.pods(dep):
            r = rng_for(tel.seed, name, pod.name)
            ls = _labels(labeller(pod))
            for t in self.grid(dep.name):
                if not tel.alive(pod, t) or tel.in_gap(pod, t):
                    continue
                raw = tel.raw(signal, pod.name, t)
                base = tel.base(signal, pod.name)
                # full noise on the baseline, little on bumps: crossings stay where the story put them
                if abs(raw - base) < 1e-9:
                    v = raw + max(base, 1.0 if as_int else 0.0) * r.uniform(-noise, noise)
                else:
                    v = raw * (1.0 + r.uniform(-0.01, 0.01))
                v = min(cap, max(0.0, v))
                text = str(int(round(v))) if as_int else _val(round(v, 4))
                self.out.append(f"{name}{ls} {text} {om_ts(t)}")

    def req_rate(self, pod: Pod, t: int) -> float:
        """Requests/s a pod serves: its share of the deployment's traffic (siblings absorb downtime)."""
        dep = pod.deployment
        tel = self.tel
        live = [p for p in self.pods(dep) if tel.alive(p, t) and not tel.in_gap(p, t)]
        if pod not in live:
            return 0.0
        total = tel.base("rate", dep.name) * dep.replicas
        shares = {p.name: tel.raw("hot", p.name, t) for p in live}
        return total * shares[pod.name] / sum(shares.values())

    def _counter(self, fam: str, help_: str, signal: str, labeller: Labeller, need: str | None) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if need is None or need in d.families]
        if not deps:
            return
        self.family(fam, "counter", help_)
        for dep in deps:
            for pod in self.pods(dep):
                r = rng_for(tel.seed, fam, pod.name)
                ls = _labels(labeller(pod))
                acc = r.uniform(0, 40) if signal == "preempt" else 0.0
                prev = None
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t) or tel.in_gap(pod, t):
                        continue
                    if prev is not None and tel.resets_between(pod, prev, t):
                        acc = 0.0
                    if prev is not None:
                        acc += tel.raw(signal, pod.name, t) * (t - prev) / NS * r.uniform(0.7, 1.3)
                    prev = t
                    self.out.append(f"{fam}_total{ls} {int(acc)} {om_ts(t)}")

    def _deps(self) -> list[Deployment]:
        return self._all_deps

    def _success(self, fam: str) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if "success" in d.families]
        if not deps:
            return
        self.family(fam, "counter", "Count of successfully processed requests.")
        for dep in deps:
            for pod in self.pods(dep):
                r = rng_for(tel.seed, fam, pod.name)
                base = vllm_labels(pod)
                acc = {"stop": 0.0, "length": 0.0, "abort": 0.0, "repetition": 0.0}
                rows: dict[str, list[str]] = {k: [] for k in acc}
                prev = None
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t) or tel.in_gap(pod, t):
                        continue
                    if prev is not None and tel.resets_between(pod, prev, t):
                        acc = dict.fromkeys(acc, 0.0)
                    if prev is not None:
                        dt = (t - prev) / NS
                        rate = self.req_rate(pod, t) * r.uniform(0.9, 1.1)
                        ghost = (
                            tel.raw("ghost_stall", pod.name, t)
                            if ("ghost_stall", pod.name) in tel.bumps
                            else 0
                        )
                        rate *= max(0.05, 1.0 - ghost)
                        rep = tel.raw("rep", pod.name, t)
                        abort = 0.01
                        acc["repetition"] += rate * dt * rep
                        acc["abort"] += rate * dt * abort
                        acc["length"] += rate * dt * 0.12
                        acc["stop"] += rate * dt * max(0.0, 1 - rep - abort - 0.12)
                    prev = t
                    for k in acc:
                        rows[k].append(f"{int(acc[k])} {om_ts(t)}")
                if dep.engine == "sglang":  # sglang:num_requests_total has no finished_reason
                    totals = zip(*(rows[k] for k in acc))
                    ls = _labels(base)
                    for parts in totals:
                        n = sum(int(p.split(" ")[0]) for p in parts)
                        self.out.append(f"{fam}_total{ls} {n} {parts[0].split(' ')[1]}")
                    continue
                for k in acc:
                    if dep.engine == "trtllm" and k in ("repetition", "abort"):
                        continue
                    ls = _labels(dict(base, finished_reason=k))
                    self.out.extend(f"{fam}_total{ls} {row}" for row in rows[k])

    def _spec(self) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if "spec" in d.families]
        if not deps:
            return
        for fam, help_, accepted in (
            ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", False),
            ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", True),
        ):
            self.family(fam, "counter", help_)
            for dep in deps:
                for pod in self.pods(dep):
                    r = rng_for(tel.seed, fam, pod.name)
                    ls = _labels(vllm_labels(pod))
                    acc = 0.0
                    prev = None
                    for t in self.grid(dep.name):
                        if not tel.alive(pod, t) or tel.in_gap(pod, t):
                            continue
                        if prev is not None and tel.resets_between(pod, prev, t):
                            acc = 0.0
                        if prev is not None:
                            drafts = self.req_rate(pod, t) * 180 * (t - prev) / NS
                            acc += drafts * (
                                tel.raw("spec", pod.name, t) * r.uniform(0.98, 1.02) if accepted else 1
                            )
                        prev = t
                        self.out.append(f"{fam}_total{ls} {int(acc)} {om_ts(t)}")

    def _http(self) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if "http" in d.families]
        if not deps:
            return
        fam = "http_requests"
        self.family(fam, "counter", "Total number of requests by method, status and handler.")
        for dep in deps:
            for pod in self.pods(dep):
                r = rng_for(tel.seed, fam, pod.name)
                base = http_labels(pod)
                acc = {"2xx": 0.0, "4xx": 0.0, "5xx": 0.0}
                rows: dict[str, list[str]] = {k: [] for k in acc}
                prev = None
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t) or tel.in_gap(pod, t):
                        continue
                    if prev is not None and tel.resets_between(pod, prev, t):
                        acc = dict.fromkeys(acc, 0.0)
                    if prev is not None:
                        n = self.req_rate(pod, t) * (t - prev) / NS * r.uniform(0.95, 1.05)
                        err = tel.raw("err", pod.name, t)
                        acc["5xx"] += n * err
                        acc["4xx"] += n * 0.01
                        acc["2xx"] += n * (1 - err - 0.01)
                    prev = t
                    for k in acc:
                        rows[k].append(f"{int(acc[k])} {om_ts(t)}")
                for k in acc:
                    ls = _labels(dict(base, status=k))
                    self.out.extend(f"{fam}_total{ls} {row}" for row in rows[k])

    def _hist(self, fam: str, help_: str, signal: str, buckets: tuple[float, ...], need: str) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if need in d.families]
        if not deps:
            return
        self.family(fam, "histogram", help_)
        sigma = SIGMA[signal]
        for dep in deps:
            for pod in self.pods(dep):
                r = rng_for(tel.seed, fam, pod.name)
                base = vllm_labels(pod)
                bls = [_labels(dict(base, le=str(b))) for b in buckets] + [_labels(dict(base, le="+Inf"))]
                cls = _labels(base)
                cum = [0.0] * (len(buckets) + 1)
                total = 0.0
                prev = None
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t) or tel.in_gap(pod, t) or t % self.hist_step:
                        continue
                    if prev is not None and tel.resets_between(pod, prev, t):
                        cum = [0.0] * (len(buckets) + 1)
                        total = 0.0
                    if prev is not None:
                        n = self.req_rate(pod, t) * (t - prev) / NS * r.uniform(0.9, 1.1)
                        p99 = tel.raw(signal, pod.name, t) * r.uniform(0.97, 1.03)
                        median = p99 / math.exp(Z99 * sigma)
                        for i, b in enumerate(buckets):
                            cum[i] += n * _lognorm_cdf(b, median, sigma)
                        cum[-1] += n
                        total += n * median * math.exp(sigma * sigma / 2)
                    prev = t
                    ts = om_ts(t)
                    for i, ls in enumerate(bls):
                        self.out.append(f"{fam}_bucket{ls} {int(cum[i])} {ts}")
                    self.out.append(f"{fam}_count{cls} {int(cum[-1])} {ts}")
                    self.out.append(f"{fam}_sum{cls} {_val(round(total, 3))} {ts}")

    def _up(self) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if "up" in d.families]
        if not deps:
            return
        self.family("up", "gauge", "Whether the scrape target was reachable.")
        for dep in deps:
            for pod in self.pods(dep):
                ls = _labels(
                    {
                        "cluster": dep.cluster.name,
                        "job": dep.job,
                        "namespace": dep.namespace,
                        "service": dep.name,
                        "pod": pod.name,
                        "instance": f"{pod.ip}:8000",
                    }
                )
                for t in self.grid(dep.name):
                    if not tel.alive(pod, t):
                        continue
                    self.out.append(f"up{ls} {0 if tel.in_gap(pod, t) else 1} {om_ts(t)}")

    def _istio(self) -> None:
        tel = self.tel
        deps = [d for d in self._deps() if "istio" in d.families]
        if not deps:
            return
        fam = "istio_requests"
        self.family(fam, "counter", "requests_total")
        for dep in deps:
            r = rng_for(tel.seed, fam, dep.name)
            base = {
                "cluster": dep.cluster.name,
                "namespace": dep.namespace,
                "reporter": "destination",
                "destination_workload": dep.name,
                "destination_workload_namespace": dep.namespace,
                "destination_service_name": dep.name,
                "response_code": "200",
            }
            acc = {"-": 0.0, "DC": 0.0}
            rows: dict[str, list[str]] = {k: [] for k in acc}
            prev = None
            for t in self.grid(dep.name):
                if prev is not None:
                    n = sum(self.req_rate(p, t) for p in dep.pods) * (t - prev) / NS * r.uniform(0.95, 1.05)
                    dc = tel.raw("dc", dep.name, t)
                    acc["DC"] += n * dc
                    acc["-"] += n * (1 - dc)
                prev = t
                for k in acc:
                    rows[k].append(f"{int(acc[k])} {om_ts(t)}")
            for k in acc:
                labels = dict(base, response_flags=k)
                if k == "DC":
                    labels["response_code"] = "0"
                self.out.extend(f"{fam}_total{_labels(labels)} {row}" for row in rows[k])

    def _dcgm(self, deps: list[Deployment]) -> None:
        tel = self.tel
        targets: list[tuple[Gpu, Pod | None, str, str]] = []
        seen = set()
        for dep in deps:
            for pod in self.pods(dep):
                if pod.gpu.uuid + pod.name not in seen:
                    seen.add(pod.gpu.uuid + pod.name)
                    targets.append((pod.gpu, pod, dep.name, "fb"))
        if not targets:
            return
        rows_used, rows_free = [], []
        for gpu, pod, window, _ in targets:
            node = gpu.node
            usable = node.fb_mib - 512
            r = rng_for(tel.seed, "fb", gpu.uuid, pod.name if pod else "")
            ls = dcgm_labels(gpu, pod)
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
                rows_used.append(f"DCGM_FI_DEV_FB_USED{_labels(ls)} {used} {om_ts(t)}")
                rows_free.append(f"DCGM_FI_DEV_FB_FREE{_labels(ls)} {usable - used} {om_ts(t)}")
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
                ls = dcgm_labels(gpu, pod)
                for t in self.grid(window):
                    if pod is not None and not tel.alive(pod, t):
                        continue
                    if any(s <= t < e for s, e in tel.gpu_gone.get(gpu.uuid, ())):
                        continue
                    code = 0
                    for s, e, c in tel.xids[gpu.uuid]:
                        if s <= t < e:
                            code = c
                    extra_ls = dict(ls)
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


def render(
    tel: Telemetry,
    deployments: list[Deployment],
    nodes: list[tuple[Node, str]],
    step_s: int,
    ksm_ips: dict[str, str],
    sparse_s: int | None = None,
) -> str:
    r = Renderer(tel, step_s, ksm_ips, sparse_s)
    r._all_deps = [d for d in deployments if d.name in tel.windows]
    return r.render(deployments, nodes)
