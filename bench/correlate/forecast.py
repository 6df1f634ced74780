"""Score "what usually comes next" (correlate/forecast.py) by replaying the independent corpus.

    .venv/bin/python bench/correlate/forecast.py                 # the held-out half
    .venv/bin/python bench/correlate/forecast.py --half tuning   # the half tuning may look at
    .venv/bin/python bench/correlate/forecast.py --half tuning --history-from heldout

The fleets of a half are replayed in the order they began (correlate/forecast_replay.py): each
prediction is made only from the alerts that had fired before it and from the incidents that had
ended by then. Prints how many next effects came, the share that were among the top 3
predictions (exactly: layer, failure mode and place; and by failure mode alone), the median
lead of the hits, and where the predictions came from. `--history-from` replays the other half
first, as the earlier history of a team that had used Rootline before. Each run is appended to
bench/results/forecast.jsonl with the commit it ran on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "correlate"))

from heldout import HALVES, commit, committed_split, fleet_files, split_by_rule  # noqa: E402

from correlate.catalog import load_catalog  # noqa: E402
from correlate.forecast_replay import Fleet, replay  # noqa: E402
from correlate.io import read_alerts  # noqa: E402

LOG = ROOT / "bench" / "results" / "forecast.jsonl"


def fleets(names: list[str]) -> list[Fleet]:
    return [Fleet(name, read_alerts(fleet_files(name))) for name in names]


def summary(effects, per_fleet: bool) -> dict:
    hits = [e for e in effects if e.hit]
    result = {
        "effects": len(effects),
        "top3": round(len(hits) / len(effects), 3) if effects else None,
        "top3_by_mode": round(sum(e.mode_hit for e in effects) / len(effects), 3) if effects else None,
        "median_lead_s": round(statistics.median(e.lead for e in hits), 1) if hits else None,
        "sources": dict(Counter(e.source for e in effects)),
        "from_history_top3": _share([e for e in effects if e.source == "history"]),
        "from_rules_top3": _share([e for e in effects if e.source == "rules"]),
    }
    if per_fleet:
        result["missed"] = [
            f"{e.fleet}: {e.alertname} {':'.join(e.key)} ({e.source}, {e.similar} similar)"
            for e in effects
            if not e.hit
        ]
    return result


def _share(effects) -> float | None:
    return round(sum(e.hit for e in effects) / len(effects), 3) if effects else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=HALVES, default="heldout")
    parser.add_argument("--history-from", choices=HALVES, help="replay this half first, as earlier history")
    parser.add_argument("--misses", action="store_true", help="list the misses (tuning half only)")
    parser.add_argument("--no-log", action="store_true")
    args = parser.parse_args(argv)
    split = committed_split()
    if split != split_by_rule():
        print("corpus/split.json does not match the rule over corpus/fleets", file=sys.stderr)
        return 2
    if args.misses and args.half != "tuning":
        print("--misses is for the tuning half only: the held-out half is scored pooled", file=sys.stderr)
        return 2
    catalog = load_catalog()
    scored = fleets(split[args.half])
    earlier = fleets(split[args.history_from]) if args.history_from else []
    if earlier:
        # The earlier half's fleets end before the scored half's begin: shift them a year back.
        for fleet in earlier:
            fleet.alerts = [_year_back(alert) for alert in fleet.alerts]
    effects = [e for e in replay(earlier + scored, catalog) if e.fleet in set(split[args.half])]
    result = summary(effects, args.misses)
    print(json.dumps(result, indent=2))
    if not args.no_log:
        head, dirty = commit()
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with LOG.open("a") as log:
            row = {k: v for k, v in result.items() if k != "missed"}
            log.write(json.dumps({"at": datetime.now(UTC).isoformat(timespec="seconds"), "commit": head,
                                  "dirty": dirty, "half": args.half, "history_from": args.history_from,
                                  **row}) + "\n")  # fmt: skip
    return 0


def _year_back(alert):
    import dataclasses
    from datetime import timedelta

    shift = timedelta(days=366)
    return dataclasses.replace(
        alert,
        starts_at=alert.starts_at - shift,
        ends_at=alert.ends_at - shift if alert.ends_at else None,
    )


if __name__ == "__main__":
    sys.exit(main())
