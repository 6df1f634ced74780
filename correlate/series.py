"""Threshold bands over evidence series: green / yellow / red, and the crossings between them.

A raw comparison against a line makes a storm of crossings out of a noisy series that hovers at
the line. Each line is therefore a Schmitt trigger: a series enters a band at the line, leaves
it only once it is back beyond the line by a margin, and either move must hold for a minimum
dwell; the crossing is dated at the first sample of the run that held. Pure Python: the evidence
layer turns stored rows into `Series` and keeps what comes out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from correlate.catalog import Band

GREEN, YELLOW, RED = "green", "yellow", "red"
LEVELS = (GREEN, YELLOW, RED)
RANK = {GREEN: 0, YELLOW: 1, RED: 2}

# DOMAIN.md's GPU-memory rule: the bands apply to the KV pool; where a GPU's pods export no pool
# series the framebuffer ratio carries them, otherwise the framebuffer is judged by headroom.
KV_POOL = "kv_pool_usage"
FB_RATIO = "framebuffer_ratio"
FB_HEADROOM = "framebuffer_headroom"
POD_KEYS = ("exported_pod", "pod", "pod_name")
NODE_KEYS = ("Hostname", "hostname", "node", "kubernetes_node", "instance_node")


@dataclass(frozen=True)
class Hysteresis:
    """`margin` is a fraction of the line's magnitude (red 0.85 is left below 0.8075 at 5%);
    `dwell_s` is how long a move must hold before it counts."""

    margin: float = 0.05
    dwell_s: float = 60.0


@dataclass(frozen=True)
class Series:
    id: int | str
    signal: str
    labels: Mapping[str, str] = field(default_factory=dict)
    points: Sequence[tuple[float, float]] = ()
    query: str = ""

    @property
    def where(self) -> str:
        for key in (*POD_KEYS, *NODE_KEYS, "gpu", "model_name", "model", "instance"):
            if self.labels.get(key):
                return str(self.labels[key])
        return ""


@dataclass(frozen=True)
class Crossing:
    """A series moved between bands: `to` is the band it entered, `line` the threshold crossed."""

    series_id: int | str
    signal: str
    at: datetime
    previous: str
    to: str
    value: float
    line: float
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def worse(self) -> bool:
        return RANK[self.to] > RANK[self.previous]

    @property
    def id(self) -> str:
        """Stable citation id: the same stored series give the same ids on every rebuild."""
        return f"{self.series_id}:{int(self.at.timestamp())}:{self.to}"


def classify(band: Band, value: float) -> str:
    """The band a value sits in; the line itself belongs to the worse side."""
    if value is None or math.isnan(value):
        return GREEN
    if _beyond(band, value, band.red):
        return RED
    if band.yellow is not None and _beyond(band, value, band.yellow):
        return YELLOW
    return GREEN


def _beyond(band: Band, value: float, line: float) -> bool:
    return value >= line if band.direction == "above" else value <= line


def _released(band: Band, value: float, line: float, margin: float) -> bool:
    slack = abs(line) * margin if line else margin
    return value < line - slack if band.direction == "above" else value > line + slack


def _trigger_flips(
    band: Band, line: float, points: Sequence[tuple[float, float]], hysteresis: Hysteresis
) -> list[tuple[float, bool, float]]:
    """(time, now_beyond, value) each time the Schmitt trigger on `line` flips."""
    flips: list[tuple[float, bool, float]] = []
    state = False
    run_start: tuple[float, float] | None = None
    for t, v in points:
        wants_flip = _released(band, v, line, hysteresis.margin) if state else _beyond(band, v, line)
        if not wants_flip:
            run_start = None
            continue
        if run_start is None:
            run_start = (t, v)
        if t - run_start[0] >= hysteresis.dwell_s:
            state = not state
            flips.append((run_start[0], state, run_start[1]))
            run_start = None
    return flips


def crossings(series: Series, band: Band, hysteresis: Hysteresis = Hysteresis()) -> list[Crossing]:
    """Band changes of one series, oldest first. The series starts green: one that is already red
    at its first sample yields a crossing at that sample once the dwell has held."""
    points = sorted((t, v) for t, v in series.points if v is not None and not math.isnan(v))
    lines = [(RED, band.red)] + ([(YELLOW, band.yellow)] if band.yellow is not None else [])
    events: list[tuple[float, int, str, bool, float, float]] = []
    for order, (level, line) in enumerate(lines):
        for t, beyond, value in _trigger_flips(band, line, points, hysteresis):
            events.append((t, order, level, beyond, value, line))
    events.sort(key=lambda e: (e[0], e[1]))
    active = {RED: False, YELLOW: False}
    current = GREEN
    result: list[Crossing] = []
    for index, (t, _, level, beyond, value, line) in enumerate(events):
        active[level] = beyond
        if index + 1 < len(events) and events[index + 1][0] == t:
            continue  # both lines flipped on one sample: one crossing, not two
        now = RED if active[RED] else YELLOW if active[YELLOW] else GREEN
        if now != current:
            crossed = band.red if RED in (now, current) else line
            result.append(
                Crossing(series.id, series.signal, _utc(t), current, now, value, crossed, series.labels)
            )
            current = now
    return result


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _pods(labels: Mapping[str, str]) -> set[str]:
    return {labels[k] for k in POD_KEYS if labels.get(k)}


def _nodes(labels: Mapping[str, str]) -> set[str]:
    return {labels[k] for k in NODE_KEYS if labels.get(k)}


def banded(series: Sequence[Series], bands: Mapping[str, Band]) -> dict[int | str, Band | None]:
    """Which band judges each series (None: charted, never judged).

    The framebuffer ratio is judged only where the GPU's pods export no KV-pool series; where
    they do, the pool carries the memory bands and the framebuffer is judged by its headroom.
    A framebuffer series is matched to pool series by pod, else by node; one naming neither
    is judged by the ratio only if no pool series exists at all."""
    pools = [s for s in series if s.signal == KV_POOL]
    pool_pods = set().union(*(_pods(s.labels) for s in pools)) if pools else set()
    pool_nodes = set().union(*(_nodes(s.labels) for s in pools)) if pools else set()

    def has_pool(s: Series) -> bool:
        pods, nodes = _pods(s.labels), _nodes(s.labels)
        if pods:
            return bool(pods & pool_pods)
        if nodes:
            return bool(nodes & pool_nodes)
        return bool(pools)

    result: dict[int | str, Band | None] = {}
    for s in series:
        band = bands.get(s.signal)
        if s.signal == FB_RATIO and has_pool(s):
            band = None
        elif s.signal == FB_HEADROOM and not has_pool(s):
            band = None
        result[s.id] = band
    return result


def all_crossings(
    series: Iterable[Series], bands: Mapping[str, Band], hysteresis: Hysteresis = Hysteresis()
) -> list[Crossing]:
    """Crossings of every judged series, in time order."""
    series = list(series)
    judged = banded(series, bands)
    found = [c for s in series if (band := judged.get(s.id)) for c in crossings(s, band, hysteresis)]
    return sorted(found, key=lambda c: (c.at, str(c.series_id)))
