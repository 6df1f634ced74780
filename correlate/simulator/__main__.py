"""CLI: `python -m correlate.simulator --list` or `--scenario NAME --start ISO [--seed N] --out DIR`."""

from __future__ import annotations

import argparse
import sys
import time

from . import describe, scenario_names, simulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m correlate.simulator", description=__doc__)
    parser.add_argument("--list", action="store_true", help="name the scenarios and exit")
    parser.add_argument("--scenario", choices=scenario_names(), metavar="NAME")
    parser.add_argument("--start", help="ISO 8601 start, e.g. 2026-03-14T00:00:00Z")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="output directory (created if missing)")
    args = parser.parse_args(argv)
    if args.list:
        for name in scenario_names():
            print(f"{name}\t{describe(name)}")
        return 0
    if not (args.scenario and args.start and args.out):
        parser.error("--scenario, --start and --out are required (or --list)")
    began = time.perf_counter()
    try:
        sizes = simulate(args.scenario, args.start, args.seed, args.out)
    except ValueError as exc:  # an unreadable --start
        parser.error(str(exc))
    took = time.perf_counter() - began
    summary = ", ".join(f"{name} {size} B" for name, size in sizes.items())
    print(f"{args.scenario} seed {args.seed} -> {args.out}: {summary} ({took:.2f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
