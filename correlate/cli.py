"""`python -m correlate ALERTS.jsonl [--changes CHANGES.jsonl]`: the engine on webhook bodies.

Prints incidents in truth.json's shape (occurrences named by fingerprint and startsAt) plus
each incident's root candidates, so a run can be scored against a simulator's truth directly.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from correlate.batch import correlate, usable_processes
from correlate.catalog import load_catalog
from correlate.engine import Correlator
from correlate.io import read_alerts
from correlate.results import Incident, Member


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _occurrence(member: Member) -> dict[str, str]:
    return {"fingerprint": member.fingerprint, "starts_at": iso(member.starts_at)}


def incident_document(incident: Incident) -> dict[str, Any]:
    by_key = {m.key: m for m in incident.members}
    root = by_key[incident.root.alert_key] if incident.root else incident.members[0]
    return {
        "id": incident.id,
        "root": _occurrence(root),
        "alerts": [_occurrence(m) for m in incident.members],
        "root_candidates": [
            {
                **_occurrence(by_key[c.alert_key]),
                "alertname": by_key[c.alert_key].alertname,
                "confidence": c.confidence,
                "explanation": c.explanation,
            }
            for c in incident.root_candidates
        ],
        "chain": [
            {
                **_occurrence(by_key[k]),
                "alertname": by_key[k].alertname,
                "layer": by_key[k].layer,
                "failure_mode": by_key[k].failure_mode,
            }
            for k in incident.chain
        ],
        "edges": [
            {
                "cause": _occurrence(by_key[e.cause]),
                "effect": _occurrence(by_key[e.effect]),
                "rule": e.rule,
                "lag_seconds": e.lag_seconds,
                "relation": e.relation,
            }
            for e in incident.edges
        ],
    }


def report(incidents: Sequence[Incident]) -> dict[str, Any]:
    return {"incidents": [incident_document(i) for i in incidents], "noise": []}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m correlate", description=__doc__.splitlines()[0])
    parser.add_argument("alerts", help="JSONL of Alertmanager v4 (or Grafana) webhook bodies, one per line")
    parser.add_argument(
        "--changes", action="append", default=[], help="JSONL of PagerDuty Change Events bodies"
    )
    parser.add_argument(
        "--catalog", help="a team catalog YAML extending the packaged one (besides ROOTLINE_CATALOG)"
    )
    parser.add_argument("--incremental", action="store_true", help="feed alerts one by one in file order")
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="batch: share clusters among this many processes (default: one per CPU; 1: this one only)",
    )
    parser.add_argument("--indent", type=int, default=None)
    args = parser.parse_args(argv)
    catalog = load_catalog(args.catalog)
    alerts = read_alerts([args.alerts, *args.changes])
    if args.incremental:
        correlator = Correlator(catalog)
        for alert in alerts:
            correlator.add(alert)
        incidents = correlator.incidents()
    else:
        incidents = correlate(alerts, catalog=catalog, processes=usable_processes(args.processes))
    json.dump(report(incidents), sys.stdout, indent=args.indent)
    sys.stdout.write("\n")
    return 0
