"""One alert over every pod of a big workload at once: the engine fed in batches, as a worker is.

Usage: .venv/bin/python bench/correlate/bench_same_name.py [--name GPUMemoryHigh] [--alerts 3000]
           [--batch 100] [--nodes] [--seconds 60]

A fleet-wide symptom (every replica's GPU memory high, every target down when a scrape breaks)
puts thousands of alerts of one failure mode into one workload's bucket within a minute. Each
alert's pod is its own; `--nodes` gives each pod one of 40 nodes, so same-node rules have pairs
to look at. Prints one JSON line: CPU in all, per alert, and the first and last `add_many` call
(the last one shows how the cost per alert grows with the storm).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from correlate.catalog import load_catalog  # noqa: E402
from correlate.engine import Correlator  # noqa: E402
from correlate.events import FIRING, Alert  # noqa: E402
from correlate.testing import label_fingerprint  # noqa: E402

START = datetime(2026, 3, 14, 12, tzinfo=UTC)


def storm(name: str, count: int, seconds: float, nodes: bool) -> list[Alert]:
    rng = random.Random(7)
    alerts = []
    for number in range(count):
        labels = {
            "alertname": name,
            "cluster": "c1",
            "namespace": "llm-serving",
            "pod": f"vllm-llama-70b-7d9f8b6c5d-{number:05d}",
            "model_name": "llama-70b",
        }
        if nodes:
            labels["node"] = f"gpu-node-{number % 40}"
        at = START + timedelta(seconds=rng.uniform(0, seconds))
        alerts.append(Alert(label_fingerprint(labels), at, labels, {}, None, FIRING, ""))
    alerts.sort(key=lambda alert: alert.starts_at)
    return alerts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="GPUMemoryHigh")
    parser.add_argument("--alerts", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--nodes", action="store_true")
    args = parser.parse_args()
    alerts = storm(args.name, args.alerts, args.seconds, args.nodes)
    correlator = Correlator(load_catalog(use_env=False))
    calls = []
    for start in range(0, len(alerts), args.batch):
        began = time.process_time()
        correlator.add_many(alerts[start : start + args.batch])
        calls.append(time.process_time() - began)
    incidents = correlator.incidents()
    print(
        json.dumps(
            {
                "name": args.name,
                "alerts": len(alerts),
                "batch": args.batch,
                "nodes": args.nodes,
                "incidents": len(incidents),
                "largest": max(len(incident.members) for incident in incidents),
                "cpu_s": round(sum(calls), 2),
                "us_per_alert": round(sum(calls) / len(alerts) * 1e6),
                "first_call_ms": round(calls[0] * 1000, 1),
                "last_call_ms": round(calls[-1] * 1000, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
