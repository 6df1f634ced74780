#!/usr/bin/env python3
"""The whole storm through one correlation worker's runs, in process: CPU, run times and collector work.

Every body of `end_to_end.py`'s storm (all --clusters clusters, in send order) is received and
processed as the ingestion worker would (`delivery_receive`, `process_delivery`); every --every
bodies, each key with new alerts gets the run a correlation worker makes
(`correlation_run(keep_state=True)`), so one process ends up keeping the engine state of every
cluster, as a worker serving them does. Prints one JSON line: the runs' CPU, the run times'
percentiles and maximum, and the cyclic collector's collections per generation during the runs.

    # as the app runs (survivors frozen after each run):
    .venv/bin/python bench/correlate/storm_worker.py
    # the collector as before: full collections walk every kept state:
    .venv/bin/python bench/correlate/storm_worker.py --freeze off
    # a shorter storm:
    .venv/bin/python bench/correlate/storm_worker.py --seconds 10

It uses a fresh PostgreSQL database of its own (--db, dropped and created), on 127.0.0.1, and
no broker (runs happen only where the bench calls them; big incidents are ranked on every run, or
at most every 5 s with --hold-rankings, as a worker with a broker ranks them).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "correlate"))

from storm_cluster import django_on_fresh_database  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument(
        "--every",
        type=int,
        default=40,
        help="bodies between rounds of runs (one run per key with new alerts)",
    )
    ap.add_argument(
        "--freeze",
        choices=["on", "off"],
        default="on",
        help="on: run survivors frozen after each run (the app); off: the collector as before",
    )
    ap.add_argument(
        "--hold-rankings",
        action="store_true",
        help="rank big incidents at most every 5 s, as a worker with a broker does (default: on every run)",
    )
    ap.add_argument("--db", default="rootline_bench_worker")
    args = ap.parse_args()

    django_on_fresh_database(args.db)
    from end_to_end import build_storm

    from incidents import services
    from incidents.models import Alert
    from incidents.services.correlation import correlation_run, run
    from incidents.tasks import process_delivery

    if args.hold_rankings:  # the held rankings come due in the next round's run of the key
        run.defers_ranking = lambda: True
        run.correlation_enqueue_later = lambda key, seconds: None
    if args.freeze == "off":
        run.freeze_run_survivors = lambda *, state_dropped: None
    bodies = build_storm(
        rate=args.rate, seconds=args.seconds, clusters=args.clusters, body=100, seed=7, t0=time.time()
    )
    integration, _ = services.integration_add(
        kind="alertmanager", name=f"bench-{time.time()}", token=f"t-{time.time()}"
    )
    cpu = 0.0
    run_times: list[float] = []
    collections = defaultdict(int)

    def count_collections(phase: str, info: dict) -> None:
        if phase == "start":
            collections[info["generation"]] += 1

    for start in range(0, len(bodies), args.every):
        for _, _, data in bodies[start : start + args.every]:
            process_delivery(
                services.delivery_receive(integration=integration, body=data, headers={}).body["delivery"]
            )
        keys = sorted(set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True)))
        gc.callbacks.append(count_collections)
        for key in keys:
            c, t = time.process_time(), time.perf_counter()
            correlation_run(key=key, keep_state=True)
            cpu += time.process_time() - c
            run_times.append(time.perf_counter() - t)
        gc.callbacks.remove(count_collections)
    alerts = sum(n for _, n, _ in bodies)
    run_times.sort()
    print(
        json.dumps(
            {
                "alerts": alerts,
                "bodies": len(bodies),
                "clusters": args.clusters,
                "every": args.every,
                "freeze": args.freeze,
                "hold_rankings": args.hold_rankings,
                "runs": len(run_times),
                "runs_cpu_s": round(cpu, 2),
                "cpu_us_per_alert": round(cpu / alerts * 1e6),
                "run_p50_ms": round(statistics.median(run_times) * 1000, 1),
                "run_p99_ms": round(run_times[min(len(run_times) - 1, int(len(run_times) * 0.99))] * 1000, 1),
                "run_max_ms": round(run_times[-1] * 1000, 1),
                "collections_by_generation": dict(sorted(collections.items())),
                "not_correlated_at_end": Alert.objects.filter(correlated=False).count(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
