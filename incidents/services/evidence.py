"""Collecting an incident's evidence: the series around it, copied into `EvidenceSeries`.

The window runs from an hour before the first alert to 15 minutes after the last one (or now),
at a step that keeps every series under ~1,000 points and never under 15 s. Each query is asked
of Prometheus first (when `PROMETHEUS_URL` is set), then of the local store for what Prometheus
lacks; a signal nobody could answer is recorded as an `EvidenceGap` (with `since`, the first
failure) and the gap is cleared by the refresh that fills it in. Prometheus being unset, down or
refusing a query never raises: evidence is a help to the responder, not a precondition.

Rows are upserted per (incident, signal, query, labels), under a lock on the incident row, so
two runs of the same incident neither duplicate nor interleave. Points already stored before
the new window's first point are kept: Prometheus retention ends, the postmortem must not.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone as django_timezone

from incidents.catalog import catalog
from incidents.evidence import queries
from incidents.evidence.local import LocalSource
from incidents.evidence.points import RangeSeries, labels_key, pack_points, unpack_points
from incidents.evidence.prometheus import PrometheusError, PrometheusSource
from incidents.flow import MIN_INTERVAL_SECONDS, evidence_pending_flag, evidence_started_key
from incidents.models import Alert, EvidenceGap, EvidenceSeries, Incident
from incidents.services.tallies import EVIDENCE_COLLECTION, EVIDENCE_ERRORS, tally_add, tally_timed
from incidents.sql import advisory_xact_lock
from incidents.timeline import first_red_crossing

logger = logging.getLogger(__name__)

BEFORE_FIRST_ALERT = timedelta(minutes=60)
AFTER_LAST_ALERT = timedelta(minutes=15)
MIN_STEP_SECONDS = 15
MAX_POINTS = 1000
NOT_CONFIGURED = "PROMETHEUS_URL is not set"


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step: float


@dataclass
class CollectResult:
    incident_id: int
    series: int = 0
    points: int = 0
    gaps: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    skipped: str = ""
    query_errors: int = 0  # queries Prometheus or the local store answered with an error


@dataclass
class _Answer:
    query: queries.EvidenceQuery
    series: list[RangeSeries]
    source: str
    errors: list[str]


def incidents_overlapping(start: datetime | None, end: datetime | None) -> list[int]:
    """Incidents whose evidence window meets [start, end] (after an import of that span; none
    when the import held no sample)."""
    if start is None or end is None:
        return []
    return list(
        Incident.objects.visible()
        .filter(started_at__lte=end + BEFORE_FIRST_ALERT)
        .filter(
            Q(last_alert_at__isnull=True)
            | Q(last_alert_at__gte=start - AFTER_LAST_ALERT)
            | Q(resolved_at__isnull=True)
        )
        .values_list("id", flat=True)
    )


# Collecting ------------------------------------------------------------------------------


def evidence_window(alerts: list[Alert], now: datetime) -> Window:
    first = min(alert.starts_at for alert in alerts)
    last = max(
        alert.ends_at or (now if alert.status == Alert.Status.FIRING else alert.starts_at) for alert in alerts
    )
    start = (first - BEFORE_FIRST_ALERT).timestamp()
    end = min(last + AFTER_LAST_ALERT, now).timestamp()
    end = max(end, start + MIN_STEP_SECONDS)
    step = max(
        MIN_STEP_SECONDS, math.ceil((end - start) / (MAX_POINTS - 2) / MIN_STEP_SECONDS) * MIN_STEP_SECONDS
    )
    start = math.floor(start / step) * step
    end = math.ceil(end / step) * step
    if end > now.timestamp():
        end = math.floor(now.timestamp() / step) * step
    return Window(float(start), float(max(end, start)), float(step))


def evidence_collect(*, incident_id: int, now: datetime | None = None) -> CollectResult:
    """Collect the incident's evidence; stamped as collected (`evidence_collected_at`) with the
    time it started only once it has finished, so one cut short by a dying worker is swept up.
    Timed for /metrics; one that raises, or that Prometheus (or the local store) answered with
    an error, is an evidence error (Prometheus left unset is not one)."""
    with tally_timed(EVIDENCE_COLLECTION, errors=EVIDENCE_ERRORS):
        started = django_timezone.now()
        result = _collect(incident_id, now or started)
        Incident.objects.filter(pk=incident_id).update(evidence_collected_at=started)
    if result.query_errors:
        tally_add(EVIDENCE_ERRORS)
    return result


def _collect(incident_id: int, now: datetime) -> CollectResult:
    cache.delete(evidence_pending_flag(incident_id))
    cache.set(evidence_started_key(incident_id), time.time(), timeout=MIN_INTERVAL_SECONDS)
    incident = Incident.objects.filter(pk=incident_id).first()
    if incident is None:
        return CollectResult(incident_id, skipped="gone")
    alerts = list(incident.alerts.filter(kind=Alert.Kind.ALERT))
    if not alerts:
        return CollectResult(incident_id, skipped="no alerts")
    window = evidence_window(alerts, now)
    scope = queries.incident_scope(alert.labels for alert in alerts)
    plan = queries.plan(scope, evidence_modes(incident, alerts), catalog(), step=window.step)
    if not plan:
        return CollectResult(
            incident_id, skipped="no scope: no pod, model, node or volume in the alerts' labels"
        )
    answers = fetch(plan, window)
    result = persist(incident_id, answers, window, now)
    result.query_errors = sum(any(e != NOT_CONFIGURED for e in answer.errors) for answer in answers)
    first_red_at_refresh(incident_id)
    return result


def first_red_at_refresh(incident_id: int) -> None:
    """Keep the incident's `first_red_at` (its durations' onset, read by the weekly review in one
    query for a week of incidents) true to the evidence just written."""
    Incident.objects.filter(pk=incident_id).update(first_red_at=first_red_crossing(incident_id))


def evidence_modes(incident: Incident, alerts: list[Alert]) -> list[str]:
    """The incident's failure modes, with its disk alerts counted as `queries.DISK` rather than
    the `other` the catalog gives them: `other` stays only if an alert that is no disk alert has it."""
    disk = [queries.disk_alert(a.alertname, a.labels, a.failure_mode, a.generator_url) for a in alerts]
    modes = set(incident.failure_modes or []) | {
        a.failure_mode for a, d in zip(alerts, disk, strict=True) if a.failure_mode and not d
    }
    if any(disk):
        modes.add(queries.DISK)
        if not any(a.failure_mode in (None, "", "other") for a, d in zip(alerts, disk, strict=True) if not d):
            modes.discard("other")
    return sorted(modes)


def fetch(plan: list[queries.EvidenceQuery], window: Window) -> list[_Answer]:
    url = settings.PROMETHEUS_URL
    remote, down = None, NOT_CONFIGURED
    if url:
        try:
            remote, down = PrometheusSource(url), ""
        except (TypeError, ValueError) as exc:
            down = f"PROMETHEUS_URL {url!r} is not usable: {exc}"
    local = LocalSource()
    answers: list[_Answer] = []
    satisfied: dict[str, bool] = {}
    try:
        for query in plan:
            if query.fallback_of and satisfied.get(query.fallback_of, True):
                satisfied[query.promql] = True
                continue
            answer = _Answer(query, [], "", [])
            if remote is not None and not down:
                try:
                    answer.series, answer.source = (
                        remote.range(query.promql, window.start, window.end, window.step),
                        "prometheus",
                    )
                except PrometheusError as exc:
                    answer.errors.append(str(exc))
                    down = str(exc) if exc.unreachable else ""
            elif down:
                answer.errors.append(down)
            if not answer.series:
                try:
                    answer.series, answer.source = (
                        local.range(query, window.start, window.end, window.step),
                        "import",
                    )
                except Exception as exc:  # a bad row must not cost the incident its other evidence
                    logger.exception("local series store failed on %s", query.promql)
                    answer.errors.append(f"local series store: {exc}")
            for series in answer.series:
                series.points = mark_gaps(series.points, window.step)
            satisfied[query.promql] = bool(answer.series)
            answers.append(answer)
    finally:
        if remote is not None:
            remote.close()
    return drop_framebuffer_ratio_where_pool_exists(answers)


def drop_framebuffer_ratio_where_pool_exists(answers: list[_Answer]) -> list[_Answer]:
    """DOMAIN.md: GPU-memory bands go to KV-pool usage; the framebuffer ratio only where a GPU's
    pods export no pool series (no preallocation), since a preallocating engine keeps it at ~90%."""
    pool_pods = {_pod(s.labels) for a in answers if a.query.signal == "kv_pool_usage" for s in a.series}
    if not pool_pods:
        return answers
    for answer in answers:
        if answer.query.signal == "framebuffer_ratio":
            answer.series = [s for s in answer.series if _pod(s.labels) and _pod(s.labels) not in pool_pods]
    return answers


def _pod(labels: dict[str, str]) -> str:
    return labels.get("exported_pod") or labels.get("pod") or ""


def mark_gaps(points: list[tuple[float, float]], step: float) -> list[tuple[float, float]]:
    """A NaN after a point followed by silence longer than the lookback: charts break the line there."""
    out: list[tuple[float, float]] = []
    for index, (t, v) in enumerate(points):
        out.append((t, v))
        following = points[index + 1][0] if index + 1 < len(points) else None
        if following is not None and following - t > 1.5 * step:
            out.append((t + step, math.nan))
    return out


EVIDENCE_LOCK_SPACE = 4243  # advisory locks are (space, id); correlation keys use CORRELATION_LOCK_SPACE


def incident_for_evidence(incident_id: int) -> Incident | None:
    """The incident, with this transaction the only collection writing its evidence. On PostgreSQL
    an advisory lock per incident does that, not a lock on the incident's row: the evidence worker
    runs at the lowest CPU priority (`bin/serve`), and a correlation run updating the incident
    must never wait for a collection the kernel has set aside during a storm. The evidence rows'
    foreign key still keeps the incident from being deleted under them (a collection whose
    incident went meanwhile fails and is retried, then finds it gone)."""
    if not advisory_xact_lock(EVIDENCE_LOCK_SPACE, incident_id % 2**31):
        return Incident.objects.select_for_update().filter(pk=incident_id).first()
    return Incident.objects.filter(pk=incident_id).first()


def persist(incident_id: int, answers: list[_Answer], window: Window, now: datetime) -> CollectResult:
    result = CollectResult(incident_id)
    by_signal: dict[str, list[_Answer]] = defaultdict(list)
    for answer in answers:
        by_signal[answer.query.signal].append(answer)
    with transaction.atomic():
        incident = incident_for_evidence(incident_id)
        if incident is None:
            return CollectResult(incident_id, skipped="gone")
        existing = {
            (row.signal, row.query, row.labels_key): row
            for row in EvidenceSeries.objects.filter(incident=incident)
        }
        created, changed = [], []
        for answer in answers:
            for series in answer.series:
                if not series.points:
                    continue
                key = labels_key(series.labels)
                row = existing.get((answer.query.signal, answer.query.promql, key))
                points = series.points
                if row is not None and row.step_seconds == window.step:
                    points = merged(unpack_points(row.points), points)
                fields = {
                    "labels": series.labels,
                    "step_seconds": window.step,
                    "start": datetime.fromtimestamp(points[0][0], UTC),
                    "end": datetime.fromtimestamp(points[-1][0], UTC),
                    "points": pack_points(points),
                    "point_count": len(points),
                    "source": EvidenceSeries.Source.PROMETHEUS
                    if answer.source == "prometheus"
                    else EvidenceSeries.Source.IMPORT,
                    "fetched_at": now,
                }
                if row is None:
                    row = EvidenceSeries(
                        incident=incident,
                        signal=answer.query.signal,
                        query=answer.query.promql,
                        labels_key=key,
                        **fields,
                    )
                    existing[(row.signal, row.query, key)] = row
                    created.append(row)
                else:
                    for name, value in fields.items():
                        setattr(row, name, value)
                    if row.pk:
                        changed.append(row)
                result.series += 1
                result.points += len(points)
        EvidenceSeries.objects.bulk_create(created, batch_size=200)
        EvidenceSeries.objects.bulk_update(
            changed,
            ["labels", "step_seconds", "start", "end", "points", "point_count", "source", "fetched_at"],
            batch_size=200,
        )
        gaps = {gap.signal: gap for gap in EvidenceGap.objects.filter(incident=incident)}
        for signal, signal_answers in by_signal.items():
            found = any(answer.series for answer in signal_answers)
            errors = [error for answer in signal_answers for error in answer.errors]
            gap = gaps.get(signal)
            if found or not errors:
                if gap is not None:
                    gap.delete()
                    result.cleared.append(signal)
                continue
            message = "; ".join(dict.fromkeys(errors))[:2000]
            if gap is None:
                EvidenceGap.objects.create(
                    incident=incident, signal=signal, error=message, since=now, last_tried=now
                )
            else:
                gap.error, gap.last_tried = message, now
                gap.save(update_fields=["error", "last_tried"])
            result.gaps.append(signal)
    return result


def merged(old: list[tuple[float, float]], new: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """New points win; old ones outside the new span stay (data Prometheus no longer holds)."""
    if not new:
        return old
    first, last = new[0][0], new[-1][0]
    return [p for p in old if p[0] < first] + new + [p for p in old if p[0] > last]
