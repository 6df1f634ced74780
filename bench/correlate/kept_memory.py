#!/usr/bin/env python3
"""What a correlation worker's kept state costs an alert: bytes of Python heap (tracemalloc) and of
resident memory, split between the stored rows it holds and the engine, for alerts of
bench/drills/load.py's shape (cascades over pods, one cluster). ROOTLINE_CORRELATION_KEPT_ALERTS
is set from this figure.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootline_bench \
        bench/correlate/kept_memory.py --alerts 20000

The database is emptied first: give it one of its own (createdb; the script migrates it).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "drills"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
os.environ.pop("CELERY_BROKER_URL", None)  # eager: nothing is queued, the probe runs correlation itself


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def per_alert(sizes: dict[str, int], held: int) -> dict[str, int]:
    return {name: round(size / max(held, 1)) for name, size in sizes.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alerts", type=int, default=20_000)
    parser.add_argument("--per-body", type=int, default=100)
    parser.add_argument(
        "--rate", type=float, default=500, help="alerts/s of the whole drill (the cluster gets 1/8)"
    )
    parser.add_argument("--profile", metavar="PATH", help="no tracemalloc; cProfile the run into PATH")
    args = parser.parse_args(argv)

    import django

    django.setup()
    import load  # bench/drills/load.py: the drills' bodies
    from django.core.management import call_command
    from django.utils import timezone

    from correlate.ingest import alertmanager
    from incidents.models import Alert, Delivery
    from incidents.services.alerts import alerts_upsert
    from incidents.services.correlation import run as correlation
    from incidents.services.correlation.state import KEPT
    from incidents.services.integrations import integration_add

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    integration, _ = integration_add(kind="alertmanager", name="kept-memory")
    # bench/drills/load.py's pace: this cluster's bodies come every CLUSTERS x per-body / rate s
    started_at = time.time() - args.alerts / args.rate * load.CLUSTERS
    every = load.CLUSTERS * args.per_body / args.rate
    bodies = args.alerts // args.per_body
    for number in range(bodies):  # stored as a drain stores them; correlated below, in one run
        story, step = divmod(number, len(load.POD_NAMES))
        # stories 0, 8, 16, ...: every body in cluster gpu-load-0, one correlation key
        number_in_cluster = story * load.CLUSTERS * len(load.POD_NAMES) + step
        body = load.body_of(number_in_cluster, args.per_body, "m", started_at + number * every)
        delivery = Delivery.objects.create(
            integration=integration, body=body, status="processed", received_at=timezone.now()
        )
        parsed = alertmanager.parse(body, None).alerts
        alerts_upsert(integration=integration, delivery=delivery, parsed=parsed)
    key = Alert.objects.values_list("correlation_key", flat=True).first()
    stored = Alert.objects.filter(correlation_key=key).count()

    gc.collect()
    if args.profile:
        import cProfile

        started = time.perf_counter()
        cProfile.runctx(
            "correlation.correlation_run(key=key, keep_state=True)", globals(), locals(), args.profile
        )
        print(json.dumps({"alerts_stored": stored, "run_s": round(time.perf_counter() - started, 2)}))
        return 0
    tracemalloc.start(1)
    before_heap, before_rss = tracemalloc.get_traced_memory()[0], resident_bytes()
    started = time.perf_counter()
    correlation.correlation_run(key=key, keep_state=True)
    seconds = time.perf_counter() - started
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    heap, rss = tracemalloc.get_traced_memory()[0] - before_heap, resident_bytes() - before_rss
    state = KEPT.take(key)
    held = len(state.rows) if state else 0
    by_file: dict[str, int] = {}
    for stat in snapshot.statistics("filename"):
        name = stat.traceback[0].filename
        short = name.split("site-packages/")[-1] if "site-packages" in name else os.path.relpath(name, ROOT)
        by_file[short] = by_file.get(short, 0) + stat.size
    top = dict(sorted(by_file.items(), key=lambda item: -item[1])[:12])
    lines = {
        f"{os.path.relpath(stat.traceback[0].filename, ROOT)}:{stat.traceback[0].lineno}": stat.size
        for stat in snapshot.statistics("lineno")[:12]
    }
    print(
        json.dumps(
            {
                "alerts_stored": stored,
                "alerts_held": held,
                "window_run_s": round(seconds, 2),
                "heap_bytes_per_alert": round(heap / max(held, 1)),
                "resident_bytes_per_alert": round(rss / max(held, 1)),
                "heap_by_file_bytes_per_alert": per_alert(top, held),
                "heap_by_line_bytes_per_alert": per_alert(lines, held),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
