"""Correlation engine benchmark: a synthetic day of alerts through the batch and incremental APIs.

Usage: .venv/bin/python bench/correlate/bench_engine.py [--alerts 100000] [--clusters 20] [--hours 24]
           [--seed 7] [--repeat 3] [--gc-freeze-every 0] [--processes 1]

The stream mixes cascades (fragmentation -> OOM -> crash loop -> queueing -> TTFT, GPU Xid ->
crash -> target down, preemption -> ITL/TPOT, hot replica -> queueing) with unrelated noise on
the same fleet, resolves most alerts, and delivers them in arrival order: startsAt plus a group
wait, with a few stragglers minutes late, so the incremental path also pays for replays.

`--gc-freeze-every N` calls `gc.freeze()` after every N incremental adds, as a long-running
correlation worker can after each batch: the cyclic collector then never rescans the engine's
long-lived alerts, so the incremental maximum is engine work rather than a full collection over
the whole heap. Off by default, so the default figures include the collector's pauses.

`--processes N` runs the batch with its clusters shared among N processes (correlate/batch.py);
its answer must equal the one-process batch, which is then also timed (`batch_1p_s_best`).

Each repetition drops the previous one's answer before it starts, so that every one runs as a
`recorrelate` process's single batch does. Holding it (as this bench did until the eighth
session) made the repetitions after the first slower over 2 processes: the forked worker
and this process then allocate in memory pages they still share, and each first write copies a
page; one process is not affected.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from correlate.batch import correlate
from correlate.catalog import load_catalog  # noqa: E402
from correlate.engine import Correlator  # noqa: E402
from correlate.events import FIRING, RESOLVED, Alert  # noqa: E402
from correlate.testing import label_fingerprint  # noqa: E402

START = datetime(2026, 3, 14, tzinfo=UTC)
STORIES = {
    "fragmentation": [
        (
            "LLMKVFragmentationHigh",
            "pod",
            0,
            "avg_over_time(llmops:kv_cache_fragmentation:ratio[15m]) > 0.25",
        ),
        ("LLMKVCachePoolUtilizationHigh", "pod", 5, ""),
        ("LLMContainerOOMKilled", "pod", 15, ""),
        ("KubePodCrashLooping", "pod", 17, ""),
        ("LLMQueueWaitHigh", "sibling", 20, ""),
        ("LLMTTFTp99High", "model", 23, ""),
    ],
    "xid": [
        ("DCGMXidErrors", "gpu", 0, ""),
        ("LLMEngineContainerCrashLoop", "pod", 2, ""),
        ("TargetDown", "pod", 4, ""),
    ],
    "preemption": [
        ("LLMVllmPreemptionsHigh", "pod", 0, ""),
        ("LLMInterTokenLatencyJitter", "model", 4, ""),
        ("LLMTPOTp99High", "model", 6, ""),
    ],
    "hot": [
        ("LLMHotReplicaTokens", "pod", 0, ""),
        ("LLMQueueWaitHigh", "pod", 3, ""),
        ("LLMTTFTp99High", "model", 8, ""),
    ],
}
NOISE = [
    "HostDiskWillFillIn4Hours",
    "KubeJobFailed",
    "NodeClockSkewDetected",
    "CertificateExpiringSoon",
    "LLMGateway5xxRate",
    "LLMQueueWaitHigh",
    "KubePodCrashLooping",
    "TargetDown",
]


def fleet(rng: random.Random, clusters: int) -> list[dict]:
    pods = []
    for c in range(clusters):
        for d in range(20):
            model = f"model-{c}-{d}"
            deployment = f"vllm-{model}"
            for p in range(8):
                pods.append(
                    {
                        "cluster": f"cluster-{c:02d}",
                        "namespace": "llm",
                        "deployment": deployment,
                        "model": model,
                        "pod": f"{deployment}-7d9f8b6c5d-{rng.randrange(10**5):05d}",
                        "node": f"gpu-node-{c}-{d}-{p // 4}",
                        "gpu": str(p % 4),
                    }
                )
    return pods


def labels_for(kind: str, pod: dict, sibling: dict) -> dict[str, str]:
    base = {"cluster": pod["cluster"], "namespace": pod["namespace"]}
    if kind == "pod":
        return {**base, "pod": pod["pod"], "model_name": pod["model"]}
    if kind == "sibling":
        return {**base, "pod": sibling["pod"], "model_name": sibling["model"]}
    if kind == "gpu":
        return {
            **base,
            "pod": "dcgm-exporter-k2x4p",
            "exported_pod": pod["pod"],
            "Hostname": pod["node"],
            "gpu": pod["gpu"],
        }
    return {**base, "model_name": pod["model"]}


def make(name: str, labels: dict[str, str], at: datetime, ends: datetime | None, expr: str) -> Alert:
    labels = {"alertname": name, **labels}
    url = f"http://prometheus/graph?g0.expr={expr}" if expr else ""
    return Alert(label_fingerprint(labels), at, labels, {}, ends, RESOLVED if ends else FIRING, url)


def stream(total: int, clusters: int, hours: int, seed: int) -> list[tuple[float, Alert]]:
    """(arrival second, alert) pairs, in arrival order."""
    rng = random.Random(seed)
    pods = fleet(rng, clusters)
    span = hours * 3600
    out: list[tuple[float, Alert]] = []
    while len(out) < total:
        pod = rng.choice(pods)
        siblings = [p for p in pods if p["deployment"] == pod["deployment"] and p is not pod]
        origin = START + timedelta(seconds=rng.uniform(0, span))
        if rng.random() < 0.6:
            for name, kind, minute, expr in STORIES[rng.choice(list(STORIES))]:
                at = origin + timedelta(minutes=minute, seconds=rng.uniform(0, 40))
                ends = at + timedelta(minutes=rng.uniform(5, 40)) if rng.random() < 0.8 else None
                out.append((0.0, make(name, labels_for(kind, pod, rng.choice(siblings)), at, ends, expr)))
        else:
            ends = origin + timedelta(minutes=rng.uniform(2, 30)) if rng.random() < 0.8 else None
            out.append(
                (
                    0.0,
                    make(
                        rng.choice(NOISE),
                        labels_for(rng.choice(["pod", "model", "gpu"]), pod, pod),
                        origin,
                        ends,
                        "",
                    ),
                )
            )
    out = out[:total]
    arrivals = []
    for _, alert in out:
        delay = rng.uniform(0, 30) + (rng.uniform(60, 600) if rng.random() < 0.02 else 0.0)
        arrivals.append(((alert.starts_at - START).total_seconds() + delay, alert))
    arrivals.sort(key=lambda pair: pair[0])
    return arrivals


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--alerts", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--gc-freeze-every", type=int, default=0, help="gc.freeze() after every N adds (0: never)"
    )
    parser.add_argument("--processes", type=int, default=1, help="batch: clusters shared among N processes")
    args = parser.parse_args()
    catalog = load_catalog(use_env=False)
    arrivals = stream(args.alerts, args.clusters, args.hours, args.seed)
    alerts = [a for _, a in arrivals]
    batch_times = []
    batch_cpu = []
    incidents = []
    for _ in range(args.repeat):
        incidents = []  # each repetition starts from the heap the first one had (see the docstring)
        gc.collect()
        began, began_cpu = time.perf_counter(), time.process_time()
        incidents = correlate(alerts, catalog=catalog, processes=args.processes)
        batch_times.append(time.perf_counter() - began)
        batch_cpu.append(time.process_time() - began_cpu)
    one_process = []
    if args.processes > 1:
        serial = []
        for _ in range(args.repeat):
            serial = []
            gc.collect()
            began = time.perf_counter()
            serial = correlate(alerts, catalog=catalog)
            one_process.append(time.perf_counter() - began)
        if serial != incidents:
            print(json.dumps({"error": "the batch over processes differs from the one-process batch"}))
            return 1
    gc.collect()
    correlator = Correlator(catalog)
    per_alert = []
    per_alert_cpu = []
    began_all = time.perf_counter()
    freeze_every = args.gc_freeze_every
    for number, alert in enumerate(alerts, 1):
        began, began_cpu = time.perf_counter(), time.thread_time()
        correlator.add(alert)
        per_alert_cpu.append(time.thread_time() - began_cpu)
        per_alert.append(time.perf_counter() - began)
        if freeze_every and number % freeze_every == 0:
            gc.freeze()
    incremental_total = time.perf_counter() - began_all
    per_alert.sort()
    per_alert_cpu.sort()
    same = [i.alert_keys for i in correlator.incidents()] == [i.alert_keys for i in incidents]
    result = {
        "alerts": len(alerts),
        "clusters": args.clusters,
        "hours": args.hours,
        "seed": args.seed,
        "incidents": len(incidents),
        "multi_alert_incidents": sum(1 for i in incidents if len(i.members) > 1),
        "batch_s_best": round(min(batch_times), 3),
        "batch_s_all": [round(t, 3) for t in batch_times],
        "batch_processes": args.processes,
        "batch_1p_s_best": round(min(one_process), 3) if one_process else round(min(batch_times), 3),
        "incremental_total_s": round(incremental_total, 3),
        "incremental_p50_ms": round(per_alert[len(per_alert) // 2] * 1000, 3),
        "incremental_p99_ms": round(per_alert[int(len(per_alert) * 0.99)] * 1000, 3),
        "incremental_max_ms": round(per_alert[-1] * 1000, 3),
        "incremental_mean_ms": round(statistics.fmean(per_alert) * 1000, 3),
        "batch_cpu_s_best": round(min(batch_cpu), 3),
        "incremental_cpu_p50_ms": round(per_alert_cpu[len(per_alert_cpu) // 2] * 1000, 3),
        "incremental_cpu_p99_ms": round(per_alert_cpu[int(len(per_alert_cpu) * 0.99)] * 1000, 3),
        "incremental_cpu_max_ms": round(per_alert_cpu[-1] * 1000, 3),
        "gc_freeze_every": freeze_every,
        "load_average": list(os.getloadavg()),
        "incremental_equals_batch": same,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(json.dumps(result))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
