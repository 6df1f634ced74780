#!/usr/bin/env python3
"""A database with a long history of alerts, to time pages against (`time_pages.py`).

    .venv/bin/python bench/pages/grow_history.py [--source rootline_bench_e2e] [--target rootline_history]
        [--copies 9] [--no-vacuum]

Copies the source database (by default the storm `bench/correlate/end_to_end.py` leaves behind:
125,066 firing alerts in 839 incidents) and adds `--copies` resolved copies of every alert, each
copy moved back by a day (its own `starts_at`, so the occurrences stay unique), correlated and in
the same incident: 9 copies give 1.25 million alerts, 1.125 million of them resolved, as a
fleet's alerts pile up over months. Then `VACUUM ANALYZE`, as autovacuum would have done by then
(`--no-vacuum` leaves the tables without statistics and visibility map, as this machine's
PostgreSQL, which runs without autovacuum, leaves every table).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

COLUMNS = (
    "fingerprint, starts_at, ends_at, status, kind, alertname, labels, annotations, generator_url, "
    "received_at, layer, failure_mode, false_positive, first_delivery_id, integration_id, classified_by, "
    "correlated, correlation_key, onset, incident_id"
)
COPIES_SQL = f"""
INSERT INTO incidents_alert ({COLUMNS})
SELECT fingerprint, starts_at - make_interval(days => g),
       starts_at - make_interval(days => g) + interval '10 minutes',
       'resolved', kind, alertname, labels, annotations, generator_url,
       received_at - make_interval(days => g), layer,
       failure_mode, false_positive, first_delivery_id, integration_id, classified_by, true, correlation_key,
       onset - make_interval(days => g), incident_id
FROM incidents_alert, generate_series(1, %(copies)d) g
"""


def psql(sql: str, database: str = "postgres") -> str:
    return subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            database,
            "-XAtq",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", default="rootline_bench_e2e")
    parser.add_argument("--target", default="rootline_history")
    parser.add_argument("--copies", type=int, default=9)
    parser.add_argument("--no-vacuum", action="store_true")
    args = parser.parse_args()
    began = time.monotonic()
    psql(f"DROP DATABASE IF EXISTS {args.target} WITH (FORCE)")
    psql(f"CREATE DATABASE {args.target} TEMPLATE {args.source}")
    psql(COPIES_SQL % {"copies": args.copies}, args.target)
    if not args.no_vacuum:
        psql("VACUUM ANALYZE incidents_alert", args.target)
    counts = psql(
        "SELECT status, count(*) FROM incidents_alert GROUP BY status ORDER BY status", args.target
    ).replace("\n", ", ")
    print(f"{args.target}: {counts} ({time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
