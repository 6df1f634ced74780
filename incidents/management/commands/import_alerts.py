import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from incidents import services
from incidents.models import Integration, PendingAction
from incidents.replay import pending_actions_apply


class Command(BaseCommand):
    help = (
        "Replay webhook bodies (one JSON body a line) as if delivered to an integration; then apply "
        "the actions import_actions kept for alerts not stored yet, if theirs are now stored and correlated."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--integration", type=int, required=True, help="integration id (see `integration list`)"
        )

    def handle(self, *args, file: Path, integration: int, **options) -> None:
        target = Integration.objects.filter(pk=integration).first()
        if target is None:
            raise CommandError(f"no integration {integration}")
        if not file.exists():
            raise CommandError(f"no such file: {file}")
        totals = {"bodies": 0, "accepted": 0, "rejected": 0, "refused": 0}
        try:
            lines = file.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror or exc}") from None
        with lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                receipt = services.delivery_receive(
                    integration=target,
                    body=line.strip(),
                    headers={"x-rootline-import": f"{file.name}:{number}"},
                )
                totals["bodies"] += 1
                if receipt.status_code == 202:
                    totals["accepted"] += receipt.body["accepted"]
                    totals["rejected"] += len(receipt.body["rejected"])
                else:
                    totals["refused"] += 1
                    self.stderr.write(f"{file.name}:{number}: {receipt.body.get('error')}")
        self.stdout.write(json.dumps(totals))
        self.apply_pending_actions()

    def apply_pending_actions(self) -> None:
        """Without a broker the bodies were correlated as they were stored; with one, a worker
        correlates them later and the periodic task applies what still waits."""
        started = timezone.now()
        totals = pending_actions_apply()
        if not any(totals.values()):
            return
        self.stderr.write(
            f"pending actions: {totals['applied'] + totals['already']} applied, {totals['failed']} failed, "
            f"{totals['pending']} still wait for their alerts, {totals['expired']} expired"
        )
        for given_up in PendingAction.objects.filter(Q(failed_at__gte=started) | Q(expired_at__gte=started)):
            self.stderr.write(f"{given_up.source}: {given_up.error}")
