"""Retention (docs/retention.md): delivery bodies emptied ROOTLINE_RETAIN_BODIES_DAYS after they were
received, and resolved alerts in no incident that nothing refers to deleted
ROOTLINE_RETAIN_ALERTS_DAYS after they ended, their counts rolled up first (`AlertRollup`) so the
weekly review reads the same figures after a prune as before.

It never holds up ingestion: every batch is its own short transaction over at most `BATCH` rows,
oldest first, changed by primary key, and locks only those rows (old deliveries and alerts
nothing else writes). A bounded run (beat's) stops after its batches or seconds and leaves a mark
in the cache, so the next one goes on from there instead of reading the kept rows again; a run
that reaches the end clears it, and the next pass starts from the oldest row.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from incidents.models import (
    Alert,
    AlertRollup,
    Decision,
    Delivery,
    Incident,
    IncidentAction,
    IncidentEdge,
    MatrixCell,
    RootCandidate,
)
from incidents.review.alert_figures import own_runbook_linked
from incidents.sql import advisory_xact_lock
from incidents.timeline import CHANGE_LOOKBACK

logger = logging.getLogger(__name__)

BATCH = 1000  # rows per transaction: a few tens of milliseconds of locks on rows nobody else writes
# Beat's run (`incidents.prune`, daily): at most this long and this many batches, on the evidence
# worker; a backlog (the first prune of a year of history) is taken over the following days, or
# at once by `manage.py prune`.
TASK_MAX_SECONDS = 180.0
TASK_MAX_BATCHES = 2000
RETENTION_LOCK_SPACE = 4244  # advisory locks are (space, id): correlation 4242, evidence 4243
# An incident names only alerts of its own time (members, its cluster's changes from an hour before
# it): those of incidents overlapping a batch's times, with this slack, are the ones to check.
INCIDENT_SLACK = timedelta(days=1)
MARK_SECONDS = 7 * 86400
# Pending and failed bodies are work still owed: their alerts are stored from them.
BODY_STATUSES = (Delivery.Status.PROCESSED, Delivery.Status.REJECTED)


@dataclass
class PruneReport:
    """What a prune did (or, dry, would do)."""

    dry_run: bool
    bodies_before: datetime
    alerts_before: datetime
    bodies: int = 0
    body_bytes: int = 0
    alerts: int = 0
    kept_alerts: int = 0  # old enough, but named by a decision, an action, a matrix cell or an incident
    rollups: set[tuple[date, str]] = field(default_factory=set)
    finished: bool = True

    def lines(self) -> list[str]:
        """One line per kind, for the command and the task's log."""
        verb = (
            ("would empty", "would delete", "would add to")
            if self.dry_run
            else ("emptied", "deleted", "added to")
        )
        rest = "" if self.finished else " (stopped at its bound: the next run goes on)"
        return [
            f"delivery bodies: {verb[0]} {self.bodies} ({self.body_bytes} bytes), received before "
            f"{self.bodies_before:%Y-%m-%d %H:%M} UTC (their rows stay){rest}",
            f"alerts: {verb[1]} {self.alerts}, resolved in no incident and ended before "
            f"{self.alerts_before:%Y-%m-%d %H:%M} UTC; kept {self.kept_alerts} as old that a decision, "
            f"an action, an incident or a matrix cell names{rest}",
            f"alert roll-ups: {verb[2]} {len(self.rollups)} (alert name, UTC day) counts for the review",
        ]


@dataclass
class Budget:
    """A run's bound: batches and seconds (None: unbounded, as `manage.py prune` runs)."""

    max_batches: int | None = None
    max_seconds: float | None = None
    batches: int = 0
    started: float = field(default_factory=time.monotonic)

    def spent(self) -> bool:
        if self.max_batches is not None and self.batches >= self.max_batches:
            return True
        return self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds


def retention_prune(
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    batch: int = BATCH,
    max_batches: int | None = None,
    max_seconds: float | None = None,
    resume: bool = False,
) -> PruneReport:
    """Empty old delivery bodies and delete old unreferenced alerts, batch by batch. Safe to run
    twice, or two at once: each batch locks the rows it takes and re-reads them under the lock.
    Must not run inside a transaction (each batch commits on its own). With `resume` (beat's
    bounded runs), go on from where the last bounded run stopped; without, start from the oldest.
    A dry run changes nothing and leaves no mark."""
    now = now or timezone.now()
    report = PruneReport(
        dry_run=dry_run,
        bodies_before=now - timedelta(days=settings.RETAIN_BODIES_DAYS),
        alerts_before=now - timedelta(days=settings.RETAIN_ALERTS_DAYS),
    )
    budget = Budget(max_batches, max_seconds)
    resume = resume and not dry_run
    for status in BODY_STATUSES:
        if not bodies_prune(report, status=status, now=now, batch=batch, budget=budget, resume=resume):
            report.finished = False
            return report
    if not alerts_prune(report, batch=batch, budget=budget, resume=resume):
        report.finished = False
    return report


# Delivery bodies --------------------------------------------------------------------------------


def prunable_bodies(status: str, before: datetime) -> QuerySet[Delivery]:
    """Bodies of `status` received before `before` and still kept; the status index leads."""
    return Delivery.objects.filter(
        status=status, received_at__lt=before, body_pruned_at__isnull=True, size__gt=0
    )


def bodies_prune(
    report: PruneReport, *, status: str, now: datetime, batch: int, budget: Budget, resume: bool
) -> bool:
    """Empty `status` bodies batch by batch; False when the budget ran out first."""
    kind = f"bodies-{status}"
    after = mark_read(kind) if resume else None
    while True:
        if budget.spent():
            return False
        budget.batches += 1
        with transaction.atomic():
            rows = after_position(prunable_bodies(status, report.bodies_before), "received_at", after)
            if not report.dry_run:
                rows = rows.select_for_update(of=("self",))
            taken = list(rows.order_by("received_at", "id").values_list("id", "received_at", "size")[:batch])
            if taken and not report.dry_run:
                Delivery.objects.filter(pk__in=[pk for pk, _, _ in taken]).update(
                    body=b"", body_pruned_at=now
                )
        report.bodies += len(taken)
        report.body_bytes += sum(size for _, _, size in taken)
        if len(taken) < batch:
            mark_clear(kind, report.dry_run)
            return True
        after = (taken[-1][1], taken[-1][0])
        mark_keep(kind, after, report.dry_run)


# Alerts -----------------------------------------------------------------------------------------


def prunable_alerts(before: datetime) -> QuerySet[Alert]:
    """Resolved alerts in no incident, taken by a correlation run, not judged a false positive,
    that started, ended and arrived before `before` (an imported year of history gets its own
    ROOTLINE_RETAIN_ALERTS_DAYS). Whether something refers to them is checked per batch."""
    return Alert.objects.filter(
        Q(ends_at__lt=before) | Q(ends_at__isnull=True),
        status=Alert.Status.RESOLVED,
        incident_id__isnull=True,
        correlated=True,
        false_positive=False,
        starts_at__lt=before,
        received_at__lt=before,
    )


@dataclass(frozen=True)
class References:
    """What a run reads once: the occurrences human decisions name and the alerts matrix cells cite."""

    decided: frozenset[str]
    cited: frozenset[int]

    @classmethod
    def read(cls) -> References:
        decided = {
            key for keys in Decision.objects.values_list("alert_keys", flat=True) for key in keys or ()
        }
        cited = set()
        for evidence in MatrixCell.objects.values_list("evidence", flat=True).iterator():
            for item in evidence or ():
                if isinstance(item, dict) and item.get("kind") in ("alert", "change"):
                    cited.update(whole_numbers([item.get("id")]))
        return cls(frozenset(decided), frozenset(cited))


def alerts_prune(report: PruneReport, *, batch: int, budget: Budget, resume: bool) -> bool:
    """Delete unreferenced old alerts batch by batch, rolling up their counts in the same
    transaction; False when the budget ran out first."""
    references = References.read()
    after = mark_read("alerts") if resume else None
    while True:
        if budget.spent():
            return False
        budget.batches += 1
        with transaction.atomic():
            rows = after_position(prunable_alerts(report.alerts_before), "starts_at", after)
            if not report.dry_run:
                advisory_xact_lock(RETENTION_LOCK_SPACE, 0)  # one roll-up writer at a time
                rows = rows.select_for_update(of=("self",))
            taken = list(
                rows.order_by("starts_at", "id").only(
                    "id", "fingerprint", "starts_at", "kind", "alertname", "annotations", "correlation_key"
                )[:batch]
            )
            kept = referred_to(taken, references)
            going = [row for row in taken if row.pk not in kept]
            counts = rollup_counts(going)
            if going and not report.dry_run:
                rollups_add(counts)
                Alert.objects.filter(pk__in=[row.pk for row in going]).delete()
        report.alerts += len(going)
        report.kept_alerts += len(kept)
        report.rollups.update(counts)
        if len(taken) < batch:
            mark_clear("alerts", report.dry_run)
            return True
        after = (taken[-1].starts_at, taken[-1].pk)
        mark_keep("alerts", after, report.dry_run)


def referred_to(rows: list[Alert], references: References) -> set[int]:
    """The rows something names: a person's action or decision, an incident's root, chain,
    cascade, edges or candidates, a matrix cell, or (a change) an incident's timeline."""
    if not rows:
        return set()
    ids = [row.pk for row in rows]
    kept = {row.pk for row in rows if row.key in references.decided or row.pk in references.cited}
    kept.update(IncidentAction.objects.filter(alert_id__in=ids).values_list("alert_id", flat=True))
    kept.update(Incident.objects.filter(root_alert_id__in=ids).values_list("root_alert_id", flat=True))
    kept.update(RootCandidate.objects.filter(alert_id__in=ids).values_list("alert_id", flat=True))
    for cause, effect in IncidentEdge.objects.filter(Q(cause_id__in=ids) | Q(effect_id__in=ids)).values_list(
        "cause_id", "effect_id"
    ):
        kept.update((cause, effect))
    kept.update(named_by_incidents(rows))
    return kept & set(ids)


def named_by_incidents(rows: list[Alert]) -> set[int]:
    """Rows in the chain or cascade of an incident of their time, and changes its timeline shows
    (its cluster's, from CHANGE_LOOKBACK before it started to its end: incidents/timeline.py)."""
    first, last = rows[0].starts_at, rows[-1].starts_at
    now = timezone.now()
    named: set[int] = set()
    changes = [row for row in rows if row.kind == Alert.Kind.CHANGE]
    for key, started, until, chain, cascade in (
        Incident.objects.filter(started_at__lte=last + CHANGE_LOOKBACK + INCIDENT_SLACK)
        .filter(Q(resolved_at__isnull=True) | Q(resolved_at__gte=first - INCIDENT_SLACK))
        .values_list("correlation_key", "started_at", "resolved_at", "chain", "cascade")
        .iterator()
    ):
        named.update(whole_numbers(chain or ()))
        named.update(
            whole_numbers(step[4] for step in cascade or () if isinstance(step, list) and len(step) > 4)
        )
        end = until or now
        named.update(
            row.pk
            for row in changes
            if row.correlation_key == key and started - CHANGE_LOOKBACK <= row.starts_at <= end
        )
    return named


def whole_numbers(values: Iterable[object]) -> set[int]:
    """Alert ids as JSON keeps them: integers, or (a person's matrix cell) their digits."""
    found = set()
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            found.add(value)
        elif isinstance(value, str) and value.isdigit():
            found.add(int(value))
    return found


def rollup_counts(rows: list[Alert]) -> dict[tuple[date, str], tuple[int, bool]]:
    """(UTC day, name) -> (firings, a runbook of its own linked), as the review reads them
    (`incidents/review/alert_figures.py`: firings count alerts, not changes)."""
    counts: dict[tuple[date, str], list] = defaultdict(lambda: [0, False])
    for row in rows:
        annotations = row.annotations or {}
        linked = own_runbook_linked(annotations.get("runbook_url"), annotations.get("runbook"))
        if row.kind != Alert.Kind.ALERT and not linked:
            continue
        entry = counts[(row.starts_at.astimezone(UTC).date(), row.alertname)]
        entry[0] += 1 if row.kind == Alert.Kind.ALERT else 0
        entry[1] = entry[1] or linked
    return {key: (firings, linked) for key, (firings, linked) in counts.items()}


def rollups_add(counts: dict[tuple[date, str], tuple[int, bool]]) -> None:
    """Add a batch's counts to the stored roll-ups (under the retention lock: one writer)."""
    if not counts:
        return
    existing = {
        (row.day, row.alertname): row
        for row in AlertRollup.objects.select_for_update().filter(
            day__in={day for day, _ in counts}, alertname__in={name for _, name in counts}
        )
    }
    new = []
    for (day, name), (firings, linked) in counts.items():
        row = existing.get((day, name))
        if row is None:
            new.append(AlertRollup(day=day, alertname=name, firings=firings, runbook_linked=linked))
        else:
            AlertRollup.objects.filter(pk=row.pk).update(
                firings=F("firings") + firings, runbook_linked=row.runbook_linked or linked
            )
    AlertRollup.objects.bulk_create(new)


# Where a bounded run stopped --------------------------------------------------------------------


def after_position(rows: QuerySet, column: str, after: tuple[datetime, int] | None) -> QuerySet:
    """Rows after (`column`, id) = `after`, in that order (a keyset: no offset to read past). The
    plain `>=` is what the index range starts from: PostgreSQL does not read one from the OR."""
    if after is None:
        return rows
    at, pk = after
    return rows.filter(**{f"{column}__gte": at}).filter(Q(**{f"{column}__gt": at}) | Q(pk__gt=pk))


def mark_key(kind: str) -> str:
    return f"rootline:prune:{kind}"


def mark_read(kind: str) -> tuple[datetime, int] | None:
    """Where the last bounded run of `kind` stopped; None (start from the oldest) when it finished,
    or the cache lost or cannot tell it (the pass then reads the kept rows again, nothing worse)."""
    try:
        value = cache.get(mark_key(kind))
    except Exception:  # noqa: BLE001
        logger.warning("prune mark unavailable", exc_info=True)
        return None
    if not (isinstance(value, list | tuple) and len(value) == 2):
        return None
    try:
        return datetime.fromisoformat(value[0]), int(value[1])
    except (TypeError, ValueError):
        return None


def mark_keep(kind: str, after: tuple[datetime, int], dry_run: bool) -> None:
    if dry_run:
        return
    try:
        cache.set(mark_key(kind), [after[0].isoformat(), after[1]], MARK_SECONDS)
    except Exception:  # noqa: BLE001
        logger.warning("prune mark not kept", exc_info=True)


def mark_clear(kind: str, dry_run: bool) -> None:
    if dry_run:
        return
    try:
        cache.delete(mark_key(kind))
    except Exception:  # noqa: BLE001
        logger.warning("prune mark not cleared", exc_info=True)
