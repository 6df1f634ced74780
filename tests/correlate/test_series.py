"""Bands and crossings with hysteresis (pure: no Django)."""

from __future__ import annotations

import itertools
import math
import random

from correlate.catalog import Band, load_catalog
from correlate.series import (
    GREEN,
    RED,
    YELLOW,
    Hysteresis,
    Series,
    all_crossings,
    banded,
    classify,
    crossings,
)

BANDS = load_catalog(use_env=False).bands
KV = BANDS["kv_pool_usage"]
HEADROOM = BANDS["framebuffer_headroom"]
T0 = 1_773_450_000.0


def ramp(values, step=15.0):
    return [(T0 + i * step, v) for i, v in enumerate(values)]


def test_classify_above_and_below_with_the_line_on_the_worse_side():
    assert [classify(KV, v) for v in (0.5, 0.70, 0.8, 0.85, 0.99)] == [GREEN, YELLOW, YELLOW, RED, RED]
    assert [classify(HEADROOM, v) for v in (4096, 2048, 1500, 1024, 10)] == [GREEN, YELLOW, YELLOW, RED, RED]
    assert (
        classify(BANDS["kv_fragmentation"], 0.3) == RED and classify(BANDS["kv_fragmentation"], 0.2) == GREEN
    )
    assert classify(KV, math.nan) == GREEN


def test_a_rising_series_crosses_yellow_then_red_at_the_first_sample_of_the_run():
    series = Series(1, "kv_pool_usage", {"pod": "p"}, ramp([0.5] * 8 + [0.75] * 8 + [0.9] * 20))
    found = crossings(series, KV)
    assert [(c.previous, c.to) for c in found] == [(GREEN, YELLOW), (YELLOW, RED)]
    assert found[0].at.timestamp() == T0 + 8 * 15 and found[1].at.timestamp() == T0 + 16 * 15
    assert found[1].value == 0.9 and found[1].line == 0.85 and found[1].worse


def test_noise_around_the_red_line_makes_one_crossing_not_a_storm():
    rng = random.Random(3)
    values = [0.5] * 10 + [0.85 + rng.uniform(-0.03, 0.03) for _ in range(200)] + [0.5] * 10
    found = crossings(Series(1, "kv_pool_usage", {}, ramp(values)), KV)
    reds = [c for c in found if c.to == RED]
    assert len(reds) == 1
    raw = sum(1 for a, b in itertools.pairwise(values) if (a >= 0.85) != (b >= 0.85))
    assert raw > 20


def test_a_spike_shorter_than_the_dwell_is_not_a_crossing():
    values = [0.5] * 10 + [0.95, 0.95, 0.95] + [0.5] * 10
    assert crossings(Series(1, "kv_pool_usage", {}, ramp(values)), KV) == []
    assert crossings(Series(1, "kv_pool_usage", {}, ramp(values)), KV, Hysteresis(dwell_s=0)) != []


def test_leaving_red_needs_the_margin_below_the_line():
    values = [0.5] * 4 + [0.9] * 10 + [0.83] * 10 + [0.78] * 10
    found = crossings(Series(1, "kv_pool_usage", {}, ramp(values)), KV, Hysteresis(margin=0.05, dwell_s=30))
    assert [(c.previous, c.to) for c in found] == [(GREEN, RED), (RED, YELLOW)]
    assert found[1].at.timestamp() == T0 + 24 * 15 and not found[1].worse


def test_gaps_are_skipped():
    values = [0.5] * 5 + [math.nan] * 5 + [0.9] * 10
    found = crossings(Series(1, "kv_pool_usage", {}, [(t, v) for t, v in ramp(values)]), KV)
    assert [c.to for c in found] == [RED]


def test_framebuffer_ratio_is_judged_only_where_the_pods_export_no_pool_series():
    series = [
        Series("pool-a", "kv_pool_usage", {"pod": "a"}, ()),
        Series("ratio-a", "framebuffer_ratio", {"pod": "a", "gpu": "0"}, ()),
        Series("head-a", "framebuffer_headroom", {"pod": "a", "gpu": "0"}, ()),
        Series("ratio-b", "framebuffer_ratio", {"pod": "b", "gpu": "1"}, ()),
        Series("head-b", "framebuffer_headroom", {"pod": "b", "gpu": "1"}, ()),
        Series("pool-n", "kv_pool_usage", {"Hostname": "node-1"}, ()),
        Series("ratio-n", "framebuffer_ratio", {"Hostname": "node-1"}, ()),
        Series("ratio-m", "framebuffer_ratio", {"Hostname": "node-2"}, ()),
        Series("ratio-x", "framebuffer_ratio", {"gpu": "3"}, ()),
        Series("q", "queue_wait", {"pod": "a"}, ()),
        Series("r", "restarts", {"pod": "a"}, ()),
    ]
    judged = banded(series, BANDS)
    assert judged["pool-a"] is KV and judged["head-a"] is HEADROOM and judged["ratio-a"] is None
    assert judged["ratio-b"] is BANDS["framebuffer_ratio"] and judged["head-b"] is None
    assert judged["ratio-n"] is None and judged["ratio-m"] is BANDS["framebuffer_ratio"]  # matched by node
    assert judged["ratio-x"] is None  # neither pod nor node to match, and pool series exist
    assert judged["q"] is BANDS["queue_wait"] and judged["r"] is None


def test_all_crossings_skips_unjudged_series_and_sorts_by_time():
    hot = [0.5] * 4 + [0.95] * 20
    series = [
        Series("ratio-b", "framebuffer_ratio", {"pod": "b"}, ramp(hot[2:] + [0.95, 0.95])),
        Series("pool-a", "kv_pool_usage", {"pod": "a"}, ramp(hot)),
        Series("ratio-a", "framebuffer_ratio", {"pod": "a"}, ramp(hot)),
    ]
    found = all_crossings(series, BANDS)
    assert [c.series_id for c in found] == ["ratio-b", "pool-a"]
    assert len({c.id for c in found}) == 2


def test_a_band_without_yellow_goes_straight_to_red():
    band = Band("x", "X", "below", "ratio", 0.65, None, ())
    found = crossings(Series(1, "x", {}, ramp([0.9] * 5 + [0.5] * 10)), band)
    assert [(c.previous, c.to) for c in found] == [(GREEN, RED)]


def test_a_rootline_catalog_override_file_moves_a_band_and_its_crossings(tmp_path, monkeypatch):
    override = tmp_path / "team.yaml"
    override.write_text(
        "bands:\n  kv_pool_usage:\n    red: 0.95\n    yellow: 0.90\n"
        "  queue_wait:\n    direction: above\n    red: 0.5\n"
    )
    monkeypatch.setenv("ROOTLINE_CATALOG", str(override))
    bands = load_catalog().bands
    assert (bands["kv_pool_usage"].red, bands["kv_pool_usage"].yellow, bands["kv_pool_usage"].title) == (
        0.95,
        0.90,
        "KV-cache pool usage",
    )
    assert bands["queue_wait"].red == 0.5 and bands["queue_wait"].yellow == 0.100
    series = Series(1, "kv_pool_usage", {}, ramp([0.5] * 8 + [0.88] * 8 + [0.96] * 8))
    assert [c.to for c in crossings(series, KV)] == [RED]
    assert [c.to for c in crossings(series, bands["kv_pool_usage"])] == [RED]
    assert crossings(series, bands["kv_pool_usage"])[0].at.timestamp() == T0 + 16 * 15
    assert classify(bands["kv_pool_usage"], 0.88) == GREEN
