"""One tuning fleet, alert by alert: which truth incident each occurrence belongs to and which
engine incident holds it, with its layer, failure mode, scope and onset, and each incident's root.

    .venv/bin/python bench/correlate/explain_fleet.py FLEET

Refuses held-out fleets: tuning looks at the tuning half only (corpus/split.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench" / "correlate"))

from heldout import CORPUS, committed_split, fleet_files  # noqa: E402

from correlate.batch import correlate  # noqa: E402
from correlate.catalog import load_catalog  # noqa: E402
from correlate.classify import classify  # noqa: E402
from correlate.io import read_alerts  # noqa: E402
from correlate.scoring import occurrence  # noqa: E402


def main(name: str) -> None:
    if name not in committed_split()["tuning"]:
        raise SystemExit(f"{name}: not a tuning fleet (the held-out half is scored pooled only)")
    truth = json.loads((CORPUS / name / "truth.json").read_text())
    place: dict[str, str] = {}
    roots = set()
    for number, incident in enumerate(truth["incidents"]):
        for alert in incident["alerts"]:
            place[occurrence(alert["fingerprint"], alert["starts_at"])] = f"T{number}"
        root = incident["root"]
        roots.add(occurrence(root["fingerprint"], root["starts_at"]))
    alerts = read_alerts(fleet_files(name))
    catalog = load_catalog()
    incidents = correlate(alerts, catalog=catalog)
    held = {}
    for number, incident in enumerate(incidents):
        for member in incident.members:
            held[member.key] = (f"E{number}", incident.root.alert_key if incident.root else None)
    for alert in sorted(alerts, key=lambda a: a.starts_at):
        engine, engine_root = held.get(alert.key, ("-", None))
        mine = occurrence(alert.fingerprint, alert.starts_at)
        kind = classify(alert, catalog)
        labels = {k: v for k, v in alert.labels.items() if k not in ("alertname", "severity", "prometheus")}
        mark = ("T*" if mine in roots else "  ") + ("E*" if alert.key == engine_root else "  ")
        print(
            f"{alert.starts_at:%H:%M:%S} {place.get(mine, 'noise'):5} {engine:4} {mark} "
            f"{alert.alertname[:34]:34} {kind.layer or '-':9} {kind.failure_mode or '-':16} "
            f"{json.dumps(labels)[:150]}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
