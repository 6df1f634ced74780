"""`manage.py simulate`: the interface to the pure scenario simulator in correlate.simulator."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from correlate import simulator


class Command(BaseCommand):
    help = "List the scenarios, or write a scenario's alerts, changes, actions, metrics and truth files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--list", action="store_true", help="name the scenarios and exit")
        parser.add_argument("--scenario", help="scenario name (see --list)")
        parser.add_argument("--start", help="ISO 8601 start, e.g. 2026-03-14T00:00:00Z")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--out", help="output directory (created if missing)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            for name in simulator.scenario_names():
                self.stdout.write(f"{name}\t{simulator.describe(name)}")
            return
        scenario, start, out = options["scenario"], options["start"], options["out"]
        if not (scenario and start and out):
            raise CommandError("--scenario, --start and --out are required (or --list)")
        if scenario not in simulator.scenario_names():
            raise CommandError(
                f"unknown scenario {scenario!r}; known: {', '.join(simulator.scenario_names())}"
            )
        try:
            sizes = simulator.simulate(str(scenario), str(start), int(options["seed"]), str(out))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:  # --out names a file, or a folder it may not write to
            raise CommandError(f"--out {out}: {exc.strerror or exc}") from None
        for name, size in sizes.items():
            self.stdout.write(f"{out}/{name}\t{size}")
