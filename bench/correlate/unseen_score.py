"""Score the engine on the hand-written held-out fleets (tests/correlate/unseen).

Usage: .venv/bin/python bench/correlate/unseen_score.py [--only fleets|fleets2] [--explain NAME] [--json]

Prints, per scenario, the four checks of tests/correlate/test_unseen_fleets.py (each drawn incident
is one engine incident, noise stays out, the drawn root ranks first, the scorer gives 1.0/1.0),
then the pooled pairwise F1 and root top-1 over the chosen scenarios: all their truth incidents
and noise as one truth, all engine incidents as one grouping (scenario names keep occurrences of
different scenarios apart). `--explain NAME` prints what the engine did with one scenario: each
incident's members (tag, layer, failure mode, classified_by, scope) and its root candidates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "correlate"))

from unseen import SCENARIOS  # noqa: E402
from unseen.fleets2 import SECOND_SET  # noqa: E402

from correlate.batch import correlate  # noqa: E402
from correlate.catalog import load_catalog  # noqa: E402
from correlate.scoring import (  # noqa: E402
    Grouping,
    alertmanager_anchor,
    grouping_from_document,
    grouping_from_incidents,
    keep_anchor,
    pairwise,
    root_top1,
    score,
)


def checks(scenario, incidents) -> dict[str, bool]:
    tag_of = {(fp, starts): tag for tag, (fp, starts) in scenario.tags.items()}
    where, roots = {}, []
    for i, incident in enumerate(incidents):
        for member in incident.members:
            where[tag_of[(member.fingerprint, member.starts_at)]] = i
        root = incident.member(incident.root.alert_key) if incident.root else None
        roots.append(tag_of[(root.fingerprint, root.starts_at)] if root else None)
    grouping = all(
        len({where.get(t, ("alone", t)) for t in members}) == 1
        and {t for t, i in where.items() if i == where.get(next(iter(members)))} == members
        for _, members in scenario.incidents
    )
    noise = all(
        tag not in where or not {t for t, i in where.items() if i == where[tag] and t != tag}
        for tag in scenario.noise
    )
    root = all(root in where and roots[where[root]] == root for root, _ in scenario.incidents)
    result = score("engine", scenario.truth, grouping_from_incidents(incidents))
    return {
        "grouping": grouping,
        "noise": noise,
        "root": root,
        "scorer": (result.f1, result.root_top1) == (1.0, 1.0),
        "f1": round(result.f1, 3),
        "top1": round(result.root_top1, 3),
    }


def pooled(names, catalog, method: str = "engine") -> tuple[float, float, float, float]:
    truth_groups, truth_roots, pred_groups, pred_roots, incidents_doc = [], [], [], [], []
    for name in names:
        scenario = SCENARIOS[name]()
        tagged = lambda occ, n=name: (n + "|" + occ[0], occ[1])  # noqa: E731
        t = grouping_from_document(scenario.truth)
        truth_groups += [frozenset(map(tagged, g)) for g in t.groups]
        truth_roots += [tagged(r) if r else None for r in t.roots]
        if method == "engine":
            p = grouping_from_incidents(correlate(list(scenario.alerts), catalog=catalog))
        else:  # the scorer's anchors, over the deduplicated occurrences
            seen = {a.key: a for a in scenario.alerts}
            p = (alertmanager_anchor if method == "alertmanager" else keep_anchor)(list(seen.values()))
        pred_groups += [frozenset(map(tagged, g)) for g in p.groups]
        pred_roots += [tagged(r) if r else None for r in p.roots]
        for incident in scenario.truth["incidents"]:
            incidents_doc.append(
                {
                    "root": {**incident["root"], "fingerprint": name + "|" + incident["root"]["fingerprint"]},
                    "alerts": [
                        {**a, "fingerprint": name + "|" + a["fingerprint"]} for a in incident["alerts"]
                    ],
                }
            )
    truth = Grouping(tuple(truth_groups), tuple(truth_roots))
    predicted = Grouping(tuple(pred_groups), tuple(pred_roots))
    precision, recall, f1 = pairwise(truth, predicted)
    return precision, recall, f1, root_top1({"incidents": incidents_doc}, predicted)


def explain(name, catalog) -> None:
    scenario = SCENARIOS[name]()
    tag_of = {(fp, starts): tag for tag, (fp, starts) in scenario.tags.items()}
    print(f"== {name}")
    print("truth:", [(root, sorted(m)) for root, m in scenario.incidents], "noise:", sorted(scenario.noise))
    for i, incident in enumerate(correlate(list(scenario.alerts), catalog=catalog)):
        by_key = {m.key: tag_of[(m.fingerprint, m.starts_at)] for m in incident.members}
        print(f"-- incident {i}: root={by_key.get(incident.root.alert_key) if incident.root else None}")
        for m in sorted(incident.members, key=lambda m: m.onset):
            scope = {k: v for k, v in m.scope.as_dict().items() if k != "cluster"}
            if m.scope.gateway_keys:
                scope["gw"] = ",".join(sorted(m.scope.gateway_keys))
            print(
                f"   {by_key[m.key]:<14} {m.starts_at:%H:%M} onset {m.onset:%H:%M} {m.alertname[:36]:<36} "
                f"{m.layer}/{m.failure_mode} by {m.classified_by} {scope}"
            )
        for e in incident.edges:
            print(
                f"   edge {by_key[e.cause]} -> {by_key[e.effect]} {e.rule} "
                f"lag {e.lag_seconds:.0f}s {e.relation}"
            )
        for c in incident.root_candidates:
            print(f"   candidate {by_key[c.alert_key]} {c.confidence:.2f} {c.explanation[:160]}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("fleets", "fleets2"))
    parser.add_argument("--explain")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    catalog = load_catalog(use_env=False)
    if args.explain:
        explain(args.explain, catalog)
        return 0
    names = sorted(n for n in SCENARIOS if args.only is None or (args.only == "fleets2") == (n in SECOND_SET))
    rows = {n: checks(SCENARIOS[n](), correlate(list(SCENARIOS[n]().alerts), catalog=catalog)) for n in names}
    precision, recall, f1, top1 = pooled(names, catalog)
    if args.json:
        print(
            json.dumps(
                {
                    "scenarios": rows,
                    "pooled": {"precision": precision, "recall": recall, "f1": f1, "root_top1": top1},
                }
            )
        )
        return 0
    mark = {True: "pass", False: "FAIL"}
    print(f"{'scenario':<46} grouping noise root scorer   f1    top1")
    for n, r in rows.items():
        print(
            f"{n:<46} {mark[r['grouping']]:<8} {mark[r['noise']]:<5} {mark[r['root']]:<4} "
            f"{mark[r['scorer']]:<6} {r['f1']:5.3f} {r['top1']:5.3f}"
        )
    print(
        f"pooled over {len(names)} scenarios: precision {precision:.3f} recall {recall:.3f} "
        f"pairwise F1 {f1:.3f} root top-1 {top1:.3f}"
    )
    for anchor in ("alertmanager", "keep"):
        precision, recall, f1, top1 = pooled(names, catalog, anchor)
        print(
            f"  anchor {anchor:<12} precision {precision:.3f} recall {recall:.3f} "
            f"pairwise F1 {f1:.3f} root top-1 {top1:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
