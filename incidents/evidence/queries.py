"""Which series an incident needs, as PromQL and as a plan the local store can evaluate too.

Signals are the catalog's band names (`kv_pool_usage`, `framebuffer_headroom`, ...), whose
`series` lists the metrics that answer them, plus a few signals without a band that a timeline
still needs (`queue_depth`, `preemptions`, `restarts`, `oom_killed`). Every query is scoped by
the incident's place, read from its alerts' labels: the pods of its deployments (so a pod
rescheduled under a new name is still in), else its model, else its nodes for GPU series; disk
alerts' filesystems by node and mountpoint, their volumes by claim. An incident without any of
those gets no query: an unscoped query would chart the whole fleet.

How a metric is read depends on its kind, and PromQL cannot tell: histograms (latencies) are
`histogram_quantile` over `rate` of `_bucket`, counters (`_total`) are `rate`, the rest are
gauges. The same `EvidenceQuery` renders as PromQL and is evaluated by `local.py` with
Prometheus' own semantics (5-minute lookback, extrapolated rate, bucket interpolation), so both
sources answer with the same series.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from correlate.catalog import Band, Catalog
from correlate.classify import rule_expressions
from correlate.topology import deployment_of_pod, scope_of

Matcher = tuple[str, str, str]  # (label, "=" | "=~", value); regexes are anchored, as in PromQL

MODEL_BY = ("namespace", "model_name")
LOOKBACK_SECONDS = 300.0
MIN_RATE_WINDOW = 120.0

# Kinds: how a metric becomes a series.
GAUGE, RATE, QUANTILE, SPREAD, MEAN, FRACTION_OF_SUM, DIVIDE = (
    "gauge",
    "rate",
    "quantile",
    "spread",
    "mean",
    "fraction_of_sum",
    "divide",
)

# Bands read from histograms, and how. Latency SLOs are per model (what clients see).
HISTOGRAM_BANDS = {
    "ttft_p99": (QUANTILE, 0.99),
    "tpot_p99": (QUANTILE, 0.99),
    "itl_jitter": (SPREAD, 0.99),
    "queue_wait": (MEAN, None),
}
# Metrics listed by a band that cannot be read in the band's unit: a running-request count is
# not a fill ratio, and Triton's queue counter is cumulative microseconds without its request count.
NOT_IN_BAND_UNIT = {
    "batch_fill": {"vllm:num_requests_running"},
    "queue_wait": {"nv_inference_queue_duration_us"},
}
# vLLM renames: the old name is read only when the new one answers nothing (0.9.2 exports both).
RENAMED = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
}
EXTRA_BAND_SERIES = {"itl_jitter": ("vllm:time_per_output_token_seconds",)}
# Signals without a band: (signal, kind, metric, extra matchers, level).
UNBANDED = (
    ("queue_depth", GAUGE, "vllm:num_requests_waiting", (), "pod"),
    ("queue_depth", GAUGE, "sglang:num_queue_reqs", (), "pod"),
    ("preemptions", RATE, "vllm:num_preemptions_total", (), "pod"),
    ("restarts", GAUGE, "kube_pod_container_status_restarts_total", (), "pod"),
    (
        "oom_killed",
        GAUGE,
        "kube_pod_container_status_last_terminated_reason",
        (("reason", "=", "OOMKilled"),),
        "pod",
    ),
)
# Which signals an incident gets: the cascade's core always, the rest by failure mode.
CORE_SIGNALS = (
    "kv_pool_usage",
    "framebuffer_headroom",
    "framebuffer_ratio",
    "kv_fragmentation",
    "queue_depth",
    "queue_wait",
    "ttft_p99",
    "preemptions",
    "restarts",
    "oom_killed",
)
# Disk and filesystem alerts (node-exporter's NodeFilesystemSpaceFillingUp, HostDiskWillFillIn4Hours,
# kubelet's KubePersistentVolumeFillingUp): the catalog has no failure mode for a filling disk (they
# classify as `other`), so evidence tells them by their labels and names (`disk_alert`) and counts
# them as DISK, which asks for the filesystems and volumes they watch rather than GPU and engine series.
DISK = "disk"
DISK_LABELS = ("mountpoint", "persistentvolumeclaim")
DISK_WORDS = re.compile(
    r"disk|file ?system|persistent ?volume|out ?of ?space|node_filesystem_|kubelet_volume_stats_", re.I
)
# (signal, metric, level): node-exporter's filesystems by node and mountpoint, kubelet's volume
# stats by claim. Gauges in bytes; free over size is what the alerts compare.
DISK_SERIES = (
    ("filesystem_avail_bytes", "node_filesystem_avail_bytes", "filesystem"),
    ("filesystem_size_bytes", "node_filesystem_size_bytes", "filesystem"),
    ("volume_available_bytes", "kubelet_volume_stats_available_bytes", "volume"),
    ("volume_capacity_bytes", "kubelet_volume_stats_capacity_bytes", "volume"),
)
MODE_SIGNALS = {
    "slo_tpot": ("tpot_p99",),
    "slo_itl": ("itl_jitter",),
    "preemption": ("itl_jitter",),
    "spec_decode": ("spec_acceptance",),
    "queueing": ("batch_fill",),
    "timeout": ("tpot_p99",),
    DISK: tuple(signal for signal, _, _ in DISK_SERIES),
}
GPU_METRIC = re.compile(r"^DCGM_")
_SELECTOR = re.compile(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True)
class Scope:
    """Where an incident happened, from its alerts' labels."""

    namespaces: frozenset[str] = frozenset()
    pods: frozenset[str] = frozenset()
    deployments: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()
    instances: frozenset[str] = (
        frozenset()
    )  # node-exporter targets of filesystem alerts (those with a mountpoint)
    mountpoints: frozenset[str] = frozenset()
    volume_claims: frozenset[str] = frozenset()
    filesystem_nodes: frozenset[str] = (
        frozenset()
    )  # nodes of alerts about no volume claim (a claim's node is its kubelet's)

    @property
    def empty(self) -> bool:
        return not (
            self.pods or self.deployments or self.models or self.nodes or self.instances or self.volume_claims
        )

    def pod_regex(self) -> str:
        parts = [f"{regex_escape(d)}-.*" for d in sorted(self.deployments)]
        parts += [regex_escape(p) for p in sorted(self.pods) if deployment_of_pod(p) not in self.deployments]
        return "|".join(parts)


@dataclass(frozen=True)
class EvidenceQuery:
    signal: str
    kind: str
    metric: str
    matchers: tuple[Matcher, ...] = ()
    other: str = ""  # the second metric of FRACTION_OF_SUM (A / (A + B)) and DIVIDE (A / B)
    other_matchers: tuple[Matcher, ...] = ()
    quantile: float = 0.99
    by: tuple[str, ...] = ()
    window: float = MIN_RATE_WINDOW
    fallback_of: str = ""  # read only when the query with this promql found nothing
    metric_matchers: tuple[Matcher, ...] = field(default=(), compare=False)

    @property
    def counters(self) -> bool:
        return self.metric.endswith("_total")

    @property
    def ignoring(self) -> tuple[str, ...]:
        """Labels that tell the two sides of a division apart and must not block the match."""
        return tuple(sorted({m[0] for m in self.metric_matchers} | {m[0] for m in self.other_matchers}))

    @property
    def promql(self) -> str:
        w = duration(self.window)
        if self.kind == GAUGE:
            return selector(self.metric, self.matchers)
        if self.kind == RATE:
            return f"rate({selector(self.metric, self.matchers)}[{w}])"
        if self.kind in (QUANTILE, SPREAD):
            buckets = selector(self.metric + "_bucket", self.matchers)
            inner = f"sum by (le, {', '.join(self.by)}) (rate({buckets}[{w}]))"
            high = f"histogram_quantile({self.quantile:g}, {inner})"
            return high if self.kind == QUANTILE else f"{high} - histogram_quantile(0.5, {inner})"
        if self.kind == MEAN:
            by = ", ".join(self.by)
            return (
                f"sum by ({by}) (rate({selector(self.metric + '_sum', self.matchers)}[{w}])) / "
                f"sum by ({by}) (rate({selector(self.metric + '_count', self.matchers)}[{w}]))"
            )
        if self.kind == FRACTION_OF_SUM:
            a, b = selector(self.metric, self.matchers), selector(self.other, self.matchers)
            return f"{a} / ({a} + {b})"
        if self.kind == DIVIDE:
            a, b = selector(self.metric, self.matchers), selector(self.other, self.other_matchers)
            if self.counters:
                a, b = f"rate({a}[{w}])", f"rate({b}[{w}])"
            ignoring = f" ignoring({', '.join(self.ignoring)})" if self.ignoring else ""
            return f"{a} /{ignoring} {b}"
        raise ValueError(f"unknown query kind {self.kind!r}")


def incident_scope(alert_labels: Iterable[dict[str, str]]) -> Scope:
    namespaces: set[str] = set()
    pods: set[str] = set()
    deployments: set[str] = set()
    models: set[str] = set()
    nodes: set[str] = set()
    instances: set[str] = set()
    mountpoints: set[str] = set()
    claims: set[str] = set()
    filesystem_nodes: set[str] = set()
    for labels in alert_labels:
        place = scope_of(labels)
        for bucket, value in (
            (namespaces, place.namespace),
            (pods, place.pod),
            (deployments, place.deployment),
            (models, place.model),
            (nodes, place.node),
        ):
            if value:
                bucket.add(value)
        if labels.get("mountpoint"):
            mountpoints.add(labels["mountpoint"])
            if labels.get("instance"):
                instances.add(labels["instance"])
        if labels.get("persistentvolumeclaim"):
            claims.add(labels["persistentvolumeclaim"])
        elif place.node:
            filesystem_nodes.add(place.node)
    return Scope(
        frozenset(namespaces),
        frozenset(pods),
        frozenset(deployments),
        frozenset(models),
        frozenset(nodes),
        frozenset(instances),
        frozenset(mountpoints),
        frozenset(claims),
        frozenset(filesystem_nodes),
    )


def disk_alert(
    name: str, labels: Mapping[str, str], failure_mode: str | None, generator_url: str = ""
) -> bool:
    """A filesystem or volume alert: it carries a mountpoint or a claim, or the catalog left it
    unclassified and its name or rule expression is about disks (NodeDiskFilling, "Node disk
    almost full"). A mode the catalog did give it wins over words in its name
    (KubePersistentVolumeErrors is an error rate)."""
    if any(labels.get(key) for key in DISK_LABELS):
        return True
    if failure_mode not in (None, "", "other", "unknown"):
        return False
    return bool(
        DISK_WORDS.search(name) or (generator_url and DISK_WORDS.search(rule_expressions(generator_url)))
    )


def signals_for(failure_modes: Iterable[str]) -> list[str]:
    failure_modes = list(failure_modes)
    # A disk filling up says nothing about the GPUs and engines of its node: only its own series.
    wanted = [] if set(failure_modes) == {DISK} else list(CORE_SIGNALS)
    for mode in failure_modes:
        wanted += [s for s in MODE_SIGNALS.get(mode, ()) if s not in wanted]
    return wanted


def plan(scope: Scope, failure_modes: Sequence[str], catalog: Catalog, *, step: float) -> list[EvidenceQuery]:
    """The queries for an incident, fallbacks after the query they stand in for."""
    if scope.empty:
        return []
    window = max(MIN_RATE_WINDOW, 2 * step)
    queries: list[EvidenceQuery] = []
    for signal in signals_for(failure_modes):
        band = catalog.bands.get(signal)
        if band is not None:
            queries += band_queries(band, scope, window)
        for name, kind, metric, extra, level in UNBANDED:
            if name == signal:
                for matchers in scoped_matchers(scope, metric, level):
                    queries.append(EvidenceQuery(name, kind, metric, matchers + extra, window=window))
                    break
        for name, metric, level in DISK_SERIES:
            if name == signal:
                previous = ""
                for matchers in disk_matchers(
                    scope, level
                ):  # later ones only when the one before found nothing
                    query = EvidenceQuery(name, GAUGE, metric, matchers, window=window, fallback_of=previous)
                    queries.append(query)
                    previous = query.promql
    return dedupe(queries)


def disk_matchers(scope: Scope, level: str) -> list[tuple[Matcher, ...]]:
    """Filesystems by the alerts' node-exporter targets, then by node (a `node` label, else an
    `instance` naming the node, with or without its port), narrowed to the alerts' mountpoints;
    volumes by claim in their namespaces (not the filesystems of the claim's kubelet node).
    node-exporter's own `namespace` is the monitoring one, so filesystems are not narrowed by it."""
    if level == "volume":
        if not scope.volume_claims:
            return []
        claims = (("persistentvolumeclaim", "=~", alternatives(scope.volume_claims)),)
        return [namespace_matchers(scope) + claims]
    mount = (("mountpoint", "=~", alternatives(scope.mountpoints)),) if scope.mountpoints else ()
    out: list[tuple[Matcher, ...]] = []
    if scope.instances:
        out.append((("instance", "=~", alternatives(scope.instances)),) + mount)
    if scope.filesystem_nodes:
        nodes = alternatives(scope.filesystem_nodes)
        out += [(("node", "=~", nodes),) + mount, (("instance", "=~", f"({nodes})(:[0-9]+)?"),) + mount]
    return out


def alternatives(values: Iterable[str]) -> str:
    return "|".join(regex_escape(value) for value in sorted(values))


def band_queries(band: Band, scope: Scope, window: float) -> list[EvidenceQuery]:
    found: list[EvidenceQuery] = []
    skip = NOT_IN_BAND_UNIT.get(band.name, set())
    for expression in (*band.series, *EXTRA_BAND_SERIES.get(band.name, ())):
        terms = parse_series(expression)
        if terms is None or terms[0][0] in skip:
            continue
        (metric, own), rest = terms[0], terms[1:]
        level = "model" if band.name in HISTOGRAM_BANDS else ("gpu" if GPU_METRIC.match(metric) else "pod")
        alternatives = scoped_matchers(scope, metric, level)
        previous = ""
        for matchers in alternatives:
            query = band_query(band, metric, own, rest, matchers, window)
            if query is None:
                break
            renamed_from = RENAMED.get(metric)
            fallback = previous or (first_promql(band, renamed_from, scope, window) if renamed_from else "")
            found.append(replace(query, fallback_of=fallback))
            previous = query.promql
    return found


def first_promql(band: Band, metric: str, scope: Scope, window: float) -> str:
    level = "model" if band.name in HISTOGRAM_BANDS else "pod"
    for matchers in scoped_matchers(scope, metric, level):
        query = band_query(band, metric, (), [], matchers, window)
        return query.promql if query else ""
    return ""


def band_query(
    band: Band,
    metric: str,
    own: tuple[Matcher, ...],
    rest: list,
    matchers: tuple[Matcher, ...],
    window: float,
) -> EvidenceQuery | None:
    if band.name in HISTOGRAM_BANDS and not rest:
        kind, quantile = HISTOGRAM_BANDS[band.name]
        return EvidenceQuery(
            band.name, kind, metric, matchers + own, quantile=quantile or 0.99, by=MODEL_BY, window=window
        )
    if not rest:
        return EvidenceQuery(
            band.name, RATE if metric.endswith("_total") else GAUGE, metric, matchers + own, window=window
        )
    if len(rest) == 2 and rest[0][0] == metric:  # A / (A + B)
        return EvidenceQuery(
            band.name, FRACTION_OF_SUM, metric, matchers + own, other=rest[1][0], window=window
        )
    if len(rest) == 1:
        other, other_own = rest[0]
        return EvidenceQuery(
            band.name,
            DIVIDE,
            metric,
            matchers + own,
            other=other,
            other_matchers=matchers + other_own,
            window=window,
            metric_matchers=own,
        )
    return None


def parse_series(expression: str) -> list[tuple[str, tuple[Matcher, ...]]] | None:
    """The catalog's series forms: `m`, `m{l="v"}`, `a / b`, `a / (a + b)`."""
    terms = []
    for part in re.split(r"[/()+]", expression):
        if not part.strip():
            continue
        found = _SELECTOR.fullmatch(part)
        if not found:
            return None
        own = tuple(
            (label, op, value.replace('\\"', '"').replace("\\\\", "\\"))
            for label, op, value in _MATCHER.findall((found.group(2) or "{}")[1:-1])
        )
        terms.append((found.group(1), own))
    return terms or None


def scoped_matchers(scope: Scope, metric: str, level: str) -> list[tuple[Matcher, ...]]:
    """Label matchers for a metric at a level, most specific first; later ones are fallbacks
    (dcgm-exporter names the pod `exported_pod` without honorLabels, or not at all)."""
    namespace = namespace_matchers(scope)
    pods = scope.pod_regex()
    nodes = "|".join(regex_escape(n) for n in sorted(scope.nodes))
    if level == "gpu":
        out: list[tuple[Matcher, ...]] = []
        if pods:
            out += [(("pod", "=~", pods),), (("exported_pod", "=~", pods),)]
        if nodes:
            out += [(("Hostname", "=~", nodes),), (("hostname", "=~", nodes),)]
        return out
    if level == "model" and scope.models and not pods:
        models = "|".join(regex_escape(m) for m in sorted(scope.models))
        return [namespace + (("model_name", "=~", f"(.+/)?({models})"),)]
    if pods:
        return [namespace + (("pod", "=~", pods),)]
    return []


def namespace_matchers(scope: Scope) -> tuple[Matcher, ...]:
    if len(scope.namespaces) == 1:
        return (("namespace", "=", next(iter(scope.namespaces))),)
    if scope.namespaces:
        return (("namespace", "=~", alternatives(scope.namespaces)),)
    return ()


def dedupe(queries: list[EvidenceQuery]) -> list[EvidenceQuery]:
    seen: set[tuple[str, str]] = set()
    out = []
    for query in queries:
        if (query.signal, query.promql) not in seen:
            seen.add((query.signal, query.promql))
            out.append(query)
    return out


def selector(metric: str, matchers: Iterable[Matcher]) -> str:
    inner = ",".join(f'{label}{op}"{promql_string(value)}"' for label, op, value in matchers)
    return f"{metric}{{{inner}}}" if inner else metric


def promql_string(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def regex_escape(value: str) -> str:
    """Escapes what RE2 and Python's re read alike (not `-`, which both take literally outside sets)."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", value)


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"
