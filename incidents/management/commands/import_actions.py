import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from incidents.actions import ActionError
from incidents.replay import AlertsNotThereYet, ReplayError, action_line_apply, action_line_keep_pending


class Command(BaseCommand):
    help = ("Apply human actions (one JSON object a line: {at, by, action, ...}) as their users, at their times. Idempotent. "
            "A line whose alerts are not imported yet is kept and applied once they are stored and correlated.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options) -> None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        totals = {"applied": 0, "already": 0, "pending": 0, "failed": 0}
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.strip():
                totals[self.import_line(raw, where=f"{file.name}:{number}")] += 1
        self.stdout.write(json.dumps(totals))

    def import_line(self, raw: str, *, where: str) -> str:
        """"applied", "already", "pending" (kept until its alerts are there) or "failed", said on stderr."""
        try:
            line = json.loads(raw)
            return action_line_apply(line=line)
        except AlertsNotThereYet as exc:
            action_line_keep_pending(line=line, source=where, waiting_for=exc.message)
            self.stderr.write(f"{where}: pending: {exc.message}; kept, and applied once its alerts are stored and correlated")
            return "pending"
        except (ValueError, ReplayError, ActionError) as exc:
            self.stderr.write(f"{where}: {getattr(exc, 'message', exc)}")
            return "failed"
