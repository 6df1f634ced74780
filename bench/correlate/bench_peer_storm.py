"""A storm of six linked failure modes over the pods of one workload, fed to one Correlator.

Usage: .venv/bin/python bench/correlate/bench_peer_storm.py [--alerts 10000] [--batch 175] [--gap-ms 1.5]
           [--scan-only] [--gc-pause]

The alerts are the peer load generator's (`peer_bench.py am_alert`, every alert new): names
KVCacheFragmentationHigh, GPUMemoryHigh, LLMPodOOMKilled, LLMQueueBacklog, TTFTp95High and
PreemptionStorm in turn, each on a pod of its own in one namespace (pod names `pod-r1-<n>`, so
one workload), `--gap-ms` apart. Six modes that cause one another (fragmentation and OOM before
queueing, queueing before TTFT...) put every alert within everyone's onset slack, so each new
alert may owe an edge to the earlier ones of the modes it can cause. They are fed in order with
`add_many` in slices of `--batch`, as a correlation worker does (no rule URL, as in the run that
found the problem). `--scan-only` times the linking alone (`Correlator._ingest`, as `correlate()`
does), without building and ranking the one big incident after every slice, which grows with
the storm on its own; `--gc-pause` turns the cyclic collector off during each call, as the
correlation worker's runs do (`gc_paused()` in rootline/gc_pause.py): its full collections walk the whole
growing heap, so they grow with the storm too.

Prints one JSON line: CPU in all, and per alert in the first and in the last tenth of the slices
(the last tenth shows whether the cost of a new alert grows with the storm).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from correlate.catalog import load_catalog  # noqa: E402
from correlate.engine import Correlator  # noqa: E402
from correlate.events import FIRING, Alert  # noqa: E402

START = datetime(2026, 11, 29, 12, tzinfo=UTC)
NAMES = [
    "KVCacheFragmentationHigh",
    "GPUMemoryHigh",
    "LLMPodOOMKilled",
    "LLMQueueBacklog",
    "TTFTp95High",
    "PreemptionStorm",
]
SEVERITIES = ["critical", "major", "minor", "warning"]


def storm(count: int, gap_ms: float, run_id: str = "r1") -> list[Alert]:
    """peer_bench.py's am_alert(i, count, run_id) as engine alerts, `gap_ms` apart."""
    alerts = []
    for number in range(count):
        pod = f"pod-{run_id}-{number}"
        name = NAMES[number % len(NAMES)]
        labels = {
            "alertname": name,
            "pod": pod,
            "namespace": "llm-serving",
            "severity": SEVERITIES[number % len(SEVERITIES)],
            "cluster": "testbed",
            "job": "vllm",
            "instance": f"{pod}:8000",
            "bench": run_id,
        }
        annotations = {"summary": f"{name} on {pod}", "description": f"bench alert #{number}"}
        alerts.append(
            Alert(
                f"fp{number}",
                START + timedelta(milliseconds=gap_ms * number),
                labels,
                annotations,
                None,
                FIRING,
                "",
            )
        )
    return alerts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--alerts", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=175)
    parser.add_argument("--gap-ms", type=float, default=1.5)
    parser.add_argument(
        "--scan-only", action="store_true", help="time linking only: no incidents built or ranked"
    )
    parser.add_argument(
        "--gc-pause", action="store_true", help="cyclic GC off during each call, as the worker runs"
    )
    args = parser.parse_args()
    alerts = storm(args.alerts, args.gap_ms)
    correlator = Correlator(load_catalog(use_env=False))
    feed = correlator._ingest if args.scan_only else correlator.add_many
    calls = []
    for start in range(0, len(alerts), args.batch):
        if args.gc_pause:
            gc.disable()
        began = time.process_time()
        feed(alerts[start : start + args.batch])
        calls.append((time.process_time() - began, len(alerts[start : start + args.batch])))
        if args.gc_pause:
            gc.enable()
    tenth = max(1, len(calls) // 10)

    def per_alert(part: list[tuple[float, int]]) -> float:
        return round(sum(cpu for cpu, _ in part) / sum(n for _, n in part) * 1e6, 1)

    incidents = correlator.incidents()
    print(
        json.dumps(
            {
                "alerts": len(alerts),
                "batch": args.batch,
                "gap_ms": args.gap_ms,
                "scan_only": args.scan_only,
                "gc_pause": args.gc_pause,
                "cpu_s": round(sum(cpu for cpu, _ in calls), 2),
                "first_tenth_us_per_alert": per_alert(calls[:tenth]),
                "last_tenth_us_per_alert": per_alert(calls[-tenth:]),
                "incidents": len(incidents),
                "largest": max((len(i.members) for i in incidents), default=0),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
