"""`manage.py review freeze --week W` and `manage.py review digest --week W`: what beat does each
Monday, for any week, for a Rootline without beat."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from incidents.review.weeks import BadWeek, Week
from incidents.services.errors import RootlineError
from incidents.services.review import review_digest, review_freeze


class Command(BaseCommand):
    help = "Freeze a closed ISO week's review figures, or mail its digest to ROOTLINE_REVIEW_RECIPIENTS."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["freeze", "digest"])
        parser.add_argument("--week", help="ISO week, e.g. 2026-W49 (default: the last complete week)")
        parser.add_argument(
            "--again",
            action="store_true",
            help="freeze: replace a week already frozen (its metrics may be gone)",
        )

    def handle(self, *args, **options) -> None:
        now = timezone.now()
        try:
            week = Week.parse(options["week"]) if options["week"] else Week.last_complete(now)
        except BadWeek as exc:
            raise CommandError(str(exc)) from exc
        if options["what"] == "freeze":
            try:
                frozen = review_freeze(week=week, now=now, again=options["again"])
            except RootlineError as exc:
                raise CommandError(str(exc)) from exc
            verb = "froze" if frozen.created or options["again"] else "kept the earlier freeze of"
            self.stdout.write(
                f"{verb} {frozen.week}: {frozen.incidents} incident(s), {frozen.objectives} objective(s)"
            )
            return
        sent = review_digest(week=week, now=now)
        if not sent:
            self.stdout.write(f"no digest of {week}: ROOTLINE_REVIEW_RECIPIENTS is empty")
        else:
            self.stdout.write(f"mailed the {week} digest to {', '.join(sent)}")
