"""`manage.py prune [--dry-run]`: retention at once, to the end (docs/retention.md); what beat's daily
`incidents.prune` does in bounded runs."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from incidents.services.retention import retention_prune


class Command(BaseCommand):
    help = (
        "Empty delivery bodies older than ROOTLINE_RETAIN_BODIES_DAYS and delete resolved alerts in no "
        "incident older than ROOTLINE_RETAIN_ALERTS_DAYS that nothing refers to (their counts rolled up)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")

    def handle(self, *args, **options) -> None:
        report = retention_prune(dry_run=options["dry_run"])
        for line in report.lines():
            self.stdout.write(line)
