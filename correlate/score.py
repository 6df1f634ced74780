"""`python -m correlate.score TRUTH ALERTS [--changes C] [--pred PRED]`: engine vs the anchors.

Without --pred the engine is run on ALERTS (and the changes); with it, the given prediction
(in truth.json's shape, as `python -m correlate` prints) is scored instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.io import read_alerts
from correlate.scoring import (
    alertmanager_anchor,
    format_table,
    grouping_from_document,
    grouping_from_incidents,
    keep_anchor,
    score,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m correlate.score", description=__doc__.splitlines()[0])
    parser.add_argument("truth")
    parser.add_argument("alerts")
    parser.add_argument("--changes", action="append", default=[])
    parser.add_argument("--pred", help="a prediction in truth.json's shape instead of running the engine")
    parser.add_argument("--catalog")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    with open(args.truth, encoding="utf-8") as handle:
        truth = json.load(handle)
    alerts = read_alerts([args.alerts, *args.changes])
    if args.pred:
        with open(args.pred, encoding="utf-8") as handle:
            predicted = grouping_from_document(json.load(handle))
    else:
        predicted = grouping_from_incidents(correlate(alerts, catalog=load_catalog(args.catalog)))
    scores = [
        score("engine", truth, predicted),
        score("alertmanager", truth, alertmanager_anchor(alerts)),
        score("keep-15m", truth, keep_anchor(alerts)),
    ]
    if args.json:
        json.dump([s.__dict__ for s in scores], sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_table(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
