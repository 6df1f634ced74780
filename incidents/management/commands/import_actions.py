import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from incidents.actions import ActionError, incident_act, replay_key_of
from incidents.replay import ReplayError, action_body_for, actor_for


class Command(BaseCommand):
    help = "Apply human actions (one JSON object a line: {at, by, action, ...}) as their users, at their times. Idempotent."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options) -> None:
        if not file.exists():
            raise CommandError(f"no such file: {file}")
        totals = {"applied": 0, "already": 0, "failed": 0}
        for number, raw in enumerate(file.read_text().splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                incident, body = action_body_for(line)
                key = replay_key_of(line)
                outcome_before = incident.actions.filter(replay_key=key).exists()
                incident_act(incident=incident, user=actor_for(line), body=body, replay_key=key)
                totals["already" if outcome_before else "applied"] += 1
            except (ValueError, ReplayError, ActionError) as exc:
                totals["failed"] += 1
                self.stderr.write(f"{file.name}:{number}: {getattr(exc, 'message', exc)}")
        self.stdout.write(json.dumps(totals))
