"""`rules export --dir DIR`: the Prometheus rules pack with this deployment's thresholds;
`rules runbooks --dir DIR`: the pack's runbook pages (docs/runbooks/ is such an export)."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from correlate.catalog import CatalogError, load_catalog
from incidents.runbooks import PackError, export_pack, export_runbooks


class Command(BaseCommand):
    help = "Export the Prometheus rules pack (one rule file per source) or its runbooks."

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export", help="write the rule files, thresholds from the catalog bands")
        export.add_argument("--dir", required=True, help="directory to write the rule files into")
        export.add_argument(
            "--base-url", default=None, help="base of runbook_url (default: ROOTLINE_BASE_URL)"
        )
        export.add_argument("--catalog", default=None, help="a team catalog file (default: ROOTLINE_CATALOG)")
        runbooks = sub.add_parser("runbooks", help="write one Markdown runbook per alert")
        runbooks.add_argument("--dir", required=True)

    def handle(self, *args, action: str, **options) -> None:
        directory = Path(options["dir"])
        try:
            if action == "export":
                catalog = load_catalog(options["catalog"] or settings.CATALOG_PATH, use_env=False)
                written = export_pack(
                    directory, catalog=catalog, base_url=options["base_url"] or settings.BASE_URL
                )
            else:
                written = export_runbooks(directory, catalog=load_catalog(use_env=False))
        except (CatalogError, PackError, OSError) as exc:
            raise CommandError(str(exc)) from None
        for path in written:
            self.stdout.write(str(path))
