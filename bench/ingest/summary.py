#!/usr/bin/env python3
"""Markdown table from bench/ingest/run.sh's results.jsonl (stdlib only)."""

from __future__ import annotations

import json
import sys

NAMES = {
    "rootline_am_webhook_batch1": ("Rootline `POST /hooks/alertmanager/<id>/`", "1"),
    "rootline_am_webhook_batch100": ("Rootline `POST /hooks/alertmanager/<id>/`", "100"),
    "alerta_alert_api": ("alerta 9.1 `POST /alert`, all new", "1"),
    "alerta_alert_api_dedup50": ("alerta 9.1 `POST /alert`, 50 identities (dedup)", "1"),
    "alerta_am_webhook_batch1": ("alerta 9.1 `POST /webhooks/prometheus`", "1"),
    "alerta_am_webhook_batch10": ("alerta 9.1 `POST /webhooks/prometheus`", "10"),
    "am_api_batch100": ("Alertmanager 0.25 `POST /api/v2/alerts` (in memory)", "100"),
    "am_api_batch100_big": ("Alertmanager 0.25 `POST /api/v2/alerts` (in memory)", "100"),
    "am_api_batch1": ("Alertmanager 0.25 `POST /api/v2/alerts` (in memory)", "1"),
}


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.strip().startswith("{")]
    drains = {r["label"]: r for r in rows if r.get("mode") == "drain"}
    print(
        "| target | alerts/body | alerts sent | accepted alerts/s | req/s | p50 ms | p99 ms | max ms "
        "| all processed after | processed alerts/s | statuses |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r.get("mode") == "http":
            name, batch = NAMES.get(r["label"], (r["label"], str(r["batch"])))
            d = drains.get(r["label"] + "_processed")
            done = (
                f"{d['since_load_start_s']:.1f} s" + ("" if d["complete"] else " (INCOMPLETE)")
                if d
                else "n/a"
            )
            rate = f"{d['processed_alerts_per_s']:,.0f}" if d else "n/a"
            lat = r["lat_ms"]
            print(
                f"| {name} | {batch} | {r['ok_alerts']:,} | **{r['alerts_per_s']:,.0f}** "
                f"| {r['requests_per_s']:,.0f} | "
                f"{lat['p50']:.1f} | {lat['p99']:.1f} | {lat['max']:.0f} | {done} | {rate} | {r['status']} |"
            )
    for r in rows:
        if r.get("mode") == "pg":
            idx = "indexed" if r["indexes"] else "no indexes"
            cells = ", ".join(
                f"{m} {r[m]['rows_per_s']:,.0f} rows/s"
                for m in ("copy", "executemany", "row_commit")
                if m in r
            )
            print(
                f"| PostgreSQL 15 raw, {idx} ({r['rows']:,} rows) | - | {r['rows']:,} | {cells} "
                "| | | | | | | |"
            )
    for r in rows:
        if r.get("mode") == "config":
            print(
                f"\nRootline config: gunicorn {r['web_workers']} workers x {r['web_threads']} threads, "
                f"ingest worker concurrency {r['worker_concurrency']}, {r['c']} senders, "
                f"started {r['started']}."
            )
        if r.get("mode") == "cpu":
            print(f"CPU seconds during {r['label']} ({r['wall_s']} s wall): {r['cpu_s']}")
        if r.get("mode") == "calibration":
            print(
                "Machine speed before the load (bench/calibrate.py): "
                f"10M-addition Python loop {r['python_loop_10m_s']} s CPU, "
                f"load average {r['load_average']}."
            )
    for r in rows:
        if r.get("mode") == "check":
            print(
                f"\nRootline check: {r['alerts']:,} alert rows, "
                f"{r['distinct_occurrences']:,} distinct (fingerprint, starts_at), "
                f"{r['deliveries']:,} deliveries, {r['not_processed']} not processed."
            )


if __name__ == "__main__":
    main(sys.argv[1])
