#!/usr/bin/env python3
"""bench/ingest's storm through the app's correlation, in process: what a correlation worker spends
on one incident that grows to thousands of alerts.

`testbed/peer_bench.py --format am-webhook` sends one cluster ("testbed") of unique pods
cycling through six LLM alert names that the catalog links to each other, so the whole storm is
one incident. Its bodies are received and processed as the ingestion worker would
(`delivery_receive`, `process_delivery`), and every --every alerts the key is correlated as the
correlation worker would (`correlation_run(keep_state=True)`). The default, a run every 175
alerts, is about what runs paced 250 ms apart (the default pace) take at the rate bench/ingest's
bodies of 1 reach (docs/benchmarks.md).

    .venv/bin/python bench/correlate/peer_storm.py                      # 10,000 alerts, a run every 175
    .venv/bin/python bench/correlate/peer_storm.py --alerts 20000 --every 500

Prints one JSON line: the runs' CPU, in all and per alert, and of the first and last tenth of the
runs (a cost that grows with the incident shows as a last tenth dearer than the first). It uses
a fresh PostgreSQL database of its own (--db, dropped and created) on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "correlate"))

from storm_cluster import django_on_fresh_database  # noqa: E402


def peer_bench():
    """testbed/peer_bench.py as a module (its body builder is the one bench/ingest sends)."""
    path = Path(os.environ.get("TESTBED", ROOT / "testbed")) / "peer_bench.py"
    spec = importlib.util.spec_from_file_location("peer_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alerts", type=int, default=10000)
    ap.add_argument("--every", type=int, default=175, help="alerts between correlation runs")
    ap.add_argument(
        "--defer",
        choices=["on", "off"],
        default="on",
        help="rank big incidents every few seconds (on: as a worker with a broker) or on every run",
    )
    ap.add_argument("--db", default="rootline_bench_peer_storm")
    args = ap.parse_args()

    django_on_fresh_database(args.db)
    from django.db.models import Count

    from incidents import services
    from incidents.models import Alert, Incident
    from incidents.services.correlation import correlation_run, run
    from incidents.tasks import process_delivery

    follow_ups: list[float] = []
    run.correlation_enqueue_later = lambda key, seconds: follow_ups.append(seconds)
    run.defers_ranking = lambda: args.defer == "on"  # as a worker with a broker does
    bench = peer_bench()
    run_id = f"{int(time.time()) % 100000:05d}"
    integration, _ = services.integration_add(
        kind="alertmanager", name=f"bench-{run_id}", token=f"t-{run_id}"
    )
    run_cpu: list[float] = []
    for start in range(0, args.alerts, args.every):
        for i in range(start, min(args.alerts, start + args.every)):
            body = json.dumps(bench.am_webhook([i], args.alerts, run_id)).encode()
            receipt = services.delivery_receive(integration=integration, body=body, headers={})
            process_delivery(receipt.body["delivery"])
        began = time.process_time()
        correlation_run(key="testbed", keep_state=True)
        run_cpu.append(time.process_time() - began)
    while follow_ups:  # the run a worker queues for a ranking held back
        time.sleep(follow_ups.pop())
        follow_ups.clear()
        began = time.process_time()
        correlation_run(key="testbed", keep_state=True)
        run_cpu.append(time.process_time() - began)
    tenth = max(1, len(run_cpu) // 10)
    per_run_alerts = args.every
    print(
        json.dumps(
            {
                "alerts": args.alerts,
                "every": args.every,
                "defer": args.defer,
                "runs": len(run_cpu),
                "incidents": Incident.objects.count(),
                "largest": max(
                    Alert.objects.values("incident_id").annotate(n=Count("id")).values_list("n", flat=True),
                    default=0,
                ),
                "runs_cpu_s": round(sum(run_cpu), 2),
                "cpu_us_per_alert": round(sum(run_cpu) / args.alerts * 1e6),
                "first_tenth_us_per_alert": round(sum(run_cpu[:tenth]) / (tenth * per_run_alerts) * 1e6),
                "last_tenth_us_per_alert": round(sum(run_cpu[-tenth:]) / (tenth * per_run_alerts) * 1e6),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
