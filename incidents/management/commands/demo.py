"""`manage.py demo`: a simulated fleet's morning (alerts, changes, human actions), as it stood at
09:50, so every page has something real to show, through the same services as live deliveries.
Running it again changes nothing."""

from __future__ import annotations

import json
import logging
import secrets
import tempfile
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Min
from django.utils import timezone

from correlate import simulator
from correlate.ingest.common import parse_time
from incidents import services
from incidents.models import Alert, AuditRecord, Delivery, Incident, Integration, Postmortem, RemediationItem
from incidents.replay import action_line_apply
from incidents.review.weeks import Week
from incidents.services.correlation import correlation_rebuild
from incidents.services.errors import RootlineError
from incidents.services.evidence import evidence_collect, incidents_overlapping
from incidents.services.local_series import local_series_import
from incidents.services.postmortems import needs_postmortem, postmortem_act
from incidents.services.remediation import postmortem_draft_suggesting, remediation_judge, remediation_update
from incidents.services.review import review_freeze
from incidents.services.roles import admin_ensure

DEMO_SEED = 7
# The demo shows the scenario's morning as it stood this long after its start, not after its
# end: by then every incident of fleet-day is over (resolved by its people or by its alerts) and
# the triage queue, which lists open incidents, would show one certificate warning. At 09:50 it
# holds incidents in progress, acknowledged, escalated, one nobody has taken yet, and noise,
# beside the morning's resolved incidents with their actions. Nothing later is loaded: no alert,
# change, action or metric sample dated after the cut, so every status is what it was then.
AS_OF = timedelta(hours=3, minutes=50)
# The weekly review's trend: one of these in each of the eight weeks before the demo's day.
HISTORY_WEEKS = 8
HISTORY_SCENARIOS = ("frag-oom", "preemption-itl", "gpu-xid-crash", "hot-instance", "numeric-nan",
                     "ghost-requests", "config-oom", "rollout-crashloop")  # fmt: skip


class Command(BaseCommand):
    help = (
        "Load a bundled scenario (default: a fleet's morning with several incidents) as it stood "
        "3 h 50 min in, and print the admin login."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--scenario", default=None, help="see `manage.py simulate --list` (default: fleet-day)"
        )
        parser.add_argument(
            "--history-weeks",
            type=int,
            choices=range(0, HISTORY_WEEKS + 1),
            default=None,
            metavar=f"0-{HISTORY_WEEKS}",
            help=f"earlier weeks of incidents for the weekly review (default: {HISTORY_WEEKS} with the "
            "default scenario, none with a named one, which loads alone)",
        )
        parser.add_argument("--start", help="scenario start (RFC 3339); default: yesterday 06:00 UTC")
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000", help="where the server will be, for the login line"
        )

    def handle(self, *args, scenario: str | None, start: str | None, **options) -> None:
        weeks = options["history_weeks"]
        if weeks is None:
            weeks = HISTORY_WEEKS if scenario is None else 0
        scenario = scenario or "fleet-day"
        if scenario not in simulator.scenario_names():
            raise CommandError(
                f"unknown scenario {scenario!r}; known: {', '.join(simulator.scenario_names())}"
            )
        start = start or (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT06:00:00Z")
        try:
            started = datetime.fromisoformat(start.replace("Z", "+00:00"))
        except ValueError as exc:
            raise CommandError(f"--start: not an RFC 3339 time: {start[:60]!r} ({exc})") from None
        if started.tzinfo is None:
            raise CommandError(
                f"--start: {start[:60]!r} has no offset; write it as RFC 3339, e.g. 2026-03-14T06:00:00Z"
            )
        as_of = started + AS_OF
        username, password = admin_login()
        alerts_integration = demo_integration(Integration.Kind.ALERTMANAGER, "demo-alertmanager")
        changes_integration = demo_integration(Integration.Kind.EVENTS, "demo-changes")
        with tempfile.TemporaryDirectory(prefix="rootline-demo-") as folder, quiet_task_logs():
            history = history_weeks(started, weeks, Path(folder), alerts_integration, changes_integration)
            simulator.simulate(scenario, start, DEMO_SEED, folder)
            replay_bodies(Path(folder) / "alerts.jsonl", alerts_integration, as_of)
            replay_bodies(Path(folder) / "changes.jsonl", changes_integration, as_of)
            process_pending()
            # A scenario may begin before --start (the March incident runs at 01:00 of its day).
            earliest = Alert.objects.aggregate(first=Min("starts_at"))["first"] or started
            correlation_rebuild(since=min(started, earliest) - timedelta(hours=2))
            settings.POSTMORTEM_AUTO_DRAFT = False  # drafted below, once the morning's metrics are in
            try:
                applied = replay_actions(Path(folder) / "actions.jsonl", as_of)
                for earlier in history:
                    applied += replay_actions(earlier / "actions.jsonl", as_of)
            finally:
                settings.POSTMORTEM_AUTO_DRAFT = True
            imported = local_series_import(path=str(samples_until(Path(folder) / "metrics.om", as_of)))
            for incident_id in incidents_overlapping(imported.start, imported.end):
                evidence_collect(incident_id=incident_id, now=as_of)
            drafted = demo_postmortems(username)
            frozen = freeze_closed_weeks(started, weeks, timezone.now()) if weeks else 0
        self.stdout.write(
            f"Demo scenario {scenario} from {start}, as it stood at {as_of:%Y-%m-%d %H:%M} UTC, loaded "
            f"({applied} actions applied); {drafted} postmortem(s) drafted, the first published; "
            f"{len(history)} earlier weeks of incidents for the weekly review, "
            f"{frozen} closed week(s) frozen."
        )
        self.stdout.write(
            f"Admin login: {username} / {password}  ({options['url'].rstrip('/')}/accounts/login/)"
        )


def demo_postmortems(username: str) -> int:
    """Each resolved incident the policy asks a postmortem of gets its draft; the earliest is taken
    through review and published, so the demo shows one published postmortem and drafts."""
    admin = User.objects.get(username=username)
    due = Incident.objects.filter(status=Incident.Status.RESOLVED, merged_into__isnull=True).order_by(
        "started_at"
    )
    drafted = []
    for incident in due:
        if needs_postmortem(incident):
            postmortem, _ = postmortem_draft_suggesting(
                incident=incident, user=None, via=AuditRecord.Via.IMPORT
            )
            drafted.append(postmortem)
    if drafted and drafted[0].status == Postmortem.Status.DRAFT:
        for action in ("submit", "approve", "publish"):
            postmortem_act(
                postmortem=drafted[0], user=admin, via=AuditRecord.Via.IMPORT, body={"action": action}
            )
    demo_remediation_states(admin)
    return len(drafted)


# The states the demo's accepted suggestions are taken to, in order; the rest stay suggestions.
DEMO_STATES = ("open", "in_progress", "done", "verified", "regressed", "wont_do", "overdue")


def demo_remediation_states(admin: User) -> None:
    """Accept the first suggestions and take one to each state, so the remediation page shows them
    all; a second run finds them accepted and changes nothing."""
    if RemediationItem.objects.filter(suggested=False).exists():
        return
    now = timezone.now()
    via = AuditRecord.Via.IMPORT
    suggestions = RemediationItem.objects.filter(suggested=True).order_by("id")
    for item, state in zip(suggestions, DEMO_STATES, strict=False):
        if state == "wont_do":
            remediation_update(item=item, user=admin, via=via, body={"status": "wont_do"})
            continue
        body: dict[str, object] = {"suggested": False, "owner": admin.get_username()}
        if state == "overdue":
            body.update(horizon="date", due_at=(now - timedelta(days=2)).isoformat())
        remediation_update(item=item, user=admin, via=via, body=body)
        if state in ("in_progress", "done", "verified", "regressed"):
            status = "in_progress" if state == "in_progress" else "done"
            remediation_update(item=item, user=admin, via=via, body={"status": status})
        if state in ("verified", "regressed"):
            reason = "demo: what the simulated morning's metrics would have answered"
            held: dict[str, object] = {
                "at": now.isoformat(), "query": item.check_expr or "(demo)", "range": None, "result": [],
                "ok": True, "reason": reason,
            }  # fmt: skip
            item = remediation_judge(item=item, outcome=held, now=now)
            if state == "regressed":
                failed = {**held, "ok": False, "reason": "demo: condition not met"}
                remediation_judge(item=item, outcome=failed, now=now)


def history_weeks(
    started: datetime, weeks: int, folder: Path, alerts: Integration, changes: Integration
) -> list[Path]:
    """A smaller scenario in each of the `weeks` weeks before, delivered whole, so the weekly
    review has a trend; their folders, for their actions once correlation has run."""
    folders = []
    for weeks_back in range(weeks, 0, -1):
        name = HISTORY_SCENARIOS[weeks_back % len(HISTORY_SCENARIOS)]
        start = started - timedelta(days=7 * weeks_back - weeks_back % 5, hours=4 * (weeks_back % 3))
        week_folder = folder / f"week-{weeks_back}"
        simulator.simulate(
            name, start.strftime("%Y-%m-%dT%H:%M:%SZ"), DEMO_SEED + weeks_back, str(week_folder)
        )
        replay_bodies(week_folder / "alerts.jsonl", alerts, started)
        replay_bodies(week_folder / "changes.jsonl", changes, started)
        folders.append(week_folder)
    return folders


def freeze_closed_weeks(started: datetime, weeks: int, now: datetime) -> int:
    """Each closed week with demo incidents frozen, as beat would have done each Monday."""
    frozen = 0
    for week in {Week.of(started - timedelta(days=7 * n)) for n in range(weeks + 2)}:
        if week.complete(now):
            frozen += review_freeze(week=week, now=now).created
    return frozen


def admin_login() -> tuple[str, str]:
    """The demo's admin; its password is kept in the data folder so every run prints a working login."""
    path = Path(settings.DATA_DIR) / "admin-password"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12))
        path.chmod(0o600)
    password = path.read_text().strip()
    admin_ensure(username="admin", password=password)
    return "admin", password


def demo_integration(kind: str, name: str) -> Integration:
    integration = Integration.objects.filter(name=name).first()
    if integration is None:
        integration, _ = services.integration_add(kind=kind, name=name)
    return integration


def replay_bodies(path: Path, integration: Integration, as_of: datetime) -> None:
    for line in path.read_bytes().splitlines():
        if line.strip() and sent_by(json.loads(line), as_of):
            services.delivery_receive(
                integration=integration, body=line.strip(), headers={"x-rootline-import": "demo"}
            )


def sent_by(body: dict, as_of: datetime) -> bool:
    """An Alertmanager notification goes out for its latest news (an alert that started, or one
    whose end it reports); a change event at its timestamp."""
    if "alerts" in body:
        news = (
            alert["endsAt"] if alert["status"] == "resolved" else alert["startsAt"]
            for alert in body["alerts"]
        )
        return max(moment_of(moment, "at") for moment in news) <= as_of
    return moment_of(body["payload"]["timestamp"], "timestamp") <= as_of


def moment_of(text: str, field: str) -> datetime:
    """A time the simulator wrote (never Go's zero time, which `parse_time` reads as None)."""
    moment = parse_time(text, field)
    if moment is None:
        raise RootlineError(f"{field}: the scenario wrote Go's zero time")
    return moment


def samples_until(path: Path, as_of: datetime) -> Path:
    """The OpenMetrics file without the samples after `as_of` (a sample line ends in its time, in seconds)."""
    kept = path.with_name("metrics-as-of.om")
    with path.open(encoding="utf-8") as source, kept.open("w", encoding="utf-8") as target:
        for line in source:
            if line.startswith("#") or not line.strip() or float(line.rsplit(" ", 1)[1]) <= as_of.timestamp():
                target.write(line)
    return kept


def process_pending() -> None:
    """Inline, so the demo does not depend on a worker being up."""
    for delivery_id in (
        Delivery.objects.filter(status=Delivery.Status.PENDING).order_by("id").values_list("id", flat=True)
    ):
        services.delivery_process(delivery_id=delivery_id)


def replay_actions(path: Path, as_of: datetime) -> int:
    """The scenario's human actions until `as_of`, as `import_actions` applies them; the number
    newly applied."""
    applied = 0
    lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    for line in lines:
        if moment_of(line["at"], "at") > as_of:
            continue
        try:
            applied += action_line_apply(line=line) == "applied"
        except RootlineError:
            continue  # an action the simulated people took on a state it no longer fits
    return applied


@contextmanager
def quiet_task_logs():
    """The demo runs every task eagerly: a line per task and per correlation run would bury the
    login it prints at the end."""
    loggers = [logging.getLogger(name) for name in ("celery.app.trace", "incidents.services.correlation.run")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
