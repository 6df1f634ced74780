"""What became of the requests sent to the deployments of a story's incidents, as the gateway
and the engines count them: Envoy Gateway's upstream counters per route, the engines' finished
requests and generated tokens per pod, and the GPUs each pod holds (kube-state-metrics).

Every route takes a steady rate, split evenly over the deployment's pods alive at the time. A pod
that is down (OOM-killed, crash-looping, hung without answering scrapes) fails its share with
503s (reference §2.6: "503s after crash") and exports nothing; after a restart its counters start
again from 0. While the incident's degradation is at L2 or above, a tenth of the requests is
answered 429 (DOMAIN.md's ladder: L2 rejects requests over 16K tokens, "some 429s"; L3 keeps that
and moves the rest to a small model). The rejection is the serving side's, in front of the
engines: Envoy's upstream stats count the upstream's answers (a 429 of Envoy's own rate-limit
filter would be in its downstream stats instead), and the engines never see those requests.
Tokens per request are steady, so the tokens not served over an outage are the baseline token
rate times its length. The draws come from their own `rng_for` streams: adding these families
moves no other value of the story.

Names and labels follow the shared reference, llm-metrics-and-payloads.md (sections cited below).
`envoy_cluster_upstream_rq{envoy_response_code}` is not in its table: it is the same docs'
`upstream_rq_<*>` stat (cluster_stats.rst, "specific HTTP response codes") under Envoy's
response-code tag, as public PromQL spells it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

from .core import NS, hex_id, k8s_suffix, om_ts, rng_for
from .exporters import FamilyWriter, _labels
from .metrics import envoy_labels, ksm_gpu_request_labels, vllm_labels
from .world import Cluster, Deployment, Pod

SHED_FRACTION = 0.10
FINISHED = (("stop", 0.87), ("length", 0.12), ("abort", 0.01))
GPUS_PER_POD = 1  # world.py gives every pod one GPU
# Reference §2.1 (`vllm:generation_tokens_total`) and §2.2 (`sglang:generation_tokens_total`);
# trtllm-serve's families (§2.3) count no tokens.
GENERATION_TOKENS = {"vllm": "vllm:generation_tokens", "sglang": "sglang:generation_tokens"}
# Envoy's `upstream_rq_<code>` as its Prometheus tags spell it (§2.6): one code per class here.
CODES = (("2", "200"), ("4", "429"), ("5", "503"))


@dataclass
class Flow:
    """A deployment's requests in each interval of its sample grid (the one ending at `grid[i]`),
    and what each pod's engine counts: (time, requests served since it started) at each sample
    it exports."""

    grid: list[int]
    rate: float  # requests/s the route takes
    tokens_per_request: float
    served: dict[str, list[float]]  # by pod
    failed: list[float]
    shed: list[float]
    counts: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


class OutcomeFamilies(FamilyWriter):
    """The request-outcome families of `Telemetry.outcomes`' deployments."""

    def flow(self, dep: Deployment) -> Flow:
        tel = self.tel
        r = rng_for(tel.seed, "requests", dep.name)
        rate = r.uniform(20.0, 60.0)
        tokens = r.uniform(180.0, 420.0)
        grid = self.grid(dep.name)
        pods = self.pods(dep)
        served = {p.name: [0.0] * len(grid) for p in pods}
        flow = Flow(grid, rate, tokens, served, [0.0] * len(grid), [0.0] * len(grid))
        sheds = tel.shedding.get(dep.name, ())
        for i in range(1, len(grid)):
            t = grid[i]
            n = rate * (t - grid[i - 1]) / NS * r.uniform(0.98, 1.02)
            members = [p for p in pods if tel.alive(p, t)]
            if not members:
                flow.failed[i] = n
                continue
            share = n / len(members)
            shed = SHED_FRACTION if any(s <= t < e for s, e in sheds) else 0.0
            for p in members:
                if tel.in_gap(p, t):
                    flow.failed[i] += share
                else:
                    served[p.name][i] = share * (1 - shed)
                    flow.shed[i] += share * shed
        for p in pods:
            flow.counts[p.name] = self._served_counts(p, flow)
        return flow

    def _served_counts(self, pod: Pod, flow: Flow) -> list[tuple[int, float]]:
        tel = self.tel
        born, _ = tel.lifetimes.get(pod.name, (None, None))
        acc = 0.0
        if born is None:  # up for hours before the story's window
            hours = rng_for(tel.seed, "requests-uptime", pod.name).uniform(1.0, 6.0)
            acc = flow.rate / max(1, pod.deployment.replicas) * hours * 3600
        out = []
        prev = None
        for i, t in enumerate(flow.grid):
            if not tel.alive(pod, t) or tel.in_gap(pod, t):
                continue
            if prev is not None and tel.resets_between(pod, prev, t):
                acc = 0.0
            acc += flow.served[pod.name][i]
            prev = t
            out.append((t, acc))
        return out

    # -- families --------------------------------------------------------------------------------
    def _finished(self, fam: str, deps: list[Deployment], flows: dict[str, Flow]) -> None:
        """Rows of the engine's finished-request counter (its family header is the caller's)."""
        for dep in deps:
            for pod in self.pods(dep):
                counts = flows[dep.name].counts[pod.name]
                base = vllm_labels(pod)
                if dep.engine == "sglang":  # sglang:num_requests_total has no finished_reason
                    ls = _labels(base)
                    self.out.extend(f"{fam}_total{ls} {int(n)} {om_ts(t)}" for t, n in counts)
                    continue
                for reason, share in FINISHED:
                    if dep.engine == "trtllm" and reason == "abort":
                        continue
                    ls = _labels(dict(base, finished_reason=reason))
                    self.out.extend(f"{fam}_total{ls} {int(n * share)} {om_ts(t)}" for t, n in counts)

    def _generation_tokens(self, deps: list[Deployment], flows: dict[str, Flow]) -> None:
        for engine, fam in GENERATION_TOKENS.items():
            chosen = [d for d in deps if d.engine == engine]
            if not chosen:
                continue
            self.family(fam, "counter", "Number of generation tokens processed.")
            for dep in chosen:
                flow = flows[dep.name]
                for pod in self.pods(dep):
                    ls = _labels(vllm_labels(pod))
                    self.out.extend(
                        f"{fam}_total{ls} {int(n * flow.tokens_per_request)} {om_ts(t)}"
                        for t, n in flow.counts[pod.name]
                    )

    def _gateway(self, deps: list[Deployment], flows: dict[str, Flow]) -> None:
        """Envoy's cluster stats `upstream_rq_<class>xx` and `upstream_rq_<code>` (reference §2.6:
        `cluster.<name>.upstream_rq_2xx` is `envoy_cluster_upstream_rq_xx{envoy_response_code_class="2"}`).
        Envoy's Prometheus counters keep their stat names, without `_total`, and an OpenMetrics
        counter's samples must end in `_total`: the families are untyped, as DCGM's `..._TOTAL`
        counters are in exporters.py."""
        if not deps:
            return
        totals = {d.name: self._route_totals(d, flows[d.name]) for d in deps}
        for fam, key, help_ in (
            ("envoy_cluster_upstream_rq_xx", "envoy_response_code_class", "Aggregate HTTP response codes."),
            ("envoy_cluster_upstream_rq", "envoy_response_code", "Specific HTTP response codes."),
        ):
            self.family(fam, "unknown", help_)
            for dep in deps:
                labels = envoy_labels(dep, _proxy(self.tel.seed, dep.cluster))
                grid = flows[dep.name].grid
                for cls, code in CODES:
                    ls = _labels(dict(labels, **{key: code if key == "envoy_response_code" else cls}))
                    self.out.extend(
                        f"{fam}{ls} {int(v)} {om_ts(t)}"
                        for t, v in zip(grid, totals[dep.name][cls], strict=True)
                    )

    def _route_totals(self, dep: Deployment, flow: Flow) -> dict[str, list[float]]:
        """The route's counters by response class at each sample time. The gateway has been up for
        days: they start high and never reset."""
        r = rng_for(self.tel.seed, "envoy-uptime", dep.name)
        ok = flow.rate * r.uniform(2.0, 9.0) * 86400
        start = {"2": ok, "4": ok * r.uniform(0.0005, 0.002), "5": ok * r.uniform(0.0002, 0.001)}
        per_interval = {
            "2": [sum(col) for col in zip(*flow.served.values(), strict=True)],
            "4": flow.shed,
            "5": flow.failed,
        }
        return {cls: list(accumulate(per_interval[cls], initial=start[cls]))[1:] for cls in start}

    def _gpu_requests(self, deps: list[Deployment]) -> None:
        """GPUs requested per pod while the pod object exists (through its container's restarts too)."""
        if not deps:
            return
        fam = "kube_pod_container_resource_requests"
        self.family(fam, "gauge", "The number of requested request resource by a container.")
        for dep in deps:
            ip = self.ksm_ips[dep.cluster.name]
            for pod in self.pods(dep):
                ls = _labels(ksm_gpu_request_labels(pod, ip))
                self.out.extend(
                    f"{fam}{ls} {GPUS_PER_POD} {om_ts(t)}"
                    for t in self.grid(dep.name)
                    if self.tel.alive(pod, t)
                )


def _proxy(seed: str, cluster: Cluster) -> tuple[str, str]:
    """The cluster's Envoy Gateway proxy pod (Gateway `inference` in namespace `llm-gateway`; Envoy
    Gateway names its Deployment `envoy-<namespace>-<gateway>-<hash>`) and its IP."""
    r = rng_for(seed, "envoy-proxy", cluster.name)
    name = f"envoy-llm-gateway-inference-{hex_id(r, 8)}-{k8s_suffix(r, 10)}-{k8s_suffix(r, 5)}"
    return name, f"10.{r.randint(64, 127)}.{r.randint(0, 255)}.{r.randint(2, 250)}"
