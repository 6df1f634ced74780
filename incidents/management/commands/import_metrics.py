"""`manage.py import_metrics FILE.om`: OpenMetrics history into the local series store."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from incidents.evidence.local import OpenMetricsError
from incidents.flow import evidence_enqueue
from incidents.services.evidence import incidents_overlapping
from incidents.services.local_series import local_series_import


class Command(BaseCommand):
    help = (
        "Store an OpenMetrics file (timestamps in seconds, ending with # EOF, as promtool backfills) in the "
        "local series store that evidence reads when Prometheus is unset or lacks the series. "
        "Importing the same file twice changes nothing. Prints one JSON line."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="an OpenMetrics file, e.g. metrics.om from `simulate`")

    def handle(self, *args, path: str, **options) -> None:
        try:
            result = local_series_import(path=path)
        except FileNotFoundError:
            raise CommandError(f"{path}: no such file") from None
        except (OpenMetricsError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from None
        except OSError as exc:  # a directory, no permission
            raise CommandError(f"{path}: cannot read: {exc.strerror or exc}") from None
        refreshed = []
        if result.created or result.updated:
            # Alerts may have been imported first: their incidents' evidence can now be filled in.
            refreshed = incidents_overlapping(result.start, result.end)
            evidence_enqueue(refreshed)
        self.stdout.write(json.dumps({**result.as_dict(), "incidents_refreshed": len(refreshed)}))
