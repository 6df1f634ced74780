"""The postmortem's impact figures, computed from facts and frozen with the query each came from.

Every figure is a dict (`../shared/CONTRACT.md`, figures[]): key, label, value, unit, query,
range {start, end, step}, source (`incident`, `prometheus`, `evidence` or `import`: the local
store), available, reason, and `how` (one sentence: what was done with the query's result). A
figure nobody could compute is `available: false` with the reason; no number is ever guessed.

Metric figures read range series of the incident window (onset to resolve) through the evidence
queries (`incidents/evidence/queries.py`): Prometheus first, the local store where it has
nothing, as evidence collection does. Counters are read as `rate()` (the rules pack's recording
rules, already rates, as they are) and summed over the range (rate x step per point): the
increase over the window. Each figure tries its candidates in order
(the rules pack's recording rules, then the raw metrics of the gateway, the engine's API server,
the engine) and keeps the first that answers, so one request is not counted twice.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from correlate.timeline import Durations
from incidents.evidence import queries as q
from incidents.evidence.local import LocalSource
from incidents.evidence.points import RangeSeries
from incidents.evidence.prometheus import PrometheusError, PrometheusSource
from incidents.slo import Objectives

STEP_SECONDS = 60.0
MAX_POINTS = 2000  # a week-long incident is read at a coarser step, not as 10,000 points a series
RATE_WINDOW = 120.0
BASELINE_SECONDS = 3600.0  # tokens not served: the hour before onset is the rate it would have kept
WAITING_REASONS = "CrashLoopBackOff|ContainerCreating|PodInitializing|CreateContainerError"


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step: float

    def as_dict(self) -> dict[str, Any]:
        return {"start": _iso(self.start), "end": _iso(self.end), "step": self.step}


def window_of(onset: datetime, end: datetime) -> Window:
    start, stop = onset.timestamp(), max(end.timestamp(), onset.timestamp() + STEP_SECONDS)
    step = max(STEP_SECONDS, math.ceil((stop - start) / MAX_POINTS / STEP_SECONDS) * STEP_SECONDS)
    return Window(math.floor(start / step) * step, math.ceil(stop / step) * step, step)


class Reader:
    """Range series of an `EvidenceQuery`, from Prometheus when configured, else (or when it has
    nothing) from the local store; remembers the source of each answer."""

    def __init__(self) -> None:
        self.local = LocalSource()
        self.remote: PrometheusSource | None = None
        self.down = "PROMETHEUS_URL is not set"
        if settings.PROMETHEUS_URL:
            try:
                self.remote, self.down = PrometheusSource(settings.PROMETHEUS_URL), ""
            except (TypeError, ValueError) as exc:
                self.down = f"PROMETHEUS_URL is not usable: {exc}"

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()

    def read(self, query: q.EvidenceQuery, window: Window) -> tuple[list[RangeSeries], str, str]:
        """(series, source, error): source is `prometheus` or `import` when something answered."""
        error = self.down
        if self.remote is not None and not self.down:
            try:
                found = self.remote.range(query.promql, window.start, window.end, window.step)
                if found:
                    return found, "prometheus", ""
            except PrometheusError as exc:
                error = str(exc)
                if exc.unreachable:
                    self.down = error
        found = self.local.range(query, window.start, window.end, window.step)
        return (found, "import", "") if found else ([], "", error)


# The figures ------------------------------------------------------------------------------


def incident_figures(
    *,
    durations: Durations,
    resolved_at: datetime | None,
    recovery: dict[str, Any],
    interfaces: dict[str, list[str]],
    scope: q.Scope,
    objectives: Objectives,
    reader: Reader,
) -> list[dict[str, Any]]:
    """Every figure key of the contract, in its order."""
    figures = [_interfaces_figure(interfaces), *_duration_figures(durations, resolved_at), recovery]
    if durations.onset is None:
        return figures + [
            unavailable(key, label, unit, "the incident has no onset (no alert and no crossing)")
            for key, label, unit in METRIC_FIGURES
        ]
    window = window_of(durations.onset, resolved_at or datetime.now(UTC))
    for key, label, unit in METRIC_FIGURES:
        figures.append(COMPUTERS[key](key, label, unit, scope, window, objectives, reader))
    return figures


METRIC_FIGURES = (
    ("requests_failed", "Requests failed (5xx)", "requests"),
    ("requests_shed", "Requests shed (429)", "requests"),
    ("share_over_ttft_objective", "Requests over the TTFT objective", "ratio"),
    ("share_over_tpot_objective", "Tokens over the TPOT objective", "ratio"),
    ("share_over_itl_objective", "Tokens over the ITL jitter objective", "ratio"),
    ("tokens_not_served", "Tokens not served", "tokens"),
    ("gpu_hours_lost", "GPU-hours lost to restarts", "GPU-hours"),
)


def figure(key: str, label: str, value: float | str | None, unit: str, **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "label": label,
        "value": value,
        "unit": unit,
        "query": fields.get("query", ""),
        "range": fields.get("range"),
        "source": fields.get("source", "incident"),
        "available": True,
        "reason": "",
        "how": fields.get("how", ""),
        "approximate": bool(fields.get("approximate", False)),
    }


def unavailable(key: str, label: str, unit: str, reason: str, **fields: Any) -> dict[str, Any]:
    found = figure(key, label, None, unit, **fields)
    found.update(available=False, reason=reason)
    return found


def _interfaces_figure(interfaces: dict[str, list[str]]) -> dict[str, Any]:
    named = [f"{kind} {', '.join(values)}" for kind, values in interfaces.items() if values]
    if not named:
        return unavailable(
            "affected_interfaces",
            "Affected interfaces",
            "",
            "the alerts name no model, route, deployment or cluster",
        )
    return figure(
        "affected_interfaces", "Affected interfaces", "; ".join(named), "",
        how="the models, routes, deployments and clusters the incident's alerts name",
    )  # fmt: skip


def _duration_figures(durations: Durations, resolved_at: datetime | None) -> list[dict[str, Any]]:
    onset = durations.onset
    total = (resolved_at - onset).total_seconds() if onset and resolved_at else None
    rows = [
        ("duration_s", "Duration (onset to resolve)", total),
        ("detect_s", "Time to detect", durations.detect_s),
        ("acknowledge_s", "Time to acknowledge", durations.acknowledge_s),
        ("mitigate_s", "Time to mitigate", durations.mitigate_s),
        ("resolve_s", "Time to resolve", durations.resolve_s),
    ]
    out = []
    for key, label, value in rows:
        if value is None:
            reason = "no onset" if onset is None else f"the incident has no {key.removesuffix('_s')} time yet"
            out.append(unavailable(key, label, "s", reason))
        else:
            out.append(
                figure(
                    key, label, round(value, 1), "s", how="from the incident's onset (contract: durations)"
                )
            )
    return out


# Counters summed over the window ------------------------------------------------------------


def _route_matchers(scope: q.Scope) -> tuple[q.Matcher, ...] | None:
    """Envoy Gateway names a route's cluster `httproute/<namespace>/<route>/rule/<n>`; the route
    is the deployment's (or model's) name, with a suffix at most."""
    names = sorted(scope.deployments) or sorted(m.rsplit("/", 1)[-1].lower() for m in scope.models)
    if not names:
        return None
    namespaces = "|".join(q.regex_escape(n) for n in sorted(scope.namespaces)) or "[^/]+"
    routes = "|".join(q.regex_escape(n) for n in names)
    return (("envoy_cluster_name", "=~", f"httproute/({namespaces})/({routes})(-[^/]*)?/rule/.*"),)


def _pod_matchers(scope: q.Scope) -> tuple[q.Matcher, ...] | None:
    found = q.scoped_matchers(scope, "", "pod") or q.scoped_matchers(scope, "", "model")
    return found[0] if found else None


Candidate = tuple[str, tuple[q.Matcher, ...], str]  # (metric, extra matchers, "route" | "pod")
# The rules pack's recording rules (rules/src/*.yml) are already rates: read as they are.
RECORDED = frozenset({
    "llmops:gateway_upstream_rq:rate5m", "llmops:gateway_upstream_rq_code:rate5m",
    "llmops:vllm_ttft_seconds_bucket:rate5m", "llmops:vllm_generation_tokens:rate5m",
    "llmops:vllm_itl_seconds_bucket:rate5m", "llmops:trtllm_ttft_seconds_bucket:rate5m",
    "llmops:trtllm_tpot_seconds_bucket:rate5m",
})  # fmt: skip

FAILED: tuple[Candidate, ...] = (
    ("llmops:gateway_upstream_rq:rate5m", (("envoy_response_code_class", "=", "5"),), "route"),
    ("envoy_cluster_upstream_rq_xx", (("envoy_response_code_class", "=", "5"),), "route"),
    ("http_requests_total", (("status", "=~", "5.."),), "pod"),  # prometheus_fastapi_instrumentator
    ("vllm:request_success_total", (("finished_reason", "=~", "abort|error"),), "pod"),
    ("nv_inference_request_failure", (), "pod"),  # Triton
)
SHED: tuple[Candidate, ...] = (
    ("llmops:gateway_upstream_rq_code:rate5m", (("envoy_response_code", "=", "429"),), "route"),
    ("envoy_cluster_upstream_rq", (("envoy_response_code", "=", "429"),), "route"),
    ("http_requests_total", (("status", "=", "429"),), "pod"),
)
TOKENS: tuple[Candidate, ...] = (
    ("llmops:vllm_generation_tokens:rate5m", (), "pod"),
    ("vllm:generation_tokens_total", (), "pod"),
    ("sglang:generation_tokens_total", (), "pod"),
)


def _query(candidate: Candidate, scope: q.Scope, kind: str = q.RATE) -> q.EvidenceQuery | None:
    metric, extra, level = candidate
    if metric in RECORDED:
        kind = q.GAUGE
    place = _route_matchers(scope) if level == "route" else _pod_matchers(scope)
    if place is None:
        return None
    return q.EvidenceQuery(
        signal=metric, kind=kind, metric=metric, matchers=place + extra, window=RATE_WINDOW
    )


def _first_answer(
    candidates: Sequence[Candidate], scope: q.Scope, window: Window, reader: Reader, kind: str = q.RATE
) -> tuple[q.EvidenceQuery | None, list[RangeSeries], str, list[str]]:
    tried: list[str] = []
    for candidate in candidates:
        query = _query(candidate, scope, kind)
        if query is None:
            tried.append(
                f"{candidate[0]}: the alerts name no {'route' if candidate[2] == 'route' else 'pod'}"
            )
            continue
        series, source, error = reader.read(query, window)
        if series:
            return query, series, source, tried
        tried.append(f"{query.promql}: no series" + (f" ({error})" if error else ""))
    return None, [], "", tried


def integral(series: list[RangeSeries], window: Window) -> float:
    """Sum of rate x step over the points inside (start, end]: the increase over the window."""
    return sum(v * window.step for s in series for t, v in s.points if window.start < t <= window.end)


def _counted(candidates: Sequence[Candidate]) -> Callable[..., dict[str, Any]]:
    def compute(key, label, unit, scope, window, objectives, reader) -> dict[str, Any]:
        query, series, source, tried = _first_answer(candidates, scope, window, reader)
        if query is None:
            return unavailable(
                key, label, unit, "no series answered: " + "; ".join(tried), range=window.as_dict()
            )
        return figure(
            key, label, round(integral(series, window)), unit, query=query.promql, range=window.as_dict(),
            source=source, how="sum of rate x step over the range (the increase in the window)",
        )  # fmt: skip

    return compute


# Shares outside an objective, from histogram buckets ------------------------------------------

HISTOGRAMS = {
    "share_over_ttft_objective": (
        "llmops:vllm_ttft_seconds_bucket:rate5m", "llmops:trtllm_ttft_seconds_bucket:rate5m",
        "vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket",
    ),
    "share_over_tpot_objective": (
        "llmops:trtllm_tpot_seconds_bucket:rate5m", "vllm:time_per_output_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket", "sglang:time_per_output_token_seconds_bucket",
    ),
    "share_over_itl_objective": (
        "llmops:vllm_itl_seconds_bucket:rate5m", "vllm:inter_token_latency_seconds_bucket",
        "sglang:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket",
    ),
}  # fmt: skip


def bucket_counts(series: list[RangeSeries], window: Window) -> list[tuple[float, float]]:
    """(upper bound, observations at or under it) over the window, summed over every series."""
    counts: dict[float, float] = defaultdict(float)
    for one in series:
        le = one.labels.get("le")
        if le is None:
            continue
        upper = math.inf if le in ("+Inf", "Inf", "inf") else float(le)
        counts[upper] += sum(v * window.step for t, v in one.points if window.start < t <= window.end)
    return sorted(counts.items())


def share_above(threshold: float, buckets: list[tuple[float, float]]) -> float | None:
    """The share of observations above `threshold`, interpolated linearly inside the bucket that
    holds it, as `histogram_quantile` interpolates; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for upper, count in buckets:
        if threshold <= upper:
            if math.isinf(upper):
                at_or_under = lower_count
            else:
                width = upper - lower_bound
                part = (threshold - lower_bound) / width if width > 0 else 1.0
                at_or_under = lower_count + (count - lower_count) * max(0.0, min(1.0, part))
            return max(0.0, min(1.0, 1.0 - at_or_under / total))
        lower_bound, lower_count = upper, count
    return 0.0


def rank_value(rank: float, buckets: list[tuple[float, float]]) -> float | None:
    """The value at a quantile (0..1), as `histogram_quantile`."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    target = rank * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for upper, count in buckets:
        if count >= target:
            if math.isinf(upper):
                return lower_bound
            span = count - lower_count
            return lower_bound + (upper - lower_bound) * ((target - lower_count) / span if span > 0 else 1.0)
        lower_bound, lower_count = upper, count
    return lower_bound


def _share(key, label, unit, scope, window, objectives, reader) -> dict[str, Any]:
    candidates = [(metric, (), "pod") for metric in HISTOGRAMS[key]]
    query, series, source, tried = _first_answer(candidates, scope, window, reader)
    if query is None:
        return unavailable(
            key, label, unit, "no histogram answered: " + "; ".join(tried), range=window.as_dict()
        )
    buckets = bucket_counts(series, window)
    if key == "share_over_ttft_objective":
        threshold, words = objectives.ttft_p99_s, f"TTFT over {objectives.ttft_p99_s:g} s"
    elif key == "share_over_tpot_objective":
        threshold, words = objectives.tpot_p99_s, f"TPOT over {objectives.tpot_p99_s * 1000:g} ms"
    else:
        median = rank_value(0.5, buckets)
        if median is None:
            return unavailable(key, label, unit, "the histogram holds no observation in the window")
        threshold = median + objectives.itl_jitter_s
        words = f"inter-token latency more than {objectives.itl_jitter_s * 1000:g} ms over its median"
    share = share_above(threshold, buckets)
    if share is None:
        return unavailable(
            key, label, unit, "the histogram holds no observation in the window", query=query.promql,
            range=window.as_dict(), source=source,
        )  # fmt: skip
    return figure(
        key, label, round(share, 4), unit, query=query.promql, range=window.as_dict(), source=source,
        approximate=True,
        how=f"share of observations with {words}: bucket counts over the range, interpolated inside the "
        "bucket holding the objective as histogram_quantile does",
    )  # fmt: skip


# Tokens not served and GPU-hours lost ----------------------------------------------------------


def _tokens_not_served(key, label, unit, scope, window, objectives, reader) -> dict[str, Any]:
    before = Window(window.start - BASELINE_SECONDS, window.start, window.step)
    query, baseline, source, tried = _first_answer(TOKENS, scope, before, reader)
    if query is None:
        return unavailable(key, label, unit, "no token counter before the onset: " + "; ".join(tried))
    served_series, _, _ = reader.read(query, window)
    # The rate over the part of the hour the counter covered (a deployment younger than an hour).
    covered = len({t for s in baseline for t, _ in s.points if before.start < t <= before.end}) * before.step
    if covered <= 0:
        return unavailable(key, label, unit, f"{query.promql}: no rate in the hour before the onset")
    rate = integral(baseline, before) / covered
    served = integral(served_series, window)
    expected = rate * (window.end - window.start)
    return figure(
        key, label, round(max(0.0, expected - served)), unit, query=query.promql, range=window.as_dict(),
        source=source, approximate=True,
        how=f"the hour before onset served {rate:.1f} tokens/s; at that rate the window would have served "
        f"{expected:.0f}, it served {served:.0f}",
    )  # fmt: skip


def _gpu_hours_lost(key, label, unit, scope, window, objectives, reader) -> dict[str, Any]:
    waiting = ("kube_pod_container_status_waiting_reason", (("reason", "=~", WAITING_REASONS),), "pod")
    query, series, source, tried = _first_answer([waiting], scope, window, reader, kind=q.GAUGE)
    if query is None:
        return unavailable(key, label, unit, "no container waiting to restart: " + "; ".join(tried))
    gpus_query = _query(
        ("kube_pod_container_resource_requests", (("resource", "=", "nvidia_com_gpu"),), "pod"),
        scope,
        q.GAUGE,
    )
    gpus_of: dict[str, float] = {}
    if gpus_query is not None:
        for one in reader.read(gpus_query, window)[0]:
            pod = one.labels.get("pod", "")
            gpus_of[pod] = max([gpus_of.get(pod, 0.0), *(v for _, v in one.points)])
    seconds_by_pod: dict[str, float] = defaultdict(float)
    for one in series:
        seconds_by_pod[one.labels.get("pod", "")] += sum(
            window.step for t, v in one.points if v >= 1 and window.start < t <= window.end
        )
    hours = sum(seconds * gpus_of.get(pod, 1.0) for pod, seconds in seconds_by_pod.items()) / 3600
    assumed = sorted(pod for pod in seconds_by_pod if pod not in gpus_of)
    note = f"; pods without a GPU request counted as 1 GPU: {', '.join(assumed)}" if assumed else ""
    return figure(
        key, label, round(hours, 2), unit, query=query.promql, range=window.as_dict(), source=source,
        approximate=True,
        how="time each container waited to restart (steps where the waiting reason was set) x the GPUs its "
        f"pod requests (kube_pod_container_resource_requests){note}",
    )  # fmt: skip


COMPUTERS: dict[str, Callable[..., dict[str, Any]]] = {
    "requests_failed": _counted(FAILED),
    "requests_shed": _counted(SHED),
    "share_over_ttft_objective": _share,
    "share_over_tpot_objective": _share,
    "share_over_itl_objective": _share,
    "tokens_not_served": _tokens_not_served,
    "gpu_hours_lost": _gpu_hours_lost,
}


# The SLI's recovery, from the evidence kept -------------------------------------------------

SLI_SIGNALS = {"slo_ttft": "ttft_p99", "slo_tpot": "tpot_p99", "slo_itl": "itl_jitter"}


def sli_recovery(
    series: Sequence[tuple[str, str, Sequence[tuple[float, float]], dict[str, Any]]],
    failure_modes: Sequence[str],
    objectives: Objectives,
) -> dict[str, Any]:
    """How long the named SLI stayed over its objective: from its first point over the objective to
    the first point back under it after the last one over. `series`: (signal, query, points, range)."""
    key, label, unit = "sli_recovery_s", "Time the SLI took to recover", "s"
    limits = {
        "ttft_p99": objectives.ttft_p99_s,
        "tpot_p99": objectives.tpot_p99_s,
        "itl_jitter": objectives.itl_jitter_s,
    }
    wanted = [SLI_SIGNALS[m] for m in failure_modes if m in SLI_SIGNALS] + [
        "ttft_p99",
        "tpot_p99",
        "itl_jitter",
    ]
    for signal in dict.fromkeys(wanted):
        kept = [(query, points, span) for s, query, points, span in series if s == signal and points]
        over = [(t, query, span) for query, points, span in kept for t, v in points if v > limits[signal]]
        if not kept:
            continue
        if not over:
            return figure(
                key, label, 0.0, unit, query=kept[0][0], range=kept[0][2], source="evidence",
                how=f"{signal} never went over its objective ({limits[signal]:g} s) in the evidence kept",
            )  # fmt: skip
        first = min(t for t, _, _ in over)
        last_over, query, span = max(over, key=lambda item: item[0])
        back = [t for _, points, _ in kept for t, v in points if t > last_over and v <= limits[signal]]
        if not back:
            return unavailable(
                key, label, unit, f"{signal} was still over its objective at the end of the evidence kept",
                query=query, range=span, source="evidence",
            )  # fmt: skip
        return figure(
            key, label, round(min(back) - first, 1), unit, query=query, range=span, source="evidence",
            how=f"{signal} over {limits[signal]:g} s from {_iso(first)} until back under it at "
            f"{_iso(min(back))}",
        )  # fmt: skip
    return unavailable(key, label, unit, "no TTFT, TPOT or ITL series in the incident's evidence")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
