import json
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from correlate.ingest.common import FieldError, parse_time
from incidents.services.correlation import correlation_rebuild


class Command(BaseCommand):
    help = "Rebuild incidents from stored alerts since a time; human decisions are kept and applied."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", required=True, help="RFC 3339 time, e.g. 2026-11-29T00:00:00Z")

    def handle(self, *args, since: str, **options) -> None:
        try:
            moment: datetime | None = parse_time(since, "--since")
        except FieldError as exc:
            raise CommandError(str(exc)) from None
        if moment is None:
            raise CommandError("--since: zero time")
        self.stdout.write(json.dumps(correlation_rebuild(since=moment)))
