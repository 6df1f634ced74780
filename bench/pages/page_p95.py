#!/usr/bin/env python3
"""The triage queue's and incident pages' server time, p50 / p95 / max, against DATABASE_URL.

The issue's target: under 100 ms p95 with 100,000 incidents and 1,000,000 alerts in PostgreSQL
(`seed_history.py` writes that database):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootline_bench_pages \\
        .venv/bin/python bench/pages/page_p95.py [--repeat 30] [--warmup 2] [--json] [PATH ...]

Without paths: `/`, `/?status=all`, `/?status=resolved`, and three incident pages picked by SQL:
the newest open incident of 3-15 alerts (what the on-call opens), the incident with the most
alerts (a storm's), and a resolved one from the middle of the history. Each path is requested
--warmup times untimed, then --repeat times, through Django's test client as a signed-in
responder (`pagetimer`, as `time_pages.py`): the middleware, the view, its queries and its
template, no HTTP server, with the loaded app frozen out of the collector's way as
`rootline/wsgi.py` does in a web process. Prints per path p50, p95 (nearest rank), max in ms and
the queries of one request; `--json` appends the run to bench/results/pages.jsonl, with
`bench/calibrate.py`'s figure for the machine's speed at the time (this machine's varies from
run to run). Exits 1 if a page does not answer 200.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
LOG = ROOT / "bench" / "results" / "pages.jsonl"
TARGET_MS = 100.0

PICKS = {
    "ordinary": """
        SELECT i.id FROM incidents_incident i
        WHERE i.status <> 'resolved' AND i.merged_into_id IS NULL
          AND (SELECT count(*) FROM incidents_alert a WHERE a.incident_id = i.id) BETWEEN 3 AND 15
        ORDER BY i.started_at DESC LIMIT 1""",
    "storm": """
        SELECT incident_id FROM incidents_alert WHERE incident_id IS NOT NULL
        GROUP BY incident_id ORDER BY count(*) DESC LIMIT 1""",
    "resolved": """
        SELECT id FROM incidents_incident WHERE status = 'resolved' AND merged_into_id IS NULL
        ORDER BY started_at OFFSET (SELECT count(*) / 2 FROM incidents_incident WHERE status = 'resolved')
        LIMIT 1""",
}


def default_paths(cursor) -> list[str]:
    paths = ["/", "/?status=all", "/?status=resolved"]
    for sql in PICKS.values():
        cursor.execute(sql)
        row = cursor.fetchone()
        if row:
            paths.append(f"/incidents/{row[0]}/")
    return paths


def nearest_rank(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def commit() -> tuple[str, bool]:
    """HEAD and whether the code the pages run differs from it (bench/ is not that code)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD"), bool(
        git("status", "--porcelain", "--", "incidents", "rootline", "templates", "correlate")
    )


def history_size(cursor) -> dict[str, int]:
    # The planner's row estimates: exact counts of a million rows would cost a scan per run.
    cursor.execute(
        "SELECT relname, reltuples::bigint FROM pg_class "
        "WHERE relname IN ('incidents_incident', 'incidents_alert')"
    )
    return {name.removeprefix("incidents_") + "s": count for name, count in cursor.fetchall()}


def responder_client():
    from django.contrib.auth.models import Group, User
    from django.test import Client

    user, _ = User.objects.get_or_create(username="pagetimer")
    user.groups.add(Group.objects.get_or_create(name="responder")[0])
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    return client


def time_path(client, path: str, repeat: int, warmup: int) -> dict:
    """One path's figures; `status` is the first answer that was not a 200, if any was."""
    from django.db import connection

    statuses = {client.get(path).status_code for _ in range(warmup)}
    times: list[float] = []
    queries = 0

    def count(execute, sql, params, many, context):
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        for _ in range(repeat):
            queries = 0
            began = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - began) * 1000)
            statuses.add(response.status_code)
    return {
        "path": path,
        "status": max(statuses, key=lambda code: (code != 200, code)),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(nearest_rank(times, 0.95), 1),
        "max_ms": round(max(times), 1),
        "queries": queries,
        "kb": round(len(response.content) / 1024),
    }


def print_row(row: dict) -> None:
    mark = "" if row["p95_ms"] < TARGET_MS else "  over 100 ms"
    print(
        f"{row['path']:<24} {row['status']:>6} {row['p50_ms']:>8} {row['p95_ms']:>8} {row['max_ms']:>8} "
        f"{row['queries']:>8} {row['kb']:>7}{mark}"
    )


def log_run(rows: list[dict], size: dict[str, int], repeat: int) -> None:
    from django.db import connection

    from bench.calibrate import loop_seconds

    head, dirty = commit()
    entry = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": head,
        "dirty": dirty,
        "database": connection.settings_dict["NAME"],
        **size,
        "repeat": repeat,
        "python_loop_10m_s": round(min(loop_seconds() for _ in range(3)), 3),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "pages": rows,
    }
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry, sort_keys=True) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="*", help="default: the queue's tabs and three incident pages")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="append the run to bench/results/pages.jsonl")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        print("DATABASE_URL must name the PostgreSQL database seed_history.py wrote", file=sys.stderr)
        return 2
    client = responder_client()
    gc.freeze()
    with connection.cursor() as cursor:
        paths = args.paths or default_paths(cursor)
        size = history_size(cursor)
    print(f"{'path':<24} {'status':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'queries':>8} {'KB':>7}")
    rows = []
    for path in paths:
        rows.append(time_path(client, path, args.repeat, args.warmup))
        print_row(rows[-1])
    if args.json:
        log_run(rows, size, args.repeat)
    return 0 if all(row["status"] == 200 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
