"""The request outcomes the simulator writes for its incidents' deployments (Envoy Gateway's
upstream counters, the engines' finished requests and tokens, the GPUs each pod requests): their
names and labels, 5xx exactly while pods are down, 429 only while the degradation is at L2 or
above, engine counters that stop and restart from 0, tokens not served = baseline x downtime; and
the files that existed before them unchanged, byte for byte."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import defaultdict

import pytest

from correlate.simulator import scenario_names
from correlate.simulator.core import HOUR, MINUTE, NS, day_start, parse_start
from correlate.simulator.scenarios import build
from correlate.simulator.story import Story
from correlate.simulator.world import Deployment

START = "2026-03-14T00:00:00Z"
LINE = re.compile(r"^([^{ ]+)\{(.*)\} (\S+) (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
ENVOY_LABELS = {"cluster", "namespace", "pod", "instance", "job", "envoy_cluster_name"}
NEW_FAMILIES = {
    "envoy_cluster_upstream_rq_xx",
    "envoy_cluster_upstream_rq",
    "vllm:generation_tokens",
    "sglang:generation_tokens",
    "kube_pod_container_resource_requests",
}
SUCCESS_FAMILIES = {"vllm:request_success", "sglang:num_requests", "trtllm_request_success"}
# What the code before the request outcomes wrote (seed 1 unless named, --start 2026-03-14):
# sha256 of alerts, changes, actions and truth, and of metrics.om.
FOUR_FILES = {
    ("frag-oom", 1): "0b2ddf926b30c47c",
    ("preemption-itl", 1): "d996bfc701dbea0e",
    ("hot-instance", 1): "76af11b1baa60246",
    ("numeric-nan", 1): "3fa934f9511388f1",
    ("gpu-xid-crash", 1): "4432662367330906",
    ("ghost-requests", 1): "debeb160a3c4f7eb",
    ("spec-decode-tpot", 1): "10c4bee63d8b8978",
    ("rollout-crashloop", 1): "a29381e459be8fd8",
    ("config-oom", 1): "b4c94be2bb76a0ad",
    ("threshold-storm", 1): "008e835c28d782ab",
    ("march-oom", 1): "c8bbe8fc1141f338",
    ("fleet-day", 1): "d8b4e02d54294be7",
    ("fleet-day", 2): "38ae887d7d72bd76",
    ("fleet-day", 3): "8c2843fff9aafeac",
}
METRICS_BEFORE = {("march-oom", 1): "6564941388edf7c3", ("fleet-day", 1): "802ba70e375ee55f"}

Series = dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[int, float]]]


@pytest.fixture(scope="module")
def stories() -> dict[str, tuple[Story, dict[str, str]]]:
    out = {}
    for name in scenario_names():
        story = build(name, parse_start(START), 1)
        out[name] = (story, story.build())
    return out


def _series(text: str, names: set[str]) -> Series:
    """(sample name, sorted labels) -> [(epoch seconds, value)] for the named samples."""
    out: Series = defaultdict(list)
    for line in text.splitlines():
        m = LINE.match(line)
        if m and m.group(1) in names:
            labels = tuple(sorted(LABEL.findall(m.group(2))))
            out[(m.group(1), labels)].append((int(float(m.group(4))), float(m.group(3))))
    return out


def _pick(series: Series, name: str, **labels: str) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
    return [
        (dict(ls), pts)
        for (n, ls), pts in series.items()
        if n == name and all(dict(ls).get(k) == v for k, v in labels.items())
    ]


def _one(series: Series, name: str, **labels: str) -> list[tuple[int, float]]:
    found = _pick(series, name, **labels)
    assert len(found) == 1, (name, labels, [ls for ls, _ in found])
    return found[0][1]


def _route(dep: Deployment) -> str:
    return f"httproute/{dep.namespace}/{dep.name}/rule/0"


def _outcome_deps(story: Story) -> list[Deployment]:
    return [d for d in story.touched.values() if d.name in story.tel.outcomes]


def _increases(points: list[tuple[int, float]]) -> dict[int, float]:
    """What a gateway counter (never reset) gained in the interval ending at each sample time."""
    return {t: v - u for (_, u), (t, v) in itertools.pairwise(points)}


def _gateway(text: str, dep: Deployment) -> dict[str, dict[int, float]]:
    series = _series(text, {"envoy_cluster_upstream_rq_xx"})
    return {
        cls: _increases(
            _one(
                series,
                "envoy_cluster_upstream_rq_xx",
                envoy_cluster_name=_route(dep),
                envoy_response_code_class=cls,
            )
        )
        for cls in ("2", "4", "5")
    }


def _shedding_spans(story: Story, files: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """Per deployment, from actions.jsonl and truth.json: from a degrade to L2/L3 until a lower
    level or the incident's resolve."""
    truth = json.loads(files["truth.json"])
    incident_of = {
        (a["fingerprint"], a["starts_at"]): inc["id"] for inc in truth["incidents"] for a in inc["alerts"]
    }
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    since: dict[str, int] = {}
    for line in files["actions.jsonl"].splitlines():
        row = json.loads(line)
        inc = incident_of.get((row["fingerprint"], row["starts_at"]))
        if inc is None or row["action"] not in ("degrade", "resolve"):
            continue
        at = parse_start(row["at"])
        if row["action"] == "degrade" and row["level"] in ("L2", "L3"):
            since.setdefault(inc, at)
        elif inc in since:
            spans[inc].append((since.pop(inc), at))
    for inc, at in since.items():
        spans[inc].append((at, 2**63))
    by_dep: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for incident in story.incidents:
        for name in {m.dep.name for m in incident.members if getattr(m, "dep", None) is not None}:
            by_dep[name].extend(spans.get(incident.id, ()))
    return by_dep


@pytest.mark.parametrize("name", scenario_names())
def test_outcome_families_have_the_exporters_names_and_labels(stories, name) -> None:
    story, files = stories[name]
    text = files["metrics.om"]
    deps = _outcome_deps(story)
    assert deps, "every scenario's incidents have a deployment"
    assert "# TYPE envoy_cluster_upstream_rq_xx unknown\n" in text  # Envoy's counters have no _total
    assert "# TYPE envoy_cluster_upstream_rq unknown\n" in text
    assert "# TYPE kube_pod_container_resource_requests gauge\n" in text
    assert not re.search(r"^envoy_\w*_total\{", text, re.M)
    names = {
        "envoy_cluster_upstream_rq_xx",
        "envoy_cluster_upstream_rq",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "kube_pod_container_resource_requests",
    }
    series = _series(text, names)
    for dep in deps:
        for fam, key, values in (
            ("envoy_cluster_upstream_rq_xx", "envoy_response_code_class", {"2", "4", "5"}),
            ("envoy_cluster_upstream_rq", "envoy_response_code", {"200", "429", "503"}),
        ):
            found = _pick(series, fam, envoy_cluster_name=_route(dep))
            assert {ls[key] for ls, _ in found} == values, (dep.name, fam)
            for ls, _ in found:
                assert set(ls) == ENVOY_LABELS | {key}
                assert ls["cluster"] == dep.cluster.name and ls["namespace"] == "envoy-gateway-system"
                assert ls["instance"].endswith(":19001")
        for pod in dep.old_pods + dep.pods:
            gpus = _pick(series, "kube_pod_container_resource_requests", pod=pod.name)
            assert len(gpus) == 1
            labels, points = gpus[0]
            assert labels["resource"] == "nvidia_com_gpu" and labels["unit"] == "integer"
            assert labels["node"] == pod.node.name and labels["uid"] == pod.uid
            assert {v for _, v in points} == {1.0}
            if dep.engine != "vllm":
                continue
            tokens = _pick(series, "vllm:generation_tokens_total", pod=pod.name)
            assert len(tokens) == 1 and tokens[0][0]["model_name"] == dep.served_name
            reasons = {
                ls.get("finished_reason")
                for ls, _ in _pick(series, "vllm:request_success_total", pod=pod.name)
            }
            assert {"stop", "length", "abort"} <= reasons


def test_march_gateway_answers_5xx_exactly_while_pods_are_down(stories) -> None:
    story, files = stories["march-oom"]
    text = files["metrics.om"]
    (dep,) = _outcome_deps(story)
    gateway = _gateway(text, dep)
    tokens = _series(text, {"vllm:generation_tokens_total"})
    exported = {
        p.name: {t for t, _ in _one(tokens, "vllm:generation_tokens_total", pod=p.name)} for p in dep.pods
    }
    T = (day_start(story.start) + HOUR) // NS
    down_seen = set()
    for t, failed in gateway["5"].items():
        down = [name for name, times in exported.items() if t not in times]
        assert (failed > 0) == bool(down), (t, failed, down)
        if down:
            down_seen.update(down)
            assert T + 60 * 60 <= t < T + 85 * 60, "the OOMs (02:00) and the crash loop"
            total = failed + gateway["2"][t] + gateway["4"][t]
            assert abs(failed - total * len(down) / len(dep.pods)) <= 2  # the down pods' share
    assert down_seen == {p.name for p in dep.pods[:3]}, "the three key pods go down, the fourth survives"


@pytest.mark.parametrize("name", scenario_names())
def test_429_only_while_the_degradation_is_l2_or_above(stories, name) -> None:
    story, files = stories[name]
    spans = _shedding_spans(story, files)
    for dep in _outcome_deps(story):
        for t, shed in _gateway(files["metrics.om"], dep)["4"].items():
            degraded = any(s <= t * NS < e for s, e in spans.get(dep.name, ()))
            assert (shed > 0) == degraded, (dep.name, t, shed)
    levels = {json.loads(line).get("level") for line in files["actions.jsonl"].splitlines()}
    if name == "march-oom":  # L3 at 02:15 (the ladder keeps L2's rejections) until the resolve
        ((s, e),) = spans[_outcome_deps(story)[0].name]
        T = day_start(story.start) + HOUR
        assert (s, e) == (T + 75 * MINUTE, T + 112 * MINUTE)
    if not levels & {"L2", "L3"}:
        assert not any(spans.values())


def test_engine_counters_stop_while_down_and_restart_from_zero(stories) -> None:
    story, files = stories["march-oom"]
    (dep,) = _outcome_deps(story)
    pod = dep.pods[0]  # OOM-killed at 02:00, then crash-looping until 02:24
    series = _series(files["metrics.om"], {"vllm:request_success_total", "vllm:generation_tokens_total"})
    for points in (
        _one(series, "vllm:request_success_total", pod=pod.name, finished_reason="stop"),
        _one(series, "vllm:generation_tokens_total", pod=pod.name),
    ):
        pairs = list(itertools.pairwise(points))
        restarts = [(a, b) for a, b in pairs if b[0] - a[0] > 60]  # samples come at least every minute
        assert len(restarts) == 2, "the OOM kill, then the crash loop"
        steps = [b[1] - a[1] for a, b in pairs if (a, b) not in restarts]
        assert min(steps) >= 0
        for (_, before), (_, after) in restarts:
            assert after < before and after <= max(steps), "a restarted engine counts from 0"
    gpus = _series(files["metrics.om"], {"kube_pod_container_resource_requests"})
    held = _one(gpus, "kube_pod_container_resource_requests", pod=pod.name)
    assert len(held) == len(_gateway(files["metrics.om"], dep)["5"]) + 1, "requested while down too"


def test_march_requests_and_tokens_not_served_are_the_baseline_rate_times_downtime(stories) -> None:
    story, files = stories["march-oom"]
    text = files["metrics.om"]
    (dep,) = _outcome_deps(story)
    gateway = _gateway(text, dep)
    tokens = _series(text, {"vllm:generation_tokens_total"})
    per_pod = {p.name: dict(_one(tokens, "vllm:generation_tokens_total", pod=p.name)) for p in dep.pods}
    T = (day_start(story.start) + HOUR) // NS
    grid = sorted(per_pod[dep.pods[3].name])  # the survivor exports at every sample time
    first = grid[0]
    quiet = max(t for t in grid if t <= T + 45 * 60)  # before the first OOM
    end = max(t for t in grid if t < T + 75 * 60)  # before the degradation sheds load
    base_requests = sum(gateway[c][t] for c in "245" for t in grid if first < t <= quiet) / (quiet - first)
    base_tokens = sum(p[quiet] - p[first] for p in per_pod.values()) / (len(per_pod) * (quiet - first))
    downtime = 0  # pod-seconds without a sample
    served = 0.0
    for prev, t in itertools.pairwise([t for t in grid if t <= end]):
        for points in per_pod.values():
            if t not in points:
                downtime += t - prev
            elif prev in points:
                served += points[t] - points[prev]
            else:
                served += points[t]  # the first sample after a restart counts from 0
    assert downtime > 15 * 60  # three OOMs and 11 minutes of crash loop
    failed = sum(gateway["5"][t] for t in grid if first < t <= end)
    assert failed == pytest.approx(base_requests / len(per_pod) * downtime, rel=0.03)
    not_served = base_tokens * len(per_pod) * (end - first) - served
    assert not_served == pytest.approx(base_tokens * downtime, rel=0.05)


def _without_outcomes(story: Story, text: str) -> str:
    """metrics.om without what the request outcomes added: their families, and the finished-request
    rows of the deployments that had none before."""
    added = {p.name for d in _outcome_deps(story) if "success" not in d.families for p in d.old_pods + d.pods}
    blocks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("# TYPE ") or line == "# EOF\n":
            blocks.append([])
        blocks[-1].append(line)
    kept = []
    for block in blocks:
        family = block[0].split()[2] if block[0].startswith("# TYPE ") else ""
        if family in NEW_FAMILIES:
            continue
        if family in SUCCESS_FAMILIES:
            rows = [x for x in block[2:] if re.search(r'\bpod="([^"]*)"', x).group(1) not in added]
            block = block[:2] + rows if rows else []
        kept.extend(block)
    return "".join(kept)


@pytest.mark.parametrize(("name", "seed"), sorted(FOUR_FILES))
def test_files_before_the_outcomes_are_unchanged(stories, name, seed) -> None:
    if seed == 1:
        story, files = stories[name]
    else:
        story = build(name, parse_start(START), seed)
        files = story.build()
    h = hashlib.sha256()
    for f in ("alerts.jsonl", "changes.jsonl", "actions.jsonl", "truth.json"):
        h.update(f.encode() + b"\0" + files[f].encode() + b"\0")
    assert h.hexdigest()[:16] == FOUR_FILES[(name, seed)]
    if (name, seed) in METRICS_BEFORE:
        before = hashlib.sha256(_without_outcomes(story, files["metrics.om"]).encode()).hexdigest()[:16]
        assert before == METRICS_BEFORE[(name, seed)]
