#!/usr/bin/env python3
"""Timeline and root-cause matrix rebuilt from stored evidence: 50 series over 2 h at 15 s
(481 points each, noisy around their band lines), 12 alerts, a change and 20 human actions.

    .venv/bin/python bench/evidence/rebuild.py [--series 50] [--runs 30]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootline .venv/bin/python bench/evidence/rebuild.py

A throwaway test database is created (SQLite in memory, or `test_<name>` on DATABASE_URL's
server) and destroyed at the end. Timed, per run (median and p95 over --runs after one warm-up):
- `load`: the rows read and the points unpacked (`incident_evidence`, crossings included);
- `crossings`: band crossings of all series alone (pure, on the loaded series);
- `timeline` / `matrix`: the pure builders alone;
- `rebuild`: load + timeline + matrix, as the evidence page does;
- `api_timeline` / `api_matrix`: `GET /api/v1/incidents/ID/timeline/` and `/matrix/` through
  Django's test client (authentication, DRF, JSON included).
One JSON line on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
os.environ.setdefault("ROOTLINE_SECRET_KEY", "bench")
START = datetime(2026, 3, 14, 0, 0, tzinfo=UTC)
SIGNALS = [
    ("framebuffer_ratio", 0.62, 0.985),
    ("kv_fragmentation", 0.10, 0.47),
    ("queue_wait", 0.05, 0.6),
    ("ttft_p99", 0.8, 4.0),
    ("restarts", 0, 3),
]


def noisy_series(rng: random.Random, low: float, high: float, points: int) -> list[tuple[float, float]]:
    """Flat, a ramp through the band lines from the middle of the window, noise of 3% of the span."""
    span = high - low
    out = []
    for i in range(points):
        shape = 0.0 if i < points // 3 else min(1.0, (i - points // 3) / (points // 4))
        out.append((START.timestamp() + 15 * i, low + span * shape + rng.gauss(0, span * 0.03)))
    return out


def build(series_count: int):
    from django.contrib.auth.models import User

    from incidents import services
    from incidents.evidence.points import pack_points
    from incidents.models import Alert, EvidenceSeries, Incident, IncidentAction

    def evidence_row(signal: str, labels: dict, points: list[tuple[float, float]]) -> EvidenceSeries:
        moments = [datetime.fromtimestamp(points[i][0], tz=UTC) for i in (0, -1)]
        return EvidenceSeries(
            incident=incident,
            signal=signal,
            query=signal,
            labels=labels,
            labels_key=hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest(),
            step_seconds=15,
            start=moments[0],
            end=moments[1],
            points=pack_points(points),
            point_count=len(points),
            source=EvidenceSeries.Source.IMPORT,
            fetched_at=moments[1],
        )

    rng = random.Random(5)
    integration, _ = services.integration_add(kind="alertmanager", name="bench", token="bench-token")
    user = User.objects.create_user("bench")
    incident = Incident.objects.create(
        title="bench",
        correlation_key="bench",
        started_at=START + timedelta(minutes=45),
        last_alert_at=START + timedelta(minutes=100),
    )
    alerts = [
        Alert(
            fingerprint=f"fp{i}",
            starts_at=START + timedelta(minutes=45 + 5 * i),
            ends_at=START + timedelta(minutes=100),
            status="resolved",
            alertname=name,
            labels={"alertname": name, "pod": f"pod-{i}", "cluster": "bench"},
            annotations={"summary": name},
            integration=integration,
            received_at=START,
            correlation_key="bench",
            incident=incident,
            layer=layer,
            failure_mode=mode,
        )
        for i, (name, layer, mode) in enumerate(
            [("KvCacheFragmented", "engine", "kv_fragmentation")]
            + [("LLMPodOOMKilled", "platform", "oom")] * 6
            + [("QueueHigh", "engine", "queueing")] * 4
            + [("TTFTHigh", "serving", "slo_ttft")]
        )
    ]
    alerts.append(
        Alert(
            fingerprint="change",
            starts_at=START + timedelta(minutes=10),
            ends_at=START + timedelta(minutes=10),
            status="resolved",
            kind="change",
            alertname="KvCacheFragmented",
            labels={"change_type": "threshold_edit", "reviewed": "false"},
            annotations={"summary": "raise KvCacheFragmented threshold"},
            integration=integration,
            received_at=START,
            correlation_key="bench",
            layer="process",
            failure_mode="change",
        )
    )
    Alert.objects.bulk_create(alerts)
    first = Alert.objects.get(fingerprint="fp0")
    actions = [
        IncidentAction(
            incident=incident,
            action="note",
            by=user,
            at=START + timedelta(minutes=46 + i),
            body={"text": f"note {i}"},
        )
        for i in range(18)
    ]
    actions += [
        IncidentAction(
            incident=incident,
            action="false_positive",
            by=user,
            at=START + timedelta(minutes=47),
            alert=first,
            body={"alert_id": first.pk},
        ),
        IncidentAction(
            incident=incident,
            action="degrade",
            by=user,
            at=START + timedelta(minutes=75),
            body={"level": "L3"},
        ),
    ]
    IncidentAction.objects.bulk_create(actions)
    rows = []
    for n in range(series_count):
        signal, low, high = SIGNALS[n % len(SIGNALS)]
        rows.append(
            evidence_row(signal, {"pod": f"pod-{n}", "cluster": "bench"}, noisy_series(rng, low, high, 481))
        )
    EvidenceSeries.objects.bulk_create(rows)
    return incident, User.objects.create_superuser("bench-admin")


def timed(fn, runs: int) -> dict[str, float]:
    fn()
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[min(len(samples) - 1, math.ceil(0.95 * len(samples)) - 1)], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=50)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from correlate.matrix import suggest_matrix
    from correlate.series import all_crossings
    from correlate.timeline import build_timeline
    from incidents.catalog import catalog
    from incidents.timeline import incident_evidence

    setup_test_environment()
    settings.ALLOWED_HOSTS = ["testserver"]
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        incident, admin = build(args.series)
        evidence = incident_evidence(incident)
        bands = catalog().bands
        client = Client()
        client.force_login(admin)

        def rebuild():
            loaded = incident_evidence(incident)
            loaded.timeline()
            loaded.suggested_matrix()

        def api(path: str):
            response = client.get(f"/api/v1/incidents/{incident.pk}/{path}/")
            assert response.status_code == 200, response.content[:200]

        result = {
            "vendor": connection.vendor,
            "series": len(evidence.series),
            "points": sum(len(s.points) for s in evidence.series),
            "crossings_found": len(evidence.crossings),
            "timeline_items": len(evidence.timeline()),
            "load": timed(lambda: incident_evidence(incident), args.runs),
            "crossings": timed(lambda: all_crossings(evidence.series, bands), args.runs),
            "timeline": timed(
                lambda: build_timeline(
                    alerts=evidence.alerts,
                    crossings=evidence.crossings,
                    actions=evidence.actions,
                    bands=bands,
                ),
                args.runs,
            ),
            "matrix": timed(
                lambda: suggest_matrix(
                    alerts=evidence.alerts,
                    crossings=evidence.crossings,
                    actions=evidence.actions,
                    catalog=catalog(),
                    root_alert_id=None,
                ),
                args.runs,
            ),
            "rebuild": timed(rebuild, args.runs),
            "api_timeline": timed(lambda: api("timeline"), args.runs),
            "api_matrix": timed(lambda: api("matrix"), args.runs),
        }
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
