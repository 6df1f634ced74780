import json
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from incidents.models import PendingAction
from incidents.replay import AlertsNotThereYet, ReplayError, action_line_apply, action_line_keep_pending
from incidents.services.errors import RootlineError


class Command(BaseCommand):
    help = (
        "Apply human actions (one JSON object a line: {at, by, action, ...}) as their users, at their "
        "times. Idempotent. "
        "A line whose alerts are not imported yet is kept and applied once they are stored and correlated, "
        "or expires ROOTLINE_PENDING_ACTION_TTL_HOURS later; --pending lists the kept lines."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path, nargs="?")
        parser.add_argument(
            "--pending",
            action="store_true",
            help="list the kept lines instead (one JSON object a line): waiting for their alerts, "
            "failed once these came, or expired (their alerts never came)",
        )

    def handle(self, *args, file: Path | None, pending: bool, **options) -> None:
        if pending:
            if file is not None:
                raise CommandError("--pending lists the kept lines; it takes no file")
            self.list_pending()
            return
        if file is None:
            raise CommandError("name the FILE.jsonl to import, or ask for --pending")
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        totals = {"applied": 0, "already": 0, "pending": 0, "failed": 0}
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.strip():
                totals[self.import_line(raw, where=f"{file.name}:{number}")] += 1
        self.stdout.write(json.dumps(totals))
        expired = PendingAction.objects.filter(expired_at__isnull=False).count()
        if expired:
            self.stderr.write(
                f"{expired} kept line(s) expired, their alerts never came: see import_actions --pending"
            )

    def list_pending(self) -> None:
        ttl = timedelta(hours=settings.PENDING_ACTION_TTL_HOURS)
        for kept in PendingAction.objects.order_by("at", "id"):
            waiting = kept.state == PendingAction.State.WAITING
            self.stdout.write(
                json.dumps(
                    {
                        "source": kept.source,
                        "action": kept.line.get("action"),
                        "at": iso(kept.at),
                        "state": kept.state,
                        "kept_at": iso(kept.kept_at),
                        "expires_at": iso(kept.kept_at + ttl) if waiting else None,
                        "waiting_for": kept.waiting_for,
                        "error": kept.error,
                        "failed_at": iso(kept.failed_at),
                        "expired_at": iso(kept.expired_at),
                    }
                )
            )

    def import_line(self, raw: str, *, where: str) -> str:
        """ "applied", "already", "pending" (kept until its alerts are there) or "failed", said on stderr."""
        try:
            try:
                line = json.loads(raw)
            except RecursionError:
                raise ReplayError("not JSON that can be read: nested too deeply") from None
            return action_line_apply(line=line)
        except AlertsNotThereYet as exc:
            action_line_keep_pending(line=line, source=where, waiting_for=exc.message)
            self.stderr.write(
                f"{where}: pending: {exc.message}; kept, and applied once its alerts are stored and "
                "correlated"
            )
            return "pending"
        except (ValueError, RootlineError) as exc:
            self.stderr.write(f"{where}: {getattr(exc, 'message', exc)}")
            return "failed"


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None
