"""The March incident replayed from the simulator's files alone, as an operator would."""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import defaultdict
from datetime import UTC
from pathlib import Path

from django.core.management import call_command, get_commands

from correlate import simulator
from incidents.evidence.points import pack_points
from incidents.models import Alert, Delivery, EvidenceSeries, Incident
from incidents.services.correlation import correlation_run
from incidents.tasks import process_delivery


def simulate(folder: Path, seed: int) -> Path:
    simulator.simulate("march-oom", "2026-03-14T00:00:00Z", seed, str(folder))
    return folder


def metrics_importable() -> bool:
    try:
        from incidents.services.evidence import evidence_collect  # noqa: F401
    except ImportError:
        return False
    return "import_metrics" in get_commands()


def replay(folder: Path, make_integration, capture, *, metrics: bool) -> Incident:
    """import_alerts (alerts, then changes), the deliveries processed as the worker would,
    correlation, import_actions; with `metrics`, import_metrics and evidence collection."""
    alerts_hook, changes_hook = make_integration("alertmanager"), make_integration("events")
    out = io.StringIO()
    with capture(execute=False):
        call_command(
            "import_alerts", str(folder / "alerts.jsonl"), "--integration", str(alerts_hook.pk), stdout=out
        )
        call_command(
            "import_alerts", str(folder / "changes.jsonl"), "--integration", str(changes_hook.pk), stdout=out
        )
    with capture(execute=False):
        for delivery in Delivery.objects.filter(status="pending").order_by("pk"):
            process_delivery(delivery.pk)
        for key in sorted(
            set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True))
        ):
            correlation_run(key=key)
        call_command("import_actions", str(folder / "actions.jsonl"), stdout=out, stderr=out)
    incident = Alert.objects.filter(alertname__icontains="oom").exclude(incident=None).first().incident
    while incident.merged_into_id:
        incident = incident.merged_into
    if metrics:
        from incidents.services.evidence import evidence_collect

        call_command("import_metrics", str(folder / "metrics.om"), stdout=out)
        with capture(execute=False):
            evidence_collect(incident_id=incident.pk)
    return Incident.objects.get(pk=incident.pk)


SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)\s+(?P<ts>\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
KEEP = ("pod", "gpu", "Hostname", "namespace", "cluster")


def read_om(path: Path, names: set[str]) -> dict[tuple[str, tuple], list[tuple[float, float]]]:
    series: dict[tuple[str, tuple], list[tuple[float, float]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        match = SAMPLE.match(line)
        if not match or match["name"] not in names:
            continue
        labels = dict(LABEL.findall(match["labels"]))
        key = tuple((k, labels[k]) for k in KEEP if k in labels)
        series[(match["name"], key)].append((float(match["ts"]), float(match["value"])))
    return series


def store_evidence_from_om(incident: Incident, path: Path) -> int:
    """What evidence collection would keep, made directly from the file (so these tests do not
    depend on the collector): the framebuffer ratio per GPU and the fragmentation ratio per pod."""
    raw = read_om(path, {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "llm_kv_cache_fragmentation_ratio"})
    rows = []
    for (name, key), points in raw.items():
        if name == "DCGM_FI_DEV_FB_USED":
            free = dict(raw.get(("DCGM_FI_DEV_FB_FREE", key), []))
            points = [(t, used / (used + free[t])) for t, used in points if t in free and used + free[t] > 0]
            signal, query = (
                "framebuffer_ratio",
                "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
            )
        elif name == "llm_kv_cache_fragmentation_ratio":
            signal, query = "kv_fragmentation", name
        else:
            continue
        rows.append(evidence_row(incident, signal, query, dict(key), sorted(points)))
    EvidenceSeries.objects.bulk_create(rows)
    return len(rows)


def evidence_row(
    incident: Incident,
    signal: str,
    query: str,
    labels: dict,
    points: list[tuple[float, float]],
    step: float = 15.0,
) -> EvidenceSeries:
    from datetime import datetime

    return EvidenceSeries(
        incident=incident,
        signal=signal,
        query=query,
        labels=labels,
        labels_key=hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest(),
        step_seconds=step,
        start=datetime.fromtimestamp(points[0][0], tz=UTC),
        end=datetime.fromtimestamp(points[-1][0], tz=UTC),
        points=pack_points(points),
        point_count=len(points),
        source=EvidenceSeries.Source.IMPORT,
        fetched_at=datetime.fromtimestamp(points[-1][0], tz=UTC),
    )
