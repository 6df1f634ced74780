#!/usr/bin/env python3
"""One storm cluster through the app's correlation, in process: the CPU a correlation worker spends.

The bodies of one cluster of `end_to_end.py`'s storm are received and processed as the ingestion
worker would (`delivery_receive`, `process_delivery`), and every --every bodies the key is
correlated as the correlation worker would (`correlation_run(keep_state=True)`: the kept state
after the first run). Prints the runs' CPU and wall time, per alert too, as one JSON line.

    # gpu-eu-06, 5,000/s storm, runs every 10 bodies:
    .venv/bin/python bench/correlate/storm_cluster.py
    # cyclic GC left on during runs (the old way):
    .venv/bin/python bench/correlate/storm_cluster.py --gc on
    .venv/bin/python bench/correlate/storm_cluster.py --rate 500 --every 1

It uses a fresh PostgreSQL database of its own (--db, dropped and created), on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "correlate"))


def fresh_database(name: str) -> str:
    for sql in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}"):
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-XAtq", "-c", sql], check=True, capture_output=True
        )
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=ROOT,
        check=True,
        env={**os.environ, "DATABASE_URL": url},
    )
    return url


def django_on_fresh_database(name: str) -> None:
    """Django in this process on a fresh database of its own and without a broker, with no
    correlation run queued by deliveries: runs happen only where the bench calls them."""
    os.environ["DATABASE_URL"] = fresh_database(name)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
    os.environ.setdefault("ROOTLINE_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    import incidents.flow as enqueue

    enqueue.correlation_enqueue_now = lambda keys, paced=True: None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", default="gpu-eu-06")
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--every", type=int, default=10, help="bodies between correlation runs")
    ap.add_argument(
        "--gc", choices=["paused", "on"], default="paused", help="cyclic GC during runs (the app pauses it)"
    )
    ap.add_argument("--db", default="rootline_bench_cluster")
    args = ap.parse_args()

    django_on_fresh_database(args.db)
    from end_to_end import build_storm

    from incidents import services
    from incidents.services.correlation import correlation_run, run
    from incidents.tasks import process_delivery

    if args.gc == "on":
        run.gc_paused = _gc_left_on
    bodies = [
        body
        for body in build_storm(
            rate=args.rate, seconds=args.seconds, clusters=20, body=100, seed=7, t0=time.time()
        )
        if json.loads(body[2])["groupLabels"].get("cluster") == args.cluster
    ]
    integration, _ = services.integration_add(
        kind="alertmanager", name=f"bench-{time.time()}", token=f"t-{time.time()}"
    )
    cpu = wall = 0.0
    runs = 0
    for start in range(0, len(bodies), args.every):
        for _, _, data in bodies[start : start + args.every]:
            receipt = services.delivery_receive(integration=integration, body=data, headers={})
            process_delivery(receipt.body["delivery"])
        c, t = time.process_time(), time.perf_counter()
        correlation_run(key=args.cluster, keep_state=True)
        cpu += time.process_time() - c
        wall += time.perf_counter() - t
        runs += 1
    alerts = sum(n for _, n, _ in bodies)
    print(
        json.dumps(
            {
                "cluster": args.cluster,
                "rate": args.rate,
                "alerts": alerts,
                "bodies": len(bodies),
                "runs": runs,
                "gc": args.gc,
                "runs_cpu_s": round(cpu, 2),
                "runs_wall_s": round(wall, 2),
                "cpu_us_per_alert": round(cpu / alerts * 1e6),
            }
        )
    )
    return 0


def _gc_left_on():
    from contextlib import nullcontext

    return nullcontext()


if __name__ == "__main__":
    raise SystemExit(main())
