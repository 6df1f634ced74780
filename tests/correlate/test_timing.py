from datetime import timedelta

from correlate.testing import clock, make_alert
from correlate.timing import lookback, onset_of


def test_wide_window_in_the_expression_moves_onset_back():
    alert = make_alert(
        "KVFragmentation", "02:00", expr="avg_over_time(llm_kv_cache_fragmentation_ratio[15m]) > 0.25"
    )
    assert onset_of(alert) == clock("01:45")


def test_duration_in_the_description_moves_onset_back():
    for text in (
        "KV pool above 85% for 10 minutes",
        "fragmentation over the last 10m",
        "sustained for 10 min",
    ):
        alert = make_alert("KVPoolHigh", "02:00", annotations={"description": text})
        assert lookback(alert) == timedelta(minutes=10), text


def test_hyphenated_durations_in_the_description_count_too():
    for text in (
        "p99 above target over a 15-minute window",
        "15-min rolling average above 0.25",
        "KV pool saturated over the past 15-min period",
    ):
        alert = make_alert("KVPoolHigh", "02:00", annotations={"description": text})
        assert lookback(alert) == timedelta(minutes=15), text


def test_event_counters_fire_at_once_whatever_their_window():
    alert = make_alert(
        "Restarts", "02:00", expr="increase(kube_pod_container_status_restarts_total[30m]) > 0"
    )
    assert onset_of(alert) == clock("02:00")


def test_short_smoothing_windows_are_not_counted():
    alert = make_alert("TTFT", "02:00", expr="histogram_quantile(0.99, sum by (le)(rate(x_bucket[5m]))) > 2")
    assert onset_of(alert) == clock("02:00")


def test_lookback_is_capped_so_one_daily_window_cannot_move_an_alert_by_a_day():
    alert = make_alert("Burn", "12:00", expr="avg_over_time(slo:error_ratio[1d]) > 0.001")
    assert lookback(alert) == timedelta(hours=1)
