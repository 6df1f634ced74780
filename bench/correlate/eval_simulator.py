"""Quality of the engine against the simulator's truth, next to the two anchor methods.

Usage: .venv/bin/python bench/correlate/eval_simulator.py --seeds 101,102,103 [--scenarios a,b] [--verbose]

Runs every scenario (or those named) for each seed into a scratch folder, scores the engine,
Alertmanager-style grouping and Keep-style 15-minute windows, and prints per-run rows plus
pooled figures: pairwise F1 over all runs' pairs, root top-1 over all true incidents.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from correlate.batch import correlate  # noqa: E402
from correlate.catalog import load_catalog  # noqa: E402
from correlate.io import read_alerts  # noqa: E402
from correlate.scoring import (  # noqa: E402
    Grouping,
    alertmanager_anchor,
    grouping_from_document,
    grouping_from_incidents,
    keep_anchor,
    pairwise,
    root_top1,
)

START = "2026-03-14T00:00:00Z"


def scenarios() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "correlate.simulator", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split("\t")[0].split()[0] for line in out.splitlines() if line.strip()]


def simulate(name: str, seed: int, folder: Path) -> Path:
    out = folder / f"{name}-{seed}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "correlate.simulator",
            "--scenario",
            name,
            "--start",
            START,
            "--seed",
            str(seed),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    return out


def tagged(grouping: Grouping, tag: str) -> Grouping:
    def retag(o):
        return (f"{tag}/{o[0]}", o[1]) if o else o

    return Grouping(
        tuple(frozenset(retag(o) for o in g) for g in grouping.groups),
        tuple(retag(r) for r in grouping.roots),
    )


def tagged_truth(doc: dict, tag: str) -> dict:
    def retag(o):
        return {**o, "fingerprint": f"{tag}/{o['fingerprint']}"}

    return {
        "incidents": [
            {
                **i,
                "root": retag(i["root"]) if i.get("root") else None,
                "alerts": [retag(a) for a in i["alerts"]],
            }
            for i in doc.get("incidents", [])
        ],
        "noise": [retag(n) for n in doc.get("noise", [])],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="101,102,103")
    parser.add_argument("--scenarios", default="")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    catalog = load_catalog(use_env=False)
    names = [n for n in args.scenarios.split(",") if n] or scenarios()
    seeds = [int(s) for s in args.seeds.split(",")]
    pooled: dict[str, list[Grouping]] = {"engine": [], "alertmanager": [], "keep-15m": []}
    truths: list[dict] = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="rootline-eval-") as scratch:
        for seed in seeds:
            for name in names:
                folder = simulate(name, seed, Path(scratch))
                truth = json.loads((folder / "truth.json").read_text())
                alerts = read_alerts([folder / "alerts.jsonl", folder / "changes.jsonl"])
                tag = f"{name}-{seed}"
                methods = {
                    "engine": grouping_from_incidents(correlate(alerts, catalog=catalog)),
                    "alertmanager": alertmanager_anchor(alerts),
                    "keep-15m": keep_anchor(alerts),
                }
                truth_grouping = grouping_from_document(truth)
                row = {"run": tag, "alerts": len(alerts), "incidents": len(truth.get("incidents", []))}
                for method, grouping in methods.items():
                    row[f"{method}_f1"] = round(pairwise(truth_grouping, grouping)[2], 3)
                    row[f"{method}_top1"] = round(root_top1(truth, grouping), 3)
                    pooled[method].append(tagged(grouping, tag))
                truths.append(tagged_truth(truth, tag))
                rows.append(row)
                if args.verbose:
                    print(json.dumps(row))
    all_truth = {
        "incidents": [i for t in truths for i in t["incidents"]],
        "noise": [n for t in truths for n in t["noise"]],
    }
    truth_grouping = grouping_from_document(all_truth)
    summary = {"seeds": seeds, "runs": len(rows), "true_incidents": len(all_truth["incidents"])}
    for method, groupings in pooled.items():
        merged = Grouping(
            tuple(g for gr in groupings for g in gr.groups), tuple(r for gr in groupings for r in gr.roots)
        )
        precision, recall, f1 = pairwise(truth_grouping, merged)
        summary[method] = {
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "pairwise_f1": round(f1, 3),
            "root_top1": round(root_top1(all_truth, merged), 3),
            "mean_run_f1": round(sum(r[f"{method}_f1"] for r in rows) / len(rows), 3),
        }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
