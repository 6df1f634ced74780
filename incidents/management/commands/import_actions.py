import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from incidents.actions import ActionError, action_line_apply
from incidents.replay import ReplayError


class Command(BaseCommand):
    help = "Apply human actions (one JSON object a line: {at, by, action, ...}) as their users, at their times. Idempotent."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options) -> None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        totals = {"applied": 0, "already": 0, "failed": 0}
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                totals[action_line_apply(line=json.loads(raw))] += 1
            except (ValueError, ReplayError, ActionError) as exc:
                totals["failed"] += 1
                self.stderr.write(f"{file.name}:{number}: {getattr(exc, 'message', exc)}")
        self.stdout.write(json.dumps(totals))
