#!/usr/bin/env python3
"""Time a postmortem's draft for a big incident: 1,000 alerts, 50 evidence series, its actions.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootline_bench_postmortem \\
        .venv/bin/python bench/postmortem/bench_draft.py [--alerts 1000] [--series 50] [--repeat 5]

Recreates the database named by DATABASE_URL (PostgreSQL) and migrates it, stores one resolved
incident of `--alerts` alerts on 20 pods of one deployment, `--series` evidence series of 240
points around it and a few actions, then drafts its postmortem `--repeat` times (each a fresh
draft: the facts are gathered, the figures computed against the local store, every section
filled), and prints the best and median seconds. Target: under 1 s. Without PROMETHEUS_URL the
figures read the local store (empty here), so each metric figure costs its lookups and ends "not
available"; with PROMETHEUS_URL they cost Prometheus' answers on top.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")


def recreate(url: str) -> None:
    name = urlparse(url).path.lstrip("/")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    for sql in (f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'):
        subprocess.run(["psql", admin, "-qc", sql], check=True, capture_output=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)


SIGNALS = ("kv_fragmentation", "framebuffer_ratio", "ttft_p99", "queue_depth")


def seed(alerts: int, series: int) -> int:
    from incidents.evidence.points import pack_points
    from incidents.models import Alert, EvidenceSeries, Incident, IncidentAction, Integration

    onset = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    integration = Integration.objects.create(kind="alertmanager", name="bench", token_digest="x" * 64)
    incident = Incident.objects.create(
        title="KVCacheFragmentationHigh → LLMContainerOOMKilled on vllm-llama", severity="critical",
        status="resolved", started_at=onset, resolved_at=onset + timedelta(hours=1),
        scope={"cluster": "prod", "namespace": "llm", "deployment": "vllm-llama", "model": "llama-3-70b"},
        layers=["engine", "platform"], failure_modes=["kv_fragmentation", "oom"],
        correlation_key="prod",
    )  # fmt: skip
    names = [
        ("KVCacheFragmentationHigh", "engine", "kv_fragmentation"),
        ("LLMContainerOOMKilled", "platform", "oom"),
        ("KubePodCrashLooping", "platform", "restart"),
        ("VLLMRequestQueueHigh", "engine", "queueing"),
    ]
    rows = []
    for i in range(alerts):
        name, layer, mode = names[i % len(names)]
        pod = f"vllm-llama-7d9f8b6c4-{i % 20:05d}"
        at = onset + timedelta(seconds=3 * i)
        rows.append(Alert(
            fingerprint=f"{i:016x}", starts_at=at, ends_at=at + timedelta(minutes=20), status="resolved",
            kind="alert", alertname=name, labels={"alertname": name, "cluster": "prod", "namespace": "llm",
            "pod": pod, "model_name": "llama-3-70b", "severity": "critical"},
            annotations={"summary": f"{name} on {pod}"}, received_at=at, layer=layer, failure_mode=mode,
            integration=integration, classified_by="name", correlated=True, correlation_key="prod", onset=at,
            incident=incident,
        ))  # fmt: skip
    stored = Alert.objects.bulk_create(rows, batch_size=1000)
    incident.chain = [row.pk for row in stored[:: max(1, alerts // 200)]]
    incident.root_alert = stored[0]
    incident.root_explanation = "fragmentation rooted the OOMs"
    incident.save()
    start = onset - timedelta(minutes=30)
    EvidenceSeries.objects.bulk_create(
        EvidenceSeries(
            incident=incident, signal=SIGNALS[i % len(SIGNALS)],
            query=f"q{i}", labels={"pod": f"vllm-llama-7d9f8b6c4-{i:05d}"}, labels_key=f"{i:064x}",
            step_seconds=30, start=start, end=start + timedelta(hours=2),
            points=pack_points((start.timestamp() + 30 * k, 0.1 + (k % 50) / 60) for k in range(240)),
            point_count=240, source="import", fetched_at=onset,
        )
        for i in range(series)
    )  # fmt: skip
    for k, action in enumerate(("acknowledge", "note", "degrade", "mitigate", "resolve")):
        at = onset + timedelta(minutes=5 * k + 1)
        body = {"text": "checking"} if action == "note" else {}
        IncidentAction.objects.create(incident=incident, action=action, at=at, body=body)
    return incident.pk


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--alerts", type=int, default=1000)
    parser.add_argument("--series", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        raise SystemExit("DATABASE_URL must name a PostgreSQL database this bench may recreate")
    recreate(url)
    import django

    django.setup()
    from incidents.models import Incident
    from incidents.postmortems.draft import draft_sections, gather_facts

    incident_id = seed(args.alerts, args.series)
    timings = []
    for _ in range(args.repeat + 1):
        incident = Incident.objects.select_related("root_alert").get(pk=incident_id)
        began = time.perf_counter()
        sections = draft_sections(gather_facts([incident]))
        timings.append(time.perf_counter() - began)
    timings = timings[1:]  # the first pays for imports and caches
    print(json.dumps({
        "alerts": args.alerts, "series": args.series, "sections": len(sections),
        "draft_s_best": round(min(timings), 3), "draft_s_median": round(statistics.median(timings), 3),
        "target_s": 1.0,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
