"""The simulator's metrics agree with its alerts (series cross the rules' thresholds before the
alerts start), the March timeline holds, and the labelled set is as hard as the brief asks."""

from __future__ import annotations

import itertools
import json
import os
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime

import pytest

from correlate.simulator import scenario_names
from correlate.simulator.core import HOUR, MINUTE, NS, day_start, parse_start
from correlate.simulator.scenarios import build
from correlate.simulator.world import metric_name

START = "2026-03-14T00:00:00Z"
SEED = int(os.environ.get("SIMULATOR_SEED", "1"))
LINE = re.compile(r"^([^{ ]+)\{(.*)\} (\S+) (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
GAUGES = {
    "kv": "vllm:kv_cache_usage_perc",
    "frag": "llm_kv_cache_fragmentation_ratio",
    "waiting": "vllm:num_requests_waiting",
    "running": "vllm:num_requests_running",
}


def _series(text: str, names: set[str]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(metric name, pod) -> [(ts, value)] for the named families."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m or m.group(1) not in names:
            continue
        labels = dict(LABEL.findall(m.group(2)))
        pod = labels.get("exported_pod") or labels.get("pod", "")
        out[(m.group(1), pod)].append((float(m.group(4)), float(m.group(3))))
    return out


def _at_or_before(points: list[tuple[float, float]], ts: float) -> float | None:
    best = None
    for t, v in points:
        if t <= ts:
            best = v
    return best


@pytest.fixture(scope="module")
def stories():
    out = {}
    for name in scenario_names():
        story = build(name, parse_start(START), SEED)
        files = story.build()
        out[name] = (story, files)
    return out


def _fb_ratio(series, pod: str) -> list[tuple[float, float]]:
    used = dict(series.get(("DCGM_FI_DEV_FB_USED", pod), []))
    free = dict(series.get(("DCGM_FI_DEV_FB_FREE", pod), []))
    return sorted((t, used[t] / (used[t] + free[t])) for t in used if t in free and used[t] + free[t] > 0)


@pytest.mark.parametrize("name", scenario_names())
def test_watched_gauges_cross_their_thresholds_before_alerts_start(stories, name) -> None:
    story, files = stories[name]
    names = {metric_name(e, n) for e in ("vllm", "sglang", "trtllm") for n in GAUGES.values()} - {None}
    series = _series(files["metrics.om"], names | {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"})
    checked = 0
    for occ in story.occs:
        if not occ.signal or occ.key not in story.first_seen:
            continue
        signal, keys, threshold, direction = occ.signal
        if signal not in GAUGES and signal != "fb":
            continue
        starts = occ.starts / NS
        for pod in keys:
            family = (
                GAUGES.get(signal, "")
                if signal == "frag"
                else metric_name(occ.dep.engine, GAUGES.get(signal, ""))
            )
            points = _fb_ratio(series, pod) if signal == "fb" else series.get((family, pod), [])
            assert points, (name, occ.labels["alertname"], pod)
            value = _at_or_before(points, starts)
            assert value is not None, (name, occ.labels["alertname"])
            beyond = value > threshold if direction == "up" else value < threshold
            assert beyond, (name, occ.labels["alertname"], pod, value, threshold)
            early = _at_or_before(points, starts - 25 * 60)
            if early is not None and occ.kind not in ("kv_usage",) and signal != "fb":
                # a quarter of an hour before the condition began, the series was on the safe side
                crossing = [t for t, v in points if (v > threshold if direction == "up" else v < threshold)]
                assert crossing and crossing[0] <= starts
            checked += 1
    if name not in (
        "numeric-nan",
        "spec-decode-tpot",
        "rollout-crashloop",
        "gpu-xid-crash",
        "preemption-itl",
    ):
        assert checked, "the scenario has gauge-watching alerts"


HISTS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
}
BUCKET = re.compile(r"^([^{ ]+)_bucket\{(.*)\} (\S+) (\S+)$")


def _buckets(text: str, fam: str) -> dict[str, dict[float, list[tuple[float, float]]]]:
    """pod -> le -> [(ts, cumulative count)]"""
    out: dict[str, dict[float, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for line in text.splitlines():
        m = BUCKET.match(line)
        if not m or m.group(1) != fam:
            continue
        labels = dict(LABEL.findall(m.group(2)))
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        out[labels["pod"]][le].append((float(m.group(4)), float(m.group(3))))
    return out


def _quantile(q: float, counts: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative bucket counts."""
    les = sorted(counts)
    total = counts[les[-1]]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        if counts[le] >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_c) / max(1e-9, counts[le] - prev_c)
        prev_le, prev_c = le, counts[le]
    return prev_le


@pytest.mark.parametrize("name", scenario_names())
def test_rates_and_latency_quantiles_cross_before_alerts_start(stories, name) -> None:
    """rate(vllm:num_preemptions_total[5m]) and histogram_quantile(0.99, ...[5m]) as the rules see them."""
    story, files = stories[name]
    text = files["metrics.om"]
    preempt = _series(text, {"vllm:num_preemptions_total", "sglang:num_retracted_requests_total"})
    for occ in story.occs:
        if not occ.signal or occ.key not in story.first_seen:
            continue
        signal, keys, threshold, _ = occ.signal
        t = occ.starts / NS
        engine = occ.dep.engine if occ.dep is not None else "vllm"
        if signal == "preempt":
            for pod in keys:
                pts = preempt[(metric_name(engine, "vllm:num_preemptions") + "_total", pod)]
                now, before = _at_or_before(pts, t), _at_or_before(pts, t - 300)
                assert (now - before) / 300 > threshold, (name, occ.labels["alertname"])
        elif signal in HISTS:
            hist = _buckets(text, metric_name(engine, HISTS[signal]))
            merged: dict[float, float] = defaultdict(float)
            if "model_name" in occ.labels and "pod" not in occ.labels:  # by (namespace, model_name)
                keys = [p for p in hist if p.startswith(occ.dep.name + "-")]
            for pod in keys:
                for le, pts in hist[pod].items():
                    now, before = _at_or_before(pts, t), _at_or_before(pts, t - 300)
                    if now is not None and before is not None and now >= before:
                        merged[le] += now - before
            assert merged, (name, occ.labels["alertname"])
            assert _quantile(0.99, merged) > threshold, (name, occ.labels["alertname"], dict(merged))


def test_march_gpu_memory_crosses_85_percent_at_t_plus_30m(stories) -> None:
    story, files = stories["march-oom"]
    T = (day_start(parse_start(START)) + 1 * HOUR) / NS
    series = _series(
        files["metrics.om"],
        {
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "llm_kv_cache_fragmentation_ratio",
            "vllm:kv_cache_usage_perc",
        },
    )
    pods = sorted({pod for (fam, pod) in series if fam == "DCGM_FI_DEV_FB_USED"})
    ratios = {pod: _fb_ratio(series, pod) for pod in pods}
    first_cross = min(t for pts in ratios.values() for t, v in pts if v > 0.85)
    assert T + 29 * 60 < first_cross <= T + 31 * 60
    for pts in ratios.values():
        assert all(v < 0.8 for t, v in pts if t < T + 20 * 60)
    assert not any(fam == "vllm:kv_cache_usage_perc" for fam, _ in series), "no KV-pool series in March"
    truth = json.loads(files["truth.json"])
    (inc,) = truth["incidents"]
    names = {}
    for line in files["alerts.jsonl"].splitlines():
        for a in json.loads(line)["alerts"]:
            names[(a["fingerprint"], a["startsAt"])] = a
    root = names[(inc["root"]["fingerprint"], inc["root"]["starts_at"])]
    root_start = datetime.fromisoformat(root["startsAt"].replace("Z", "+00:00")).timestamp()
    assert T + 44 * 60 < root_start < T + 47 * 60
    frag = series[("llm_kv_cache_fragmentation_ratio", root["labels"]["pod"])]
    assert _at_or_before(frag, root_start) > 0.40
    change = json.loads(files["changes.jsonl"].splitlines()[0])
    assert change["payload"]["custom_details"]["change_type"] == "threshold_edit"
    assert change["payload"]["custom_details"]["reviewed"] == "false"
    assert (
        datetime.fromisoformat(change["payload"]["timestamp"].replace("Z", "+00:00")).timestamp() == T + 600
    )
    assert {m["starts_at"] for m in inc["alerts"]} >= {change["payload"]["timestamp"]}
    ooms = sorted(
        datetime.fromisoformat(m["startsAt"].replace("Z", "+00:00")).timestamp()
        for m in names.values()
        if "oom" in m["labels"]["alertname"].lower()
    )
    assert ooms and T + 59 * 60 < ooms[0] < T + 63 * 60
    actions = [json.loads(x) for x in files["actions.jsonl"].splitlines()]
    by_action = {a["action"]: a for a in actions}
    fp = by_action["false_positive"]
    assert (fp["fingerprint"], fp["starts_at"]) == (inc["root"]["fingerprint"], inc["root"]["starts_at"])
    assert T + 45 * 60 <= _ts(fp["at"]) <= T + 50 * 60
    deg = by_action["degrade"]
    assert deg["level"] in {"L2", "L3"} and _ts(deg["at"]) == T + 75 * 60
    assert {"acknowledge", "note", "resolve"} <= set(by_action)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_fleet_day_is_at_least_as_hard_as_a_real_fleet(stories) -> None:
    story, files = stories["fleet-day"]
    truth = json.loads(files["truth.json"])
    bodies = [json.loads(x) for x in files["alerts.jsonl"].splitlines()]
    occ = {}
    appearances = Counter()
    for b in bodies:
        for a in b["alerts"]:
            occ.setdefault((a["fingerprint"], a["startsAt"]), a)
            appearances[(a["fingerprint"], a["startsAt"])] += 1
    labelled = sum(1 for a in occ.values() if {"layer", "failure_mode"} & set(a["labels"]))
    assert 0.3 <= labelled / len(occ) <= 0.7
    clusters = {a["labels"]["cluster"] for a in occ.values()}
    assert len(clusters) >= 3
    incidents = truth["incidents"]
    assert len(incidents) >= 8
    late_roots = 0
    change_roots = 0
    fps_per_incident = defaultdict(set)
    for inc in incidents:
        root = (inc["root"]["fingerprint"], inc["root"]["starts_at"])
        if root not in occ:
            change_roots += 1
            continue
        if any(_ts(m["starts_at"]) < _ts(root[1]) for m in inc["alerts"]):
            late_roots += 1
        for m in inc["alerts"]:
            fps_per_incident[m["fingerprint"]].add(inc["id"])
    assert late_roots >= 3, "roots that fire after their effects"
    assert change_roots >= 2, "rollouts / config changes as roots"
    assert any(len(ids) > 1 for ids in fps_per_incident.values()), "a recurrence reuses fingerprints"
    noise_fps = Counter(m["fingerprint"] for m in truth["noise"])
    assert max(noise_fps.values()) >= 2, "a flapping noise alert"
    assert any(n >= 3 for n in appearances.values()), "re-sent occurrences"
    assert any(b["status"] == "resolved" for b in bodies)
    assert any(len({a["labels"].get("model_name") for a in b["alerts"]} - {None}) > 1 for b in bodies) or any(
        len({tuple(sorted(a["labels"].items())) for a in b["alerts"]}) > 1 for b in bodies
    )
    # a cause delivered late: some root reaches the receiver after one of its effects did
    first_body = {}
    for i, b in enumerate(bodies):
        for a in b["alerts"]:
            first_body.setdefault((a["fingerprint"], a["startsAt"]), i)
    late = 0
    for inc in incidents:
        root = (inc["root"]["fingerprint"], inc["root"]["starts_at"])
        if root in first_body and any(
            first_body.get((m["fingerprint"], m["starts_at"]), 1 << 30) < first_body[root]
            for m in inc["alerts"]
        ):
            late += 1
    assert late >= 2
    changes = [json.loads(x) for x in files["changes.jsonl"].splitlines()]
    decoys = {(c["payload"]["timestamp"]) for c in changes} & {m["starts_at"] for m in truth["noise"]}
    assert len(decoys) >= 2, "decoy changes are noise"


@pytest.mark.parametrize("seed", [1, 2, 3, 101])
def test_fleet_day_seeds_keep_their_shape(seed) -> None:
    story = build("fleet-day", parse_start(START), seed)
    files = story.build()
    truth = json.loads(files["truth.json"])
    assert len(truth["incidents"]) >= 8
    assert len(truth["noise"]) >= 8
    assert len(files["metrics.om"]) < 22_000_000  # about 19 MB with the incidents' request outcomes
    assert datetime.fromtimestamp(story.occs[0].starts / NS, UTC).date().isoformat() == "2026-03-14"
    assert MINUTE


def _all_series(text: str) -> dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]]:
    """family sample name -> [(labels, [(ts, value)])]"""
    grouped: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    label_of: dict[tuple[str, str], dict[str, str]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            continue
        key = (m.group(1), m.group(2))
        grouped[key].append((float(m.group(4)), float(m.group(3))))
        if key not in label_of:
            label_of[key] = dict(LABEL.findall(m.group(2)))
    out: dict[str, list] = defaultdict(list)
    for (name, raw), pts in grouped.items():
        out[name].append((label_of[(name, raw)], pts))
    return out


def _increase(pts: list[tuple[float, float]], t: float, window: float) -> float | None:
    """increase() over (t - window, t], counter resets handled."""
    inside = [(ts, v) for ts, v in pts if t - window < ts <= t]
    if len(inside) < 2:
        return None
    total = 0.0
    for (_, a), (_, b) in itertools.pairwise(inside):
        total += b - a if b >= a else b
    return total


def _pick(series, name: str, **labels: str):
    return [(ls, pts) for ls, pts in series.get(name, []) if all(ls.get(k) == v for k, v in labels.items())]


@pytest.mark.parametrize("name", scenario_names())
def test_event_and_ratio_rules_agree_with_the_series(stories, name) -> None:
    """Counters, ratios and kube-state-metrics behind the other rules, evaluated at startsAt."""
    story, files = stories[name]
    series = _all_series(files["metrics.om"])
    seen_kinds = set()
    for occ in story.occs:
        if occ.key not in story.first_seen or occ.dep is None:
            continue
        t = occ.starts / NS
        labels = occ.labels
        engine = occ.dep.engine
        ctx = (name, labels["alertname"])
        if occ.kind in ("oom_killed", "cuda_oom", "engine_restart"):
            (restarts,) = _pick(series, "kube_pod_container_status_restarts_total", pod=labels["pod"])
            assert _increase(restarts[1], t, 600) >= 1, ctx
            if occ.kind != "engine_restart":
                reason = "OOMKilled" if occ.kind == "oom_killed" else "Error"
                (last,) = _pick(
                    series,
                    "kube_pod_container_status_last_terminated_reason",
                    pod=labels["pod"],
                    reason=reason,
                )
                assert _at_or_before(last[1], t) == 1, ctx
        elif occ.kind == "crashloop":
            (waiting,) = _pick(series, "kube_pod_container_status_waiting_reason", pod=labels["pod"])
            assert any(t - 300 <= ts <= t for ts, _ in waiting[1]), ctx
            assert waiting[1][0][0] <= t - 14 * 60, "CrashLoopBackOff held for the rule's 15m"
        elif occ.kind == "target_down":
            ups = _pick(
                series, "up", job=labels["job"], namespace=labels["namespace"], service=labels["service"]
            )
            values = [_at_or_before(pts, t) for _, pts in ups]
            assert values.count(0) / len(values) > 0.10, ctx
        elif occ.kind == "replicas":
            (avail,) = _pick(
                series, "kube_deployment_status_replicas_available", deployment=labels["deployment"]
            )
            assert _at_or_before(avail[1], t) < occ.dep.replicas, ctx
        elif occ.kind in ("xid", "ecc"):
            pod_key = "exported_pod" if "exported_pod" in labels else "pod"
            fam = "DCGM_FI_DEV_XID_ERRORS" if occ.kind == "xid" else "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
            found = _pick(series, fam, UUID=labels["UUID"], **{pod_key: labels[pod_key]})
            assert found, ctx
            if occ.kind == "xid":
                assert max(v for ls, pts in found for ts, v in pts if t - 300 <= ts <= t) > 0, ctx
            else:
                assert sum(_increase(pts, t, 600) or 0 for _, pts in found) > 0, ctx
        elif occ.kind == "nan":
            (corrupt,) = _pick(series, "vllm:corrupted_requests_total", pod=labels["pod"])
            assert _increase(corrupt[1], t, 300) > 0, ctx
        elif occ.kind == "spec":
            (draft,) = _pick(series, "vllm:spec_decode_num_draft_tokens_total", pod=labels["pod"])
            (acc,) = _pick(series, "vllm:spec_decode_num_accepted_tokens_total", pod=labels["pod"])
            assert _increase(acc[1], t, 600) / _increase(draft[1], t, 600) < 0.65, ctx
        elif occ.kind == "hot":
            fam = metric_name(engine, "vllm:request_success") + "_total"
            rates = defaultdict(float)
            for ls, pts in _pick(series, fam, namespace=labels["namespace"], model_name=labels["model_name"]):
                rates[ls["pod"]] += (_increase(pts, t, 300) or 0) / 300
            live = [r for r in rates.values() if r > 0]
            assert rates[labels["pod"]] / (sum(live) / len(live)) > 2, (ctx, dict(rates))
        elif occ.kind == "errors":
            parts = _pick(
                series, "http_requests_total", namespace=labels["namespace"], service=labels["service"]
            )
            bad = sum(_increase(pts, t, 300) or 0 for ls, pts in parts if ls["status"] == "5xx")
            total = sum(_increase(pts, t, 300) or 0 for ls, pts in parts)
            assert bad / total > 0.02, ctx
        elif occ.kind == "repetition":
            parts = _pick(
                series,
                "vllm:request_success_total",
                namespace=labels["namespace"],
                model_name=labels["model_name"],
            )
            rep = sum(
                _increase(pts, t, 600) or 0 for ls, pts in parts if ls["finished_reason"] == "repetition"
            )
            total = sum(_increase(pts, t, 600) or 0 for ls, pts in parts)
            assert rep / total > 0.05, ctx
        elif occ.kind == "disconnects":
            parts = _pick(series, "istio_requests_total", destination_workload=labels["destination_workload"])
            dc = sum(_increase(pts, t, 300) or 0 for ls, pts in parts if ls["response_flags"] == "DC")
            total = sum(_increase(pts, t, 300) or 0 for ls, pts in parts)
            assert dc / total > 0.05, ctx
        elif occ.kind == "ghost":
            fam = metric_name(engine, "vllm:request_success") + "_total"
            done = sum(
                (_increase(pts, t, 300) or 0) / 300 for _, pts in _pick(series, fam, pod=labels["pod"])
            )
            assert done < 1, (ctx, done)
        else:
            continue
        seen_kinds.add(occ.kind)
    expected = {
        "gpu-xid-crash": {"xid", "crashloop", "target_down", "engine_restart"},
        "numeric-nan": {"repetition", "errors"},
        "spec-decode-tpot": {"spec"},
        "rollout-crashloop": {"crashloop", "replicas"},
        "config-oom": {"cuda_oom"},
        "ghost-requests": {"disconnects", "ghost"},
        "hot-instance": {"hot"},
        "frag-oom": {"oom_killed", "crashloop"},
        "march-oom": {"oom_killed", "crashloop"},
    }
    assert expected.get(name, set()) <= seen_kinds


PROMQL_WORDS = {
    "sum",
    "by",
    "rate",
    "increase",
    "histogram_quantile",
    "avg",
    "max",
    "min",
    "count",
    "on",
    "group_left",
    "ignoring",
    "and",
    "or",
    "unless",
    "offset",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "changes",
    "time",
    "le",
    "without",
    "bool",
}
METRIC = re.compile(
    r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*[\[{)]|\s*[<>=!]|\s*$|\s+(?:and|or|unless|offset|/|\*|-|\+))"
)


@pytest.mark.parametrize("name", scenario_names())
def test_series_named_in_rule_expressions_exist(stories, name) -> None:
    """What generatorURL's g0.expr selects is in metrics.om, for every rule the story models."""
    from urllib.parse import parse_qs, urlparse

    story, files = stories[name]
    text = files["metrics.om"]
    present = {line.split("{", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}
    modelled = {o.kind for o in story.occs if o.dep is not None or o.kind == "disk"}
    for occ in story.occs:
        if occ.kind not in modelled or occ.key not in story.first_seen:
            continue
        expr = parse_qs(urlparse(occ.generator_url).query)["g0.expr"][0]
        expr = re.sub(r"\{[^}]*\}", "{}", expr)
        expr = re.sub(r"\b(by|on|ignoring|group_left|group_right|without)\s*\([^)]*\)", " ", expr, flags=re.I)
        expr = re.sub(r"\boffset\s+\d+[smhd]", " ", expr)
        expr = re.sub(r"\[[^\]]*\]", "[]", expr)
        names = {
            m for m in METRIC.findall(expr) if m not in PROMQL_WORDS and not m.replace(".", "").isdigit()
        }
        names = {n for n in names if not re.fullmatch(r"\d+[smhd]?", n)}
        missing = {n for n in names if n not in present and f"{n}_bucket" not in present}
        assert not missing, (name, occ.labels["alertname"], expr, missing)
