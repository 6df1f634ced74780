"""The local series store: OpenMetrics files imported into `LocalSeries`, read back the way
Prometheus answers a range query.

`parse_openmetrics` reads a file (the format `promtool tsdb create-blocks-from openmetrics`
takes: timestamps in seconds, a final `# EOF`), which `incidents/services/local_series.py`
merges into the rows, one per sample name and label set. `LocalSource` evaluates an
`EvidenceQuery` over those rows with Prometheus 2.x semantics: a gauge at step t is its last
sample in [t-5m, t]; `rate` is Prometheus' extrapolated rate over [t-w, t] with counter resets;
`histogram_quantile` interpolates inside the bucket as Prometheus does. A team without
Prometheus (or with a Prometheus whose retention has ended) thereby gets the same evidence from
an export.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from incidents.evidence import queries as q
from incidents.evidence.points import RangeSeries, unpack_points
from incidents.models import LocalSeries

_SAMPLE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r'(?:\{((?:\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\]|\\.)*"\s*,?)*)\s*\})?'
    r"\s+(\S+)(?:\s+(\S+))?\s*(?:#.*)?$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_UNESCAPE = re.compile(r"\\(.)")
MILLISECONDS_FROM = 1e11  # seconds reach this in the year 5138; milliseconds passed it in 1973


class OpenMetricsError(ValueError):
    """A file that cannot be imported; the message names the line."""


def parse_openmetrics(
    lines: Iterable[str],
) -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, float]]:
    """Samples by (sample name, sorted labels); a repeated timestamp keeps the last value."""
    series: dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, float]] = defaultdict(dict)
    label_cache: dict[str, tuple[tuple[str, str], ...]] = {}
    ended = False
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if ended:
            raise OpenMetricsError(f"line {number}: content after # EOF")
        if line.startswith("#"):
            ended = line.strip() == "# EOF"
            continue
        found = _SAMPLE.match(line)
        if not found:
            raise OpenMetricsError(f"line {number}: not a sample: {line[:120]!r}")
        name, raw_labels, raw_value, raw_ts = found.groups()
        if raw_ts is None:
            raise OpenMetricsError(
                f"line {number}: sample without a timestamp (history needs one on every sample)"
            )
        try:
            value, ts = float(raw_value), float(raw_ts)
        except ValueError:
            raise OpenMetricsError(
                f"line {number}: value {raw_value!r} or timestamp {raw_ts!r} is not a number"
            ) from None
        if ts >= MILLISECONDS_FROM:
            raise OpenMetricsError(
                f"line {number}: timestamp {raw_ts} looks like milliseconds; OpenMetrics uses seconds"
            )
        if not ts >= 0:  # NaN, -Inf, before 1970: no time a series can be stored at
            raise OpenMetricsError(f"line {number}: timestamp {raw_ts} is not a time in seconds since 1970")
        labels = label_cache.get(raw_labels or "")
        if labels is None:
            labels = tuple(
                sorted((k, _UNESCAPE.sub(_unescape, v)) for k, v in _LABEL.findall(raw_labels or ""))
            )
            if any("\x00" in value for _, value in labels):
                raise OpenMetricsError(
                    f"line {number}: a label value holds a NUL character, which cannot be stored"
                )
            label_cache[raw_labels or ""] = labels
        series[(name, labels)][ts] = value
    if not ended:
        raise OpenMetricsError("the file does not end with # EOF (truncated?)")
    return series


def _unescape(found: re.Match) -> str:
    return "\n" if found.group(1) == "n" else found.group(1)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


# Reading ---------------------------------------------------------------------------------


@dataclass
class _Raw:
    labels: dict[str, str]
    times: list[float]
    values: list[float]


class LocalSource:
    """Answers `EvidenceQuery`s from `LocalSeries`, with the shape of a Prometheus range query."""

    name = "import"

    def __init__(self) -> None:
        self._cache: dict[tuple, list[_Raw]] = {}

    def range(self, query: q.EvidenceQuery, start: float, end: float, step: float) -> list[RangeSeries]:
        steps = grid(start, end, step)
        if not steps:
            return []
        kind = query.kind
        if kind == q.GAUGE:
            out = [
                self._series(raw.labels, steps, lambda t, raw=raw: gauge_at(raw, t))
                for raw in self._select(query.metric, query.matchers, start - q.LOOKBACK_SECONDS, end)
            ]
        elif kind == q.RATE:
            out = [
                self._series(raw.labels, steps, lambda t, raw=raw: rate_at(raw, t, query.window))
                for raw in self._select(query.metric, query.matchers, start - query.window, end)
            ]
        elif kind in (q.QUANTILE, q.SPREAD):
            out = self._quantiles(query, steps, start, end)
        elif kind == q.MEAN:
            sums = self._summed(query.metric + "_sum", query, steps, start, end)
            counts = self._summed(query.metric + "_count", query, steps, start, end)
            out = [
                RangeSeries(
                    dict(key),
                    [(t, divide(v, counts[key][t])) for t, v in points.items() if t in counts.get(key, {})],
                )
                for key, points in sums.items()
                if key in counts
            ]
        elif kind == q.FRACTION_OF_SUM:
            a = self._instant_by_labels(query.metric, query.matchers, steps, start, end, ())
            b = self._instant_by_labels(query.other, query.matchers, steps, start, end, ())
            out = [
                RangeSeries(
                    dict(key),
                    [(t, divide(v, v + b[key][t])) for t, v in points.items() if t in b.get(key, {})],
                )
                for key, points in a.items()
                if key in b
            ]
        elif kind == q.DIVIDE:
            ignoring = query.ignoring
            if query.counters:
                a = self._rates_by_labels(query.metric, query.matchers, query, steps, start, end, ignoring)
                b = self._rates_by_labels(
                    query.other, query.other_matchers, query, steps, start, end, ignoring
                )
            else:
                a = self._instant_by_labels(query.metric, query.matchers, steps, start, end, ignoring)
                b = self._instant_by_labels(query.other, query.other_matchers, steps, start, end, ignoring)
            out = [
                RangeSeries(
                    dict(key), [(t, divide(v, b[key][t])) for t, v in points.items() if t in b.get(key, {})]
                )
                for key, points in a.items()
                if key in b
            ]
        else:
            raise ValueError(f"unknown query kind {kind!r}")
        return [series for series in out if series.points]

    # -- selection ------------------------------------------------------------------------

    def _select(self, metric: str, matchers: tuple[q.Matcher, ...], start: float, end: float) -> list[_Raw]:
        cache_key = (metric, matchers, start, end)
        if cache_key in self._cache:
            return self._cache[cache_key]
        compiled = [(label, op, re.compile(value) if op == "=~" else value) for label, op, value in matchers]
        rows = LocalSeries.objects.filter(metric=metric, start__lte=_dt(end), end__gte=_dt(start)).only(
            "id", "labels"
        )
        wanted = [row.pk for row in rows if matches(row.labels, compiled)]
        found = []
        for row in LocalSeries.objects.filter(pk__in=wanted).only("labels", "points"):
            points = unpack_points(row.points)
            lo = bisect.bisect_left(points, (start, -math.inf))
            hi = bisect.bisect_right(points, (end, math.inf))
            chosen = points[lo:hi]
            found.append(_Raw(dict(row.labels), [t for t, _ in chosen], [v for _, v in chosen]))
        found.sort(key=lambda raw: sorted(raw.labels.items()))
        self._cache[cache_key] = found
        return found

    @staticmethod
    def _series(labels: dict[str, str], steps: list[float], value_at) -> RangeSeries:
        points = []
        for t in steps:
            value = value_at(t)
            if value is not None:
                points.append((t, value))
        return RangeSeries(labels, points)

    def _instant_by_labels(
        self, metric, matchers, steps, start, end, ignoring
    ) -> dict[tuple, dict[float, float]]:
        out: dict[tuple, dict[float, float]] = {}
        for raw in self._select(metric, matchers, start - q.LOOKBACK_SECONDS, end):
            key = tuple(sorted((k, v) for k, v in raw.labels.items() if k not in ignoring))
            out[key] = {t: v for t in steps if (v := gauge_at(raw, t)) is not None}
        return out

    def _rates_by_labels(
        self, metric, matchers, query, steps, start, end, ignoring
    ) -> dict[tuple, dict[float, float]]:
        out: dict[tuple, dict[float, float]] = {}
        for raw in self._select(metric, matchers, start - query.window, end):
            key = tuple(sorted((k, v) for k, v in raw.labels.items() if k not in ignoring))
            out[key] = {t: v for t in steps if (v := rate_at(raw, t, query.window)) is not None}
        return out

    def _summed(
        self, metric: str, query: q.EvidenceQuery, steps, start, end, extra: tuple[str, ...] = ()
    ) -> dict[tuple, dict[float, float]]:
        """`sum by (query.by + extra) (rate(metric[w]))`, per step."""
        by = (*extra, *query.by)
        out: dict[tuple, dict[float, float]] = defaultdict(dict)
        for raw in self._select(metric, query.matchers, start - query.window, end):
            key = tuple(sorted((k, raw.labels[k]) for k in by if raw.labels.get(k)))
            group = out[key]
            for t in steps:
                value = rate_at(raw, t, query.window)
                if value is not None:
                    group[t] = group.get(t, 0.0) + value
        return out

    def _quantiles(self, query: q.EvidenceQuery, steps, start, end) -> list[RangeSeries]:
        buckets = self._summed(query.metric + "_bucket", query, steps, start, end, extra=("le",))
        groups: dict[tuple, list[tuple[float, dict[float, float]]]] = defaultdict(list)
        for key, bucket_points in buckets.items():
            labels = dict(key)
            le = labels.pop("le", None)
            if le is None:
                continue
            groups[tuple(sorted(labels.items()))].append((float(le), bucket_points))
        out = []
        for key, per_bucket in groups.items():
            points = []
            for t in steps:
                counts = [(upper, values[t]) for upper, values in per_bucket if t in values]
                if not counts:
                    continue
                high = bucket_quantile(query.quantile, counts)
                value = high if query.kind == q.QUANTILE else high - bucket_quantile(0.5, counts)
                points.append((t, value))
            out.append(RangeSeries(dict(key), points))
        return out


def matches(labels: dict[str, str], compiled) -> bool:
    for label, op, expected in compiled:
        value = labels.get(label, "")
        if op == "=" and value != expected:
            return False
        if op == "=~" and not expected.fullmatch(value):
            return False
    return True


def grid(start: float, end: float, step: float) -> list[float]:
    count = int(math.floor((end - start) / step + 1e-9)) + 1
    return [start + i * step for i in range(max(0, count))]


def gauge_at(raw: _Raw, t: float) -> float | None:
    index = bisect.bisect_right(raw.times, t) - 1
    if index < 0 or raw.times[index] < t - q.LOOKBACK_SECONDS:
        return None
    return raw.values[index]


def rate_at(raw: _Raw, t: float, window: float) -> float | None:
    """Prometheus 2.x `rate()`: increase over [t-w, t] with resets, extrapolated to the window's edges."""
    lo = bisect.bisect_left(raw.times, t - window)
    hi = bisect.bisect_right(raw.times, t)
    if hi - lo < 2:
        return None
    times, values = raw.times[lo:hi], raw.values[lo:hi]
    result = values[-1] - values[0]
    last = 0.0
    for value in values:
        if value < last:
            result += last
        last = value
    to_start = times[0] - (t - window)
    to_end = t - times[-1]
    sampled = times[-1] - times[0]
    average = sampled / (len(times) - 1)
    if result > 0 and values[0] >= 0:
        to_zero = sampled * (values[0] / result)
        to_start = min(to_start, to_zero)
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    return result * (interval / sampled) / window


def bucket_quantile(quantile: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' `bucketQuantile`: linear interpolation inside the bucket holding the rank."""
    if quantile < 0:
        return -math.inf
    if quantile > 1:
        return math.inf
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    coalesced: list[list[float]] = []
    for upper, count in buckets:
        if coalesced and coalesced[-1][0] == upper:
            coalesced[-1][1] += count
        else:
            coalesced.append([upper, count])
    running = -math.inf
    for bucket in coalesced:
        running = max(running, bucket[1])
        bucket[1] = running
    if len(coalesced) < 2:
        return math.nan
    observations = coalesced[-1][1]
    if observations == 0:
        return math.nan
    rank = quantile * observations
    index = next((i for i in range(len(coalesced) - 1) if coalesced[i][1] >= rank), len(coalesced) - 1)
    if index == len(coalesced) - 1:
        return coalesced[-2][0]
    if index == 0 and coalesced[0][0] <= 0:
        return coalesced[0][0]
    start, end, count = 0.0, coalesced[index][0], coalesced[index][1]
    if index > 0:
        start = coalesced[index - 1][0]
        count -= coalesced[index - 1][1]
        rank -= coalesced[index - 1][1]
    return start + (end - start) * (rank / count)


def divide(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b
