"""The simulator's replay of Alertmanager: fingerprints as Alertmanager computes them, and the
dispatcher's group_wait / group_interval / repeat_interval / send_resolved behaviour."""

from __future__ import annotations

import json

from correlate.simulator.alertmanager import AlertmanagerConfig, Occurrence, Route, dumps_go, simulate
from correlate.simulator.core import NS, am_fingerprint, go_time

T0 = 1_773_446_400 * NS  # 2026-03-14T00:00:00Z


def test_fingerprints_match_real_alertmanager_0_25_bodies() -> None:
    # from the testbed's recorded bodies (tests/fixtures-like samples of a live Alertmanager 0.25)
    frag = {
        "alertname": "KVCacheFragmentationHigh",
        "cluster": "testbed",
        "instance": "127.0.0.1:53573",
        "job": "llm-exporter",
        "namespace": "llm-serving",
        "pod": "pod-2",
        "severity": "warning",
    }
    mem = {
        "Hostname": "gpu-node-1",
        "alertname": "GPUMemoryHigh",
        "cluster": "testbed",
        "gpu": "0",
        "instance": "127.0.0.1:53573",
        "job": "llm-exporter",
        "namespace": "llm-serving",
        "pod": "pod-2",
        "severity": "critical",
    }
    assert am_fingerprint(frag) == "8689346a565689f7"
    assert am_fingerprint(mem) == "066cdeb743e7c51f"


def test_go_time_trims_trailing_zeros_like_rfc3339nano() -> None:
    assert go_time(T0) == "2026-03-14T00:00:00Z"
    assert go_time(T0 + 395_000_000) == "2026-03-14T00:00:00.395Z"
    assert go_time(T0 + 190_000_000) == "2026-03-14T00:00:00.19Z"
    assert go_time(T0 + 123_456_789) == "2026-03-14T00:00:00.123456789Z"


def _occ(
    name: str, starts_s: float, ends_s: float | None, arrival_s: float | None = None, **labels: str
) -> Occurrence:
    ls = {"alertname": name, "cluster": "c1", "severity": "warning", **labels}
    starts = T0 + int(starts_s * NS)
    return Occurrence(
        labels=ls,
        annotations={"summary": name},
        starts=starts,
        ends=None if ends_s is None else T0 + int(ends_s * NS),
        generator_url="http://p/graph",
        fingerprint=am_fingerprint(ls),
        arrival=T0 + int((arrival_s if arrival_s is not None else starts_s + 0.1) * NS),
        am="am",
    )


CFG = {
    "am": AlertmanagerConfig(
        "am", "http://am", (Route("rootline", ("alertname", "cluster"), 30, 300, 4 * 3600),)
    )
}


def _at(d) -> float:
    return (d.at - T0) / NS


def test_first_flush_waits_group_wait_and_resolved_goes_out_on_the_next_tick() -> None:
    deliveries = simulate(CFG, [_occ("A", 0, 100)], T0 + 3600 * NS)
    assert [round(_at(d), 1) for d in deliveries] == [30.1, 330.1]
    first, second = (d.body for d in deliveries)
    assert first["status"] == "firing" and first["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert second["status"] == "resolved" and second["alerts"][0]["endsAt"] == go_time(T0 + 100 * NS)
    assert first["groupKey"] == '{}:{alertname="A", cluster="c1"}'
    assert json.loads(dumps_go(first)) == first


def test_a_new_alert_in_the_group_resends_the_old_one_at_the_next_interval() -> None:
    a = _occ("A", 0, None, pod="p1")
    b = _occ("A", 60, None, pod="p2")
    deliveries = simulate(CFG, [a, b], T0 + 900 * NS)
    assert [round(_at(d), 1) for d in deliveries] == [30.1, 330.1]
    assert [len(d.body["alerts"]) for d in deliveries] == [1, 2]
    assert deliveries[1].body["commonLabels"] == {"alertname": "A", "cluster": "c1", "severity": "warning"}


def test_repeat_interval_resends_an_unchanged_group() -> None:
    deliveries = simulate(CFG, [_occ("A", 0, None)], T0 + 5 * 3600 * NS)
    times = [_at(d) for d in deliveries]
    assert len(times) == 2 and times[1] >= 4 * 3600 + 30


def test_a_late_alert_flushes_a_new_group_at_once() -> None:
    deliveries = simulate(CFG, [_occ("Late", 0, None, arrival_s=600)], T0 + 900 * NS)
    assert [round(_at(d), 1) for d in deliveries] == [600.0]


def test_an_alert_that_fired_and_cleared_unseen_is_never_sent() -> None:
    assert simulate(CFG, [_occ("Blip", 0, 10)], T0 + 900 * NS) == []


def test_child_route_group_key_names_its_matchers() -> None:
    cfg = {
        "am": AlertmanagerConfig(
            "am",
            "http://am",
            (
                Route("pager", ("...",), 10, 60, 3600, (("severity", "critical"),)),
                Route("rootline", ("alertname",), 30, 300, 3600),
            ),
        )
    }
    occ = _occ("Crit", 0, None, severity="critical")
    (d,) = simulate(cfg, [occ], T0 + 100 * NS)
    assert d.body["receiver"] == "pager"
    assert d.body["groupKey"].startswith('{}/{severity="critical"}:{alertname="Crit", cluster="c1"')
    assert d.body["groupLabels"] == occ.labels
