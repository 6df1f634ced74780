"""Correlation engine under an alert storm: one cluster's dense window, batch and fed in batches.

Usage: .venv/bin/python bench/correlate/bench_storm.py [--rate 5000] [--seconds 25] [--clusters 20]
           [--body 100] [--seed 7] [--batch 100] [--only 0] [--skip-batch] [--gc-freeze] [--gc-pause]
           [--verbose]

The storm is end_to_end.py's own (`build_storm`: cascades over `--body` pods at a time, waves
overlapping, plus noise, as Alertmanager groups them), its webhook bodies turned into engine
alerts the way the app does (incidents/correlation.py `engine_alert`) and grouped per cluster
label, in delivery order. Per cluster, (a) `correlate()` of the whole window, and (b) a fresh
`Correlator` fed `add_many()` in arrival-order batches of `--batch`, as the correlation worker
keeps one per cluster key; each call is timed including building the incidents it returns.
Wall time moves with the shared machine's load; CPU time (`process_time`, `thread_time`) is the
fairer figure. `--only N` correlates the first N clusters only (quick runs); `--gc-freeze` calls
`gc.freeze()` after every `add_many()`, as a long-running worker can (see bench_engine.py);
`--gc-pause` turns the cyclic collector off during each `add_many()`, as the correlation worker's
runs do (`gc_paused()` in rootline/gc_pause.py), so the figure is the engine's own work.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.correlate.end_to_end import build_storm  # noqa: E402
from correlate.batch import correlate
from correlate.catalog import load_catalog  # noqa: E402
from correlate.engine import Correlator  # noqa: E402
from correlate.events import Alert  # noqa: E402
from correlate.io import parse_time  # noqa: E402

T0 = datetime(2026, 3, 14, 12, 0, tzinfo=UTC).timestamp()  # fixed, so every run builds the same storm


def engine_alerts(body: dict) -> list[Alert]:
    """A webhook body's alerts as the app hands them to the engine (all firing in a storm)."""
    out = []
    for raw in body["alerts"]:
        status = raw.get("status", "firing")
        ends_at = parse_time(raw.get("endsAt")) if status == "resolved" else None
        out.append(
            Alert(
                fingerprint=raw["fingerprint"],
                starts_at=parse_time(raw["startsAt"]),
                labels=dict(raw["labels"]),
                annotations=dict(raw.get("annotations", {})),
                ends_at=ends_at,
                status=status,
                generator_url=raw.get("generatorURL", ""),
            )
        )
    return out


def storm_per_cluster(args: argparse.Namespace) -> dict[str, list[Alert]]:
    bodies = build_storm(
        rate=args.rate, seconds=args.seconds, clusters=args.clusters, body=args.body, seed=args.seed, t0=T0
    )
    clusters: dict[str, list[Alert]] = {}
    for _, _, raw in bodies:
        for alert in engine_alerts(json.loads(raw)):
            clusters.setdefault(alert.labels.get("cluster", ""), []).append(alert)
    return clusters


def percentile(sorted_values: list[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * share))]


def timed(call):
    began, began_cpu = time.perf_counter(), time.thread_time()
    result = call()
    return result, time.perf_counter() - began, time.thread_time() - began_cpu


def run_batch(alerts: list[Alert], catalog) -> tuple[list, float, float]:
    gc.collect()
    return timed(lambda: correlate(alerts, catalog=catalog))


def run_incremental(
    alerts: list[Alert], catalog, size: int, freeze: bool, pause: bool = False
) -> tuple[Correlator, list[float], list[float]]:
    gc.collect()
    correlator = Correlator(catalog)
    walls, cpus = [], []
    for start in range(0, len(alerts), size):
        chunk = alerts[start : start + size]
        if pause:
            gc.disable()
        _, wall, cpu = timed(lambda chunk=chunk: correlator.add_many(chunk))
        if pause:
            gc.enable()
        walls.append(wall)
        cpus.append(cpu)
        if freeze:
            gc.freeze()
    return correlator, walls, cpus


def shape(incidents) -> list[tuple]:
    return [(i.alert_keys, i.root.alert_key if i.root else None) for i in incidents]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=5000)
    parser.add_argument("--seconds", type=float, default=25)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--body", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--only", type=int, default=0, help="correlate the first N clusters only (0: all)")
    parser.add_argument("--skip-batch", action="store_true")
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after every add_many()")
    parser.add_argument(
        "--gc-pause", action="store_true", help="cyclic GC off during each add_many(), as the worker runs"
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    catalog = load_catalog(use_env=False)
    per_cluster = storm_per_cluster(args)
    names = sorted(per_cluster)[: args.only or None]
    rows, walls, cpus = [], [], []
    totals = {"batch_wall_s": 0.0, "batch_cpu_s": 0.0, "incremental_wall_s": 0.0, "incremental_cpu_s": 0.0}
    same_everywhere = True
    for name in names:
        alerts = per_cluster[name]
        row: dict = {"cluster": name, "alerts": len(alerts)}
        expected = None
        if not args.skip_batch:
            expected, wall, cpu = run_batch(alerts, catalog)
            row.update(batch_wall_s=round(wall, 3), batch_cpu_s=round(cpu, 3), incidents=len(expected))
            totals["batch_wall_s"] += wall
            totals["batch_cpu_s"] += cpu
        correlator, cluster_walls, cluster_cpus = run_incremental(
            alerts, catalog, args.batch, args.gc_freeze, args.gc_pause
        )
        walls += cluster_walls
        cpus += cluster_cpus
        totals["incremental_wall_s"] += sum(cluster_walls)
        totals["incremental_cpu_s"] += sum(cluster_cpus)
        row.update(
            incremental_wall_s=round(sum(cluster_walls), 3),
            incremental_cpu_s=round(sum(cluster_cpus), 3),
            batch_max_ms=round(max(cluster_walls) * 1000, 1),
        )
        if expected is not None:
            row["incremental_equals_batch"] = shape(correlator.incidents()) == shape(expected)
            same_everywhere &= row["incremental_equals_batch"]
        rows.append(row)
        if args.verbose:
            print(json.dumps(row), file=sys.stderr, flush=True)
    alerts_total = sum(len(per_cluster[n]) for n in names)
    walls.sort()
    cpus.sort()
    result = {
        "rate": args.rate,
        "seconds": args.seconds,
        "clusters": len(names),
        "alerts": alerts_total,
        "largest_cluster_alerts": max(len(per_cluster[n]) for n in names),
        "add_many_batch": args.batch,
        "gc_freeze": args.gc_freeze,
        "gc_pause": args.gc_pause,
        **{key: round(value, 3) for key, value in totals.items()},
        "incremental_us_per_alert_wall": round(totals["incremental_wall_s"] / alerts_total * 1e6, 1),
        "incremental_us_per_alert_cpu": round(totals["incremental_cpu_s"] / alerts_total * 1e6, 1),
        "add_many_calls": len(walls),
        "add_many_p50_ms": round(percentile(walls, 0.5) * 1000, 2),
        "add_many_p99_ms": round(percentile(walls, 0.99) * 1000, 2),
        "add_many_max_ms": round(walls[-1] * 1000, 2),
        "add_many_cpu_p50_ms": round(percentile(cpus, 0.5) * 1000, 2),
        "add_many_cpu_p99_ms": round(percentile(cpus, 0.99) * 1000, 2),
        "add_many_cpu_max_ms": round(cpus[-1] * 1000, 2),
        "add_many_mean_ms": round(statistics.fmean(walls) * 1000, 2),
        "per_cluster": rows if args.verbose else None,
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
    }
    if not args.skip_batch:
        result["incremental_equals_batch"] = same_everywhere
    print(json.dumps(result))
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
