"""Score the engine and the window baseline on the independent corpus (corpus/fleets), pooled.

    .venv/bin/python bench/correlate/heldout.py                    # the held-out half
    .venv/bin/python bench/correlate/heldout.py --half tuning      # the half tuning may look at
    .venv/bin/python bench/correlate/heldout.py --half tuning --per-fleet

The corpus was written without the engine (corpus/BRIEF.md). Its fleets are split in two by a
hash of their names (`half_of`), and the split is committed in corpus/split.json, which this
script checks against the rule. Tuning looks at the tuning half only: for the held-out half
this prints pooled figures and nothing per fleet (pairwise F1 over every pair of occurrences of
all its fleets, root top-1 over all its incidents, the same for the window baseline, and on how
many fleets the engine is ahead of the baseline). Each run is appended to
bench/results/heldout.jsonl with the commit it ran on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from correlate.batch import correlate  # noqa: E402
from correlate.catalog import load_catalog  # noqa: E402
from correlate.io import read_alerts  # noqa: E402
from correlate.scoring import (  # noqa: E402
    Grouping,
    grouping_from_document,
    grouping_from_incidents,
    keep_anchor,
    pairwise,
    root_top1,
)

CORPUS = ROOT / "corpus" / "fleets"
SPLIT = ROOT / "corpus" / "split.json"
LOG = ROOT / "bench" / "results" / "heldout.jsonl"
HALVES = ("heldout", "tuning")


def half_of(name: str) -> str:
    """The rule of the split: the parity of the first byte of the name's SHA-256."""
    return "heldout" if hashlib.sha256(name.encode()).digest()[0] % 2 else "tuning"


def fleet_names() -> list[str]:
    return sorted(path.name for path in CORPUS.iterdir() if (path / "truth.json").exists())


def split_by_rule() -> dict[str, list[str]]:
    names = fleet_names()
    return {half: [name for name in names if half_of(name) == half] for half in HALVES}


def committed_split() -> dict[str, list[str]]:
    document = json.loads(SPLIT.read_text())
    return {half: sorted(document[half]) for half in HALVES}


def fleet_files(name: str) -> list[Path]:
    return [
        path for path in (CORPUS / name / "alerts.jsonl", CORPUS / name / "changes.jsonl") if path.exists()
    ]


def tagged_truth(name: str) -> tuple[list[frozenset], list, list[dict]]:
    truth = json.loads((CORPUS / name / "truth.json").read_text())
    grouping = grouping_from_document(truth)
    tag = lambda occurrence: (f"{name}|{occurrence[0]}", occurrence[1])  # noqa: E731
    incidents = [
        {
            "root": {**incident["root"], "fingerprint": f"{name}|{incident['root']['fingerprint']}"},
            "alerts": [
                {**alert, "fingerprint": f"{name}|{alert['fingerprint']}"} for alert in incident["alerts"]
            ],
        }
        for incident in truth["incidents"]
    ]
    return (
        [frozenset(map(tag, group)) for group in grouping.groups],
        [tag(r) if r else None for r in grouping.roots],
        incidents,
    )


def tagged(name: str, grouping: Grouping) -> tuple[list[frozenset], list]:
    tag = lambda occurrence: (f"{name}|{occurrence[0]}", occurrence[1])  # noqa: E731
    return [frozenset(map(tag, group)) for group in grouping.groups], [
        tag(r) if r else None for r in grouping.roots
    ]


def predictions(name: str, catalog) -> dict[str, Grouping]:
    alerts = read_alerts(fleet_files(name))
    return {
        "engine": grouping_from_incidents(correlate(alerts, catalog=catalog)),
        "window": keep_anchor(alerts),
    }


def figures(truth_groups, truth_roots, incidents, predicted_groups, predicted_roots) -> dict[str, float]:
    truth = Grouping(tuple(truth_groups), tuple(truth_roots))
    predicted = Grouping(tuple(predicted_groups), tuple(predicted_roots))
    precision, recall, f1 = pairwise(truth, predicted)
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "top1": round(root_top1({"incidents": incidents}, predicted), 4),
    }


def is_ahead(engine: dict[str, float], window: dict[str, float]) -> bool:
    """No worse on F1 and on root top-1, and better on one of them."""
    no_worse = engine["f1"] >= window["f1"] and engine["top1"] >= window["top1"]
    return no_worse and (engine["f1"], engine["top1"]) != (window["f1"], window["top1"])


def score(names: list[str], catalog, per_fleet: bool) -> dict:
    truth_groups, truth_roots, incidents = [], [], []
    pooled = {method: ([], []) for method in ("engine", "window")}
    ahead = 0
    rows = []
    for name in names:
        groups, roots, fleet_incidents = tagged_truth(name)
        truth_groups += groups
        truth_roots += roots
        incidents += fleet_incidents
        fleet = {}
        for method, grouping in predictions(name, catalog).items():
            method_groups, method_roots = tagged(name, grouping)
            pooled[method][0].extend(method_groups)
            pooled[method][1].extend(method_roots)
            fleet[method] = figures(groups, roots, fleet_incidents, method_groups, method_roots)
        ahead += is_ahead(fleet["engine"], fleet["window"])
        if per_fleet:
            rows.append((name, fleet))
    result = {
        "fleets": len(names),
        "incidents": len(incidents),
        "occurrences": sum(len(g) for g in truth_groups),
        "engine_ahead_on": ahead,
    }
    for method, (groups, roots) in pooled.items():
        result[method] = figures(truth_groups, truth_roots, incidents, groups, roots)
    return {"pooled": result, "rows": rows}


def commit() -> tuple[str, bool]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD"), bool(
        git("status", "--porcelain", "--", "correlate", "corpus")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=(*HALVES, "both"), default="heldout")
    parser.add_argument("--per-fleet", action="store_true", help="figures per fleet (tuning half only)")
    parser.add_argument(
        "--no-log", action="store_true", help="do not append the run to bench/results/heldout.jsonl"
    )
    args = parser.parse_args(argv)
    split = committed_split()
    if split != split_by_rule():
        print(
            "corpus/split.json does not match the rule (half_of) over corpus/fleets: a fleet was added, "
            "removed or renamed; write the split again in a commit of its own",
            file=sys.stderr,
        )
        return 2
    if args.per_fleet and args.half != "tuning":
        print("--per-fleet is for the tuning half only: the held-out half is scored pooled", file=sys.stderr)
        return 2
    catalog = load_catalog()
    head, dirty = commit()
    for half in HALVES if args.half == "both" else (args.half,):
        scored = score(split[half], catalog, args.per_fleet)
        pooled = scored["pooled"]
        for name, fleet in scored["rows"]:
            print(
                f"{name:<52} engine F1 {fleet['engine']['f1']:.3f} top1 {fleet['engine']['top1']:.3f}   "
                f"window F1 {fleet['window']['f1']:.3f} top1 {fleet['window']['top1']:.3f}"
            )
        engine, window = pooled["engine"], pooled["window"]
        print(
            f"{half}: {pooled['fleets']} fleets, {pooled['incidents']} incidents, "
            f"{pooled['occurrences']} occurrences in them"
        )
        print(
            f"  engine  pairwise F1 {engine['f1']:.3f} "
            f"(precision {engine['precision']:.3f}, recall {engine['recall']:.3f}), "
            f"root top-1 {engine['top1']:.3f}"
        )
        print(
            f"  window  pairwise F1 {window['f1']:.3f} "
            f"(precision {window['precision']:.3f}, recall {window['recall']:.3f}), "
            f"root top-1 {window['top1']:.3f}"
        )
        print(
            "  engine ahead of the window (F1 and top-1 no worse, one better) "
            f"on {pooled['engine_ahead_on']} of {pooled['fleets']} fleets"
        )
        if not args.no_log:
            LOG.parent.mkdir(parents=True, exist_ok=True)
            entry = {
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                "commit": head,
                "dirty": dirty,
                "half": half,
                **pooled,
            }
            with LOG.open("a", encoding="utf-8") as log:
                log.write(json.dumps(entry, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
