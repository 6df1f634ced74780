"""A story's metrics as OpenMetrics text (for `promtool tsdb create-blocks-from openmetrics`):
seconds timestamps, counters as `<family>_total`, histograms as buckets + count + sum per
timestamp, each family contiguous, `# EOF` at the end. The signals are `metrics.Telemetry`'s.
This module writes the serving engines' and gateways' families and the whole text; the cluster
exporters' families (DCGM, kube-state-metrics, node-exporter) are `exporters.py`'s, the request
outcomes of the incidents' deployments (gateway, engines, GPUs held) `outcomes.py`'s."""

from __future__ import annotations

import math

from .core import NS, om_ts, rng_for
from .exporters import ExporterFamilies, _labels, _val
from .metrics import (
    SIGMA,
    TPOT_BUCKETS,
    TTFT_BUCKETS,
    Z99,
    Labeller,
    Telemetry,
    frag_labels,
    http_labels,
    vllm_labels,
)
from .outcomes import OutcomeFamilies
from .world import ENGINES, Deployment, Node, Pod, metric_name


def _lognorm_cdf(x: float, median: float, sigma: float) -> float:
    if median <= 0:
        return 1.0
    return 0.5 * (1.0 + math.erf((math.log(x) - math.log(median)) / (sigma * math.sqrt(2.0))))


class Renderer(ExporterFamilies, OutcomeFamilies):
    """Writes the families of the deployments and nodes a story touched, over their windows."""

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
        outcome_deps = [d for d in deps if d.name in tel.outcomes]
        flows = {d.name: self.flow(d) for d in outcome_deps}
        for engine in ENGINES:
            fam = metric_name(engine, "vllm:request_success")
            if not fam:
                continue
            counted = [d for d in deps if d.engine == engine and "success" in d.families]
            added = [d for d in outcome_deps if d.engine == engine and "success" not in d.families]
            if counted:
                self._all_deps = counted
                self._success(fam)
            elif added:
                self.family(fam, "counter", "Count of successfully processed requests.")
            self._finished(fam, added, flows)
        self._generation_tokens(outcome_deps, flows)
        for _name, chosen in by_engine("vllm:spec_decode_num_draft_tokens", "spec"):
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
        self._gateway(outcome_deps, flows)
        self._dcgm(deps)
        self._ksm(deps)
        self._gpu_requests(outcome_deps)
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
                    totals = zip(*(rows[k] for k in acc), strict=True)  # one row a key per sample time
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
