import json

from django.core.management.base import BaseCommand, CommandError

from incidents import services
from incidents.models import Integration


class Command(BaseCommand):
    help = (
        "Manage webhook integrations. `integration add` prints {id, kind, name, url, token} as one JSON "
        "line; `integration rotate ID` gives one a new token and prints {id, url, token}."
    )

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="create an integration and print its URL and token")
        add.add_argument("--kind", required=True, choices=Integration.Kind.values)
        add.add_argument("--name", required=True)
        add.add_argument("--token", help="use this token instead of a generated one")
        add.add_argument(
            "--rate-limit", type=float, dest="rate_limit", metavar="ALERTS_PER_S", help="no limit by default"
        )
        sub.add_parser("list", help="list integrations (tokens are not stored, so not shown)")
        rotate = sub.add_parser("rotate", help="replace an integration's token and print the new one")
        rotate.add_argument("id", type=int, metavar="ID")

    def handle(self, *args, action: str, **options) -> None:
        if action == "list":
            for integration in Integration.objects.order_by("id"):
                self.stdout.write(
                    json.dumps(
                        {
                            "id": integration.pk,
                            "kind": integration.kind,
                            "name": integration.name,
                            "url": integration.path,
                        }
                    )
                )
            return
        if action == "rotate":
            try:
                integration, token = services.integration_rotate(integration_id=options["id"])
            except services.RootlineError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(json.dumps({"id": integration.pk, "url": integration.path, "token": token}))
            return
        try:
            integration, token = services.integration_add(
                kind=options["kind"],
                name=options["name"],
                token=options["token"],
                rate_limit=options["rate_limit"],
            )
        except services.RootlineError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            json.dumps(
                {
                    "id": integration.pk,
                    "kind": integration.kind,
                    "name": integration.name,
                    "url": integration.path,
                    "token": token,
                }
            )
        )
