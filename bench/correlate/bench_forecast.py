"""Time `forecast.predict` and the timeline's "predicted" marks against a year of history.

    .venv/bin/python bench/correlate/bench_forecast.py [--history 5000] [--steps 20] [--repeat 200]

History: `--history` cascades drawn from a few cascade shapes of the catalog's rules (a seeded
random walk down the rules from a deep cause, 3-12 steps each, places from the rules' relations),
as a fleet's year of resolved incidents would hold them. Prints the p50/p95 of one prediction
(the API, the card, a queue row) from a 1-step and from a 5-step incident, and the time to mark a
`--steps`-step cascade's timeline (every step's "was it predicted, since when"): the first time a
shape of cascade is asked for, and again (what history keeps of it: the queue's poll).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from correlate.catalog import ANY_MODE, load_catalog  # noqa: E402
from correlate.forecast import TOP, History, Step, predict, predicted_since  # noqa: E402

PLACES_OF = {"same_pod": "pod", "same_gpu": "pod", "same_group": "pod", "same_node": "node",
             "sibling": "siblings", "gateway": "route", "unplaced": "node"}  # fmt: skip


def walk(catalog, rng: random.Random, length: int) -> list[Step]:
    rules = [r for r in catalog.rules if r.effect != ANY_MODE]
    causes = sorted({r.cause for r in rules})
    mode, place, at = rng.choice(causes), "pod", 0.0
    steps = [Step(catalog.mode_layer(mode), mode, place, at)]
    while len(steps) < length:
        options = [r for r in rules if r.cause == mode] or [r for r in rules if r.cause == rng.choice(causes)]
        if not options:
            continue
        rule = rng.choice(options)
        at += rng.uniform(30, rule.max_lag.total_seconds() / 2)
        mode = rule.effect
        place = PLACES_OF.get(rng.choice(sorted(rule.scope)), place)
        if all(s.key != (mode, place) for s in steps):
            steps.append(Step(catalog.mode_layer(mode), mode, place, at))
    return steps


def timed(call, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    catalog = load_catalog(use_env=False)
    rng = random.Random(7)
    history = History.of((walk(catalog, rng, rng.randint(3, 12)), float(i)) for i in range(args.history))
    first = history.cascades[-1]
    long = walk(catalog, random.Random(11), args.steps)

    def marks() -> None:
        for step in long[1:]:
            before = [s for s in long if s.at < step.at]
            predicted_since(before, step.key, step.at, history, catalog, 0.0)

    def cold(call):
        def run() -> None:
            history.memo.clear()  # a shape of cascade asked for the first time
            call()

        return run

    one = lambda: predict(first[:1], history, catalog, limit=TOP)  # noqa: E731
    five = lambda: predict(first[:5], history, catalog, limit=TOP)  # noqa: E731
    print(json.dumps({
        "history": args.history,
        "predict_1_step_first": timed(cold(one), args.repeat),
        "predict_1_step_again": timed(one, args.repeat),
        "predict_5_steps_first": timed(cold(five), args.repeat),
        f"marks_{len(long)}_steps_first": timed(cold(marks), max(args.repeat // 20, 5)),
        f"marks_{len(long)}_steps_again": timed(marks, max(args.repeat // 20, 5)),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
