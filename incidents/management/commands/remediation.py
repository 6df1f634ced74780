"""`manage.py remediation check` and `manage.py remediation remind`: what beat does every few
minutes, once, for a Rootline without beat (the demo)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from incidents.services.remediation import remediation_check_due, remediation_remind


class Command(BaseCommand):
    help = "Check done remediation items against their data, or remind owners of deadlines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["check", "remind"])

    def handle(self, *args, **options) -> None:
        if options["what"] == "check":
            checked = remediation_check_due()
            self.stdout.write(
                f"checked {len(checked)} item(s){': ' if checked else ''}{', '.join(map(str, checked))}"
            )
        else:
            told = remediation_remind()
            self.stdout.write(
                f"reminded the owners of {len(told)} item(s){': ' if told else ''}{', '.join(map(str, told))}"
            )
