"""A digest of everything the engine answers on fixed inputs: run it before and after an engine
change that must not change any outcome, and compare the lines.

Usage: .venv/bin/python bench/correlate/digest.py [--quick]

Inputs (all fixed seeds): every simulator scenario for seeds 201-203 (batch, one by one in
arrival order, and one by one in a shuffled order), bench_engine.py's stream of 20,000 alerts
(batch in one and in two processes, and one by one in arrival order, with the incidents each add
returns), and two clusters of end_to_end.py's storm fed in batches of 100 (the incidents every
`add_many` returns). Each
incident is hashed with its id, members (key, layer, mode, classified_by, onset, end, flag),
edges, chain, root candidates with confidence and explanation, start, end and `ranked`.
Prints one line per input and a TOTAL; `--quick` skips the stream and the storm.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "correlate"))

from correlate.batch import correlate  # noqa: E402
from correlate.catalog import load_catalog  # noqa: E402
from correlate.engine import Correlator  # noqa: E402
from correlate.io import read_alerts  # noqa: E402

SEEDS = (201, 202, 203)


def incident_text(incident) -> str:
    members = [
        (
            m.key,
            m.layer,
            m.failure_mode,
            m.classified_by,
            m.onset.isoformat(),
            m.ends_at.isoformat() if m.ends_at else "",
            m.false_positive,
        )
        for m in incident.members
    ]
    edges = [(e.cause, e.effect, e.rule, round(e.lag_seconds, 6), e.relation) for e in incident.edges]
    roots = [(c.alert_key, round(c.confidence, 6), c.explanation) for c in incident.root_candidates]
    return repr(
        (
            incident.id,
            members,
            edges,
            list(incident.chain),
            roots,
            incident.started_at.isoformat(),
            incident.ended_at.isoformat() if incident.ended_at else "",
            incident.ranked,
        )
    )


def digest(texts) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def fed(alerts, catalog, batch: int = 1) -> list[str]:
    """Incidents every call returns, then the final incidents."""
    correlator = Correlator(catalog)
    out = []
    for start in range(0, len(alerts), batch):
        out.extend(incident_text(i) for i in correlator.add_many(alerts[start : start + batch]))
    out.append("--final--")
    out.extend(incident_text(i) for i in correlator.incidents())
    return out


def simulator_lines(catalog) -> list[tuple[str, str]]:
    names = [
        line.split("\t")[0].split()[0]
        for line in subprocess.run(
            [sys.executable, "-m", "correlate.simulator", "--list"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        if line.strip()
    ]
    lines = []
    with tempfile.TemporaryDirectory(prefix="rootline-digest-") as scratch:
        for seed in SEEDS:
            texts = []
            for name in names:
                out = Path(scratch) / f"{name}-{seed}"
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "correlate.simulator",
                        "--scenario",
                        name,
                        "--start",
                        "2026-03-14T00:00:00Z",
                        "--seed",
                        str(seed),
                        "--out",
                        str(out),
                    ],
                    cwd=ROOT,
                    capture_output=True,
                    check=True,
                )
                alerts = read_alerts([out / "alerts.jsonl", out / "changes.jsonl"])
                texts.append(f"== {name}")
                texts.extend(incident_text(i) for i in correlate(alerts, catalog=catalog))
                texts.extend(fed(alerts, catalog))
                shuffled = alerts[:]
                random.Random(seed).shuffle(shuffled)
                texts.extend(fed(shuffled, catalog))
            lines.append((f"simulator seed {seed} ({len(names)} scenarios)", digest(texts)))
    return lines


def stream_lines(catalog) -> list[tuple[str, str]]:
    from bench_engine import stream

    alerts = [a for _, a in stream(20_000, 20, 24, 7)]
    return [
        ("stream 20k batch", digest(incident_text(i) for i in correlate(alerts, catalog=catalog))),
        (
            "stream 20k batch over 2 processes (= batch)",
            digest(incident_text(i) for i in correlate(alerts, catalog=catalog, processes=2)),
        ),
        ("stream 20k one by one", digest(fed(alerts, catalog))),
    ]


def storm_lines(catalog) -> list[tuple[str, str]]:
    from bench_storm import T0, engine_alerts
    from end_to_end import build_storm

    bodies = build_storm(rate=5000, seconds=25, clusters=20, body=100, seed=7, t0=T0)
    clusters: dict[str, list] = {}
    for _, _, raw in bodies:
        for alert in engine_alerts(json.loads(raw)):
            clusters.setdefault(alert.labels.get("cluster", ""), []).append(alert)
    lines = []
    for name in sorted(clusters)[:2]:
        lines.append((f"storm {name} batches of 100", digest(fed(clusters[name], catalog, batch=100))))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    catalog = load_catalog(use_env=False)
    lines = simulator_lines(catalog)
    if not args.quick:
        lines += stream_lines(catalog) + storm_lines(catalog)
    for name, value in lines:
        print(f"{value}  {name}")
    print(f"{digest(value for _, value in lines)}  TOTAL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
