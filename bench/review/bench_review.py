#!/usr/bin/env python3
"""The weekly review's server time over a year of history, p50 / p95 / max of warm requests.

The issue's target: a week's review with a year of history (about 5,000 incidents and 500,000
alerts in PostgreSQL) in under 500 ms server time, p95 of 20 warm requests:

    .venv/bin/python bench/pages/seed_history.py --database rootline_bench_review \\
        --incidents 5000 --alerts 500000 --open 30
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootline_bench_review \\
        .venv/bin/python bench/review/bench_review.py [--repeat 20] [--warmup 2] [--json]

Three cases, each `GET /api/v1/review/?week=W` through Django's test client as a signed-in
viewer (as `bench/pages/page_p95.py`: middleware, view, queries, serialisation; no HTTP server):
1. `cold`: the last complete week with nothing frozen: the week and its eight trend weeks all
   computed from the rows (the worst case, a Rootline whose beat never ran);
2. `open`: the open week with the weeks before it frozen, as beat leaves them (what a reviewer
   opening the page mid-week asks for);
3. `frozen`: the last complete week, frozen.
Freezing here runs `review_freeze` for the nine weeks before now (it deletes earlier freezes of
this database first). Without PROMETHEUS_URL, objectives read the local store (empty here): the
time of Prometheus' answers is not in these figures. `--json` appends the run to
bench/results/review.jsonl.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "pages"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
LOG = ROOT / "bench" / "results" / "review.jsonl"
TARGET_MS = 500.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.utils import timezone
    from page_p95 import responder_client, time_path

    from incidents.models import Alert, Incident, ReviewWeek
    from incidents.review.weeks import Week
    from incidents.services.review import review_freeze

    if connection.vendor != "postgresql":
        print("DATABASE_URL must name the PostgreSQL database seed_history.py wrote", file=sys.stderr)
        return 2
    now = timezone.now()
    closed = Week.last_complete(now)
    client = responder_client()
    gc.freeze()
    size = {"incidents": Incident.objects.count(), "alerts": Alert.objects.count()}
    week_incidents = Incident.objects.filter(started_at__gte=closed.start, started_at__lt=closed.end).count()
    print(
        f"history: {size['incidents']:,} incidents, {size['alerts']:,} alerts; "
        f"{closed}: {week_incidents} incidents"
    )
    print(f"{'path':<40} {'status':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'queries':>8} {'KB':>7}")
    rows = []
    ReviewWeek.objects.all().delete()
    rows.append(
        {**time_path(client, f"/api/v1/review/?week={closed}", args.repeat, args.warmup), "case": "cold"}
    )
    print_row(rows[-1])
    for week in [*closed.before(8), closed]:
        review_freeze(week=week, now=now)
    rows.append(
        {
            **time_path(client, f"/api/v1/review/?week={Week.of(now)}", args.repeat, args.warmup),
            "case": "open",
        }
    )
    print_row(rows[-1])
    rows.append(
        {**time_path(client, f"/api/v1/review/?week={closed}", args.repeat, args.warmup), "case": "frozen"}
    )
    print_row(rows[-1])
    if args.json:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
        with LOG.open("a") as handle:
            handle.write(json.dumps({"at": datetime.now(UTC).isoformat(timespec="seconds"), "commit": commit,
                                     "size": size, "week_incidents": week_incidents, "target_ms": TARGET_MS,
                                     "rows": rows}) + "\n")  # fmt: skip
    return 0 if all(row["status"] == 200 for row in rows) else 1


def print_row(row: dict) -> None:
    mark = "" if row["p95_ms"] < TARGET_MS else f"  over {TARGET_MS:g} ms"
    print(
        f"{row['case'] + ' ' + row['path']:<40} {row['status']:>6} {row['p50_ms']:>8} {row['p95_ms']:>8} "
        f"{row['max_ms']:>8} {row['queries']:>8} {row['kb']:>7}{mark}"
    )


if __name__ == "__main__":
    sys.exit(main())
