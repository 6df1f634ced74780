"""Correlation inside the app: stored alerts in, the pure engine in the middle, incidents out.

Work is serialised per correlation key (the cluster): a PostgreSQL advisory lock, or a locked
row on SQLite, so several workers can run without duplicating incidents. Each run recomputes a
key's recent window from stored alerts and human decisions, then writes only what changed, so a
run is safe to repeat and the same alerts give the same incidents whatever order they came in.
"""
from __future__ import annotations

import logging
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Min

from correlate import engine as correlation_engine
from correlate.catalog import Catalog
from correlate.events import Alert as EngineAlert
from correlate.results import Decision as EngineDecision
from correlate.results import Exclude, FalsePositive, Merge, Split
from correlate.results import Incident as EngineIncident
from correlate.topology import CLUSTER_KEYS
from incidents.catalog import catalog
from incidents.evidence.collect import evidence_enqueue_for_changes
from incidents.models import Alert, CorrelationLock, Decision, Incident, IncidentEdge, RootCandidate

logger = logging.getLogger(__name__)

SEVERITY_WORDS = {
    "critical": "critical", "page": "critical", "error": "critical", "high": "critical", "p1": "critical", "sev1": "critical",
    "warning": "warning", "warn": "warning", "medium": "warning", "p2": "warning", "p3": "warning",
    "info": "info", "low": "info", "none": "info", "p4": "info",
}
SEVERITY_ORDER = ("info", "warning", "critical")
ALERT_SYNC_FIELDS = ("incident_id", "layer", "failure_mode", "classified_by", "onset", "false_positive")


def correlation_key_of(labels: dict[str, str]) -> str:
    for name in CLUSTER_KEYS:
        value = labels.get(name)
        if value:
            return value[:255]
    return ""


def lookback(current: Catalog) -> timedelta:
    """How far back a new alert can link: the longest causal lag or grouping window, plus slack.
    Older alerts come in only through the incidents these belong to."""
    settings_ = current.settings
    return max(current.max_rule_lag, settings_.same_mode_window, settings_.tight_scope_window) + settings_.onset_slack


# Enqueueing ------------------------------------------------------------------------------


def correlation_enqueue(keys: Iterable[str]) -> None:
    """One pending run per key is enough: a run recomputes the key's whole window, so a storm of
    deliveries collapses into a few runs instead of one per delivery.

    The flag is taken only once the caller's transaction has committed. Taken before, a run
    already queued for the key could start, clear the flag and read its window while these
    alerts were still uncommitted, and no run would follow for them (nor, for a transaction
    that rolled back, for anything else of the key until the flag expired)."""
    keys = sorted(set(keys))
    if keys:
        transaction.on_commit(lambda: correlation_enqueue_now(keys), robust=True)


def correlation_enqueue_now(keys: list[str]) -> None:
    from incidents.tasks import correlate_key

    for key in keys:
        if settings.CELERY_TASK_ALWAYS_EAGER or cache.add(pending_flag(key), 1, timeout=60):
            correlate_key.delay(key)


def pending_flag(key: str) -> str:
    return f"rootline:correlate-pending:{zlib.crc32(key.encode())}:{key[:100]}"


# Running ---------------------------------------------------------------------------------


def correlation_run(*, key: str, since: datetime | None = None) -> list[int]:
    """Correlate one key's window and persist it; returns the ids of incidents it touched."""
    cache.delete(pending_flag(key))
    current = catalog()
    with transaction.atomic():
        lock_key(key)
        rows = window_alerts(key, since=since, span=lookback(current))
        if not rows:
            return []
        decisions = Decision.objects.filter(correlation_key=key)
        result = correlation_engine.correlate(
            [engine_alert(row) for row in rows], [engine_decision(d) for d in decisions], current
        )
        touched = incidents_sync(key=key, rows=rows, result=result)
        evidence_enqueue_for_changes(touched)  # an incident that opened, grew or resolved needs its metrics again
        return touched


def lock_key(key: str) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [4242, zlib.crc32(key.encode()) - 2**31])
        return
    CorrelationLock.objects.get_or_create(key=key)
    CorrelationLock.objects.select_for_update().filter(key=key).update(key=key)


def window_alerts(key: str, *, since: datetime | None, span: timedelta) -> list[Alert]:
    """The alerts a run must see: everything new (not yet correlated) and what it can join, that
    is alerts starting within `span` before the earliest new one, and every alert of an incident
    any of those belongs to (so an incident is never seen in part)."""
    alerts = Alert.objects.filter(correlation_key=key)
    if since is None:
        earliest_new = alerts.filter(correlated=False).aggregate(first=Min("starts_at"))["first"]
        if earliest_new is None:
            return []
        since = earliest_new - span
    rows = {row.pk: row for row in alerts.filter(starts_at__gte=since)}
    incident_ids = {row.incident_id for row in rows.values() if row.incident_id}
    if incident_ids:
        for row in alerts.filter(incident_id__in=incident_ids).exclude(pk__in=list(rows)):
            rows[row.pk] = row
    return sorted(rows.values(), key=lambda row: (row.starts_at, row.pk))


def engine_alert(row: Alert) -> EngineAlert:
    labels = dict(row.labels)
    if row.kind == Alert.Kind.CHANGE:
        labels.update({"failure_mode": "change", "layer": "process"})
    return EngineAlert(
        fingerprint=row.fingerprint, starts_at=row.starts_at, labels=labels, annotations=row.annotations,
        ends_at=row.ends_at, status=row.status, generator_url=row.generator_url,
    )


def engine_decision(decision: Decision) -> EngineDecision:
    keys = tuple(decision.alert_keys)
    if decision.kind == Decision.Kind.MERGE:
        return Merge(keys)
    if decision.kind == Decision.Kind.SPLIT:
        return Split(keys)
    if decision.kind == Decision.Kind.EXCLUDE:
        return Exclude(keys[0])
    return FalsePositive(keys[0])


# Persisting ------------------------------------------------------------------------------


def incidents_sync(*, key: str, rows: list[Alert], result: list[EngineIncident]) -> list[int]:
    by_key = {row.key: row for row in rows}
    result = sorted(result, key=lambda incident: (incident.started_at, incident.id))
    previous = defaultdict(set)
    for row in rows:
        if row.incident_id:
            previous[row.incident_id].add(row.pk)
    assigned = assign_identities(result, by_key, previous, key)
    stored = StoredDetails.load([incident.pk for incident in assigned.values()])
    touched: list[int] = []
    for engine_incident in result:
        incident = assigned[engine_incident.id]
        members = [by_key[member.key] for member in engine_incident.members if member.key in by_key]
        if incident_write(incident, engine_incident, members, by_key, stored):
            touched.append(incident.pk)
    alerts_write(rows, result, assigned, by_key)
    retire_emptied(previous, assigned, rows)
    return touched


class StoredDetails:
    """Edges and root candidates of many incidents, read in two queries, so that a run over an
    unchanged window writes nothing and reads little."""

    def __init__(self, edges: dict[int, list[tuple]], candidates: dict[int, list[tuple]]) -> None:
        self.edges = edges
        self.candidates = candidates

    @classmethod
    def load(cls, incident_ids: list[int]) -> "StoredDetails":
        edges: dict[int, list[tuple]] = defaultdict(list)
        candidates: dict[int, list[tuple]] = defaultdict(list)
        for incident_id, *edge in IncidentEdge.objects.filter(incident_id__in=incident_ids).values_list(
            "incident_id", "cause_id", "effect_id", "rule", "lag_seconds", "relation"
        ):
            edges[incident_id].append(tuple(edge))
        for incident_id, *candidate in RootCandidate.objects.filter(incident_id__in=incident_ids).values_list(
            "incident_id", "rank", "alert_id", "confidence", "explanation"
        ):
            candidates[incident_id].append(tuple(candidate))
        return cls(edges, candidates)


def assign_identities(result: list[EngineIncident], by_key: dict[str, Alert], previous: dict[int, set[int]], key: str) -> dict[str, Incident]:
    """Keep incident ids stable across runs: each engine incident takes the stored incident it
    shares most alerts with (largest overlaps first, older incidents on ties); the rest are new."""
    merged_away = set(Incident.objects.filter(pk__in=list(previous), merged_into__isnull=False).values_list("pk", flat=True))
    overlaps = []
    for engine_incident in result:
        member_ids = {by_key[m.key].pk for m in engine_incident.members if m.key in by_key}
        for incident_id, alert_ids in previous.items():
            shared = len(member_ids & alert_ids)
            if shared and incident_id not in merged_away:
                overlaps.append((-shared, incident_id, engine_incident.id))
    overlaps.sort()
    taken: dict[str, int] = {}
    used: set[int] = set()
    for _, incident_id, engine_id in overlaps:
        if engine_id not in taken and incident_id not in used:
            taken[engine_id] = incident_id
            used.add(incident_id)
    existing = Incident.objects.in_bulk(list(used))
    assigned = {}
    for engine_incident in result:
        if engine_incident.id in taken:
            assigned[engine_incident.id] = existing[taken[engine_incident.id]]
        else:
            assigned[engine_incident.id] = Incident.objects.create(correlation_key=key, started_at=engine_incident.started_at)
    return assigned


def incident_write(incident: Incident, engine_incident: EngineIncident, members: list[Alert], by_key: dict[str, Alert],
                   stored: StoredDetails) -> bool:
    root = engine_incident.root
    root_row = by_key.get(root.alert_key) if root else None
    values = {
        "started_at": min(row.starts_at for row in members),
        "last_alert_at": max(row.starts_at for row in members),
        "scope": engine_incident.scope,
        "layers": list(engine_incident.layers),
        "failure_modes": list(engine_incident.failure_modes),
        "root_alert_id": root_row.pk if root_row else None,
        "root_confidence": round(root.confidence, 4) if root else None,
        "root_explanation": root.explanation if root else "",
        "chain": [by_key[k].pk for k in engine_incident.chain if k in by_key],
        "title": incident_title(engine_incident, root_row, members),
    }
    if not incident.severity_by_human:
        values["severity"] = severity_of(members)
    values.update(status_from_alerts(incident, members))
    changed = [name for name, value in values.items() if getattr(incident, name) != value]
    for name in changed:
        setattr(incident, name, values[name])
    if changed:
        incident.save(update_fields=changed + ["updated_at"])
    edges_changed = edges_write(incident, engine_incident, by_key, stored.edges.get(incident.pk, []))
    candidates_changed = candidates_write(incident, engine_incident, by_key, stored.candidates.get(incident.pk, []))
    return bool(changed) or edges_changed or candidates_changed


def incident_title(engine_incident: EngineIncident, root_row: Alert | None, members: list[Alert]) -> str:
    lead = root_row or members[0]
    where = engine_incident.scope.get("deployment") or engine_incident.scope.get("model") or engine_incident.scope.get("pod") \
        or engine_incident.scope.get("node") or engine_incident.scope.get("namespace") or engine_incident.scope.get("cluster", "")
    names = []
    for key in engine_incident.chain:
        member = engine_incident.member(key)
        if member and member.alertname not in names:
            names.append(member.alertname)
    headline = " → ".join(names[:3]) if len(names) > 1 else (lead.alertname or "alert")
    if len(names) > 3:
        headline += f" → … ({len(names) - 3} more)"
    return (f"{headline} on {where}" if where else headline)[:500]


def severity_of(members: list[Alert]) -> str:
    levels = [SEVERITY_WORDS.get(str(row.labels.get("severity", "")).strip().lower(), "warning") for row in members]
    return max(levels, key=SEVERITY_ORDER.index) if levels else "warning"


def status_from_alerts(incident: Incident, members: list[Alert]) -> dict:
    """Alerts resolve an incident when they all have ended, and reopen it when one fires again,
    unless a person resolved or reopened it: then people decide."""
    if incident.resolved_by_human or incident.reopened_by_human:
        return {}
    firing = any(row.status == Alert.Status.FIRING for row in members)
    resolved_at = None
    if not firing:
        ends = [row.ends_at for row in members if row.ends_at]
        resolved_at = max(ends) if ends else max(row.starts_at for row in members)
    if resolved_at == incident.resolved_at:
        return {}
    previous, incident.resolved_at = incident.resolved_at, resolved_at
    status = incident.derived_status()
    incident.resolved_at = previous
    return {"resolved_at": resolved_at, "status": status}


def edges_write(incident: Incident, engine_incident: EngineIncident, by_key: dict[str, Alert], stored: list[tuple]) -> bool:
    wanted = sorted(
        (by_key[e.cause].pk, by_key[e.effect].pk, e.rule, round(e.lag_seconds, 3), e.relation)
        for e in engine_incident.edges if e.cause in by_key and e.effect in by_key
    )
    if sorted(stored) == wanted:
        return False
    incident.edges.all().delete()
    IncidentEdge.objects.bulk_create(
        IncidentEdge(incident=incident, cause_id=c, effect_id=e, rule=rule, lag_seconds=lag, relation=relation)
        for c, e, rule, lag, relation in wanted
    )
    return True


def candidates_write(incident: Incident, engine_incident: EngineIncident, by_key: dict[str, Alert], stored: list[tuple]) -> bool:
    wanted = [
        (rank, by_key[c.alert_key].pk, round(c.confidence, 4), c.explanation)
        for rank, c in enumerate(engine_incident.root_candidates) if c.alert_key in by_key
    ]
    if sorted(stored) == wanted:
        return False
    incident.root_candidates.all().delete()
    RootCandidate.objects.bulk_create(
        RootCandidate(incident=incident, rank=rank, alert_id=alert_id, confidence=confidence, explanation=explanation)
        for rank, alert_id, confidence, explanation in wanted
    )
    return True


def alerts_write(rows: list[Alert], result: list[EngineIncident], assigned: dict[str, Incident], by_key: dict[str, Alert]) -> None:
    """Write only the alerts whose incident or classification changed."""
    members = {}
    for engine_incident in result:
        for member in engine_incident.members:
            members[member.key] = (assigned[engine_incident.id].pk, member)
    changed = []
    for row in rows:
        incident_id, member = members.get(row.key, (None, None))
        values = {
            "incident_id": incident_id,
            "layer": member.layer if member else row.layer,
            "failure_mode": member.failure_mode if member else row.failure_mode,
            "classified_by": member.classified_by if member else row.classified_by,
            "onset": member.onset if member else row.onset,
            "false_positive": member.false_positive if member else row.false_positive,
        }
        dirty = not row.correlated or any(getattr(row, name) != value for name, value in values.items())
        if dirty:
            for name, value in values.items():
                setattr(row, name, value)
            row.correlated = True
            changed.append(row)
    if changed:
        alerts_update(changed)


def alerts_update(changed: list[Alert]) -> None:
    """Write the correlation fields of `changed` rows. On PostgreSQL one `UPDATE ... FROM unnest(...)`
    per 5,000 rows: `bulk_update`'s CASE WHEN per row and field cost more CPU than the engine
    itself on small windows (bench/correlate/end_to_end.py)."""
    if connection.vendor != "postgresql":
        Alert.objects.bulk_update(changed, [*ALERT_SYNC_FIELDS, "correlated"], batch_size=1000)
        return
    fields = [Alert._meta.get_field(name) for name in ALERT_SYNC_FIELDS]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in fields)
    assignments = ", ".join(f"{connection.ops.quote_name(field.column)} = v.{connection.ops.quote_name(field.column)}" for field in fields)
    sql = (f"UPDATE {connection.ops.quote_name(Alert._meta.db_table)} AS a SET {assignments}, correlated = true "
           f"FROM unnest(%s::bigint[], {arrays}) AS v(id, {columns}) WHERE a.id = v.id")
    with connection.cursor() as cursor:
        for start in range(0, len(changed), 5000):
            batch = changed[start:start + 5000]
            cursor.execute(sql, [[row.pk for row in batch]] + [[getattr(row, field.attname) for row in batch] for field in fields])


def retire_emptied(previous: dict[int, set[int]], assigned: dict[str, Incident], rows: list[Alert]) -> None:
    """A stored incident left without alerts was folded into another by the engine (an alert
    linked them) or emptied by a decision: one with human actions is kept, marked as merged into
    the incident that took most of its alerts; one nobody touched is deleted."""
    live = {incident.pk for incident in assigned.values()}
    row_by_id = {row.pk: row for row in rows}
    for incident_id, alert_ids in previous.items():
        if incident_id in live:
            continue
        successors = Counter(row_by_id[a].incident_id for a in alert_ids if a in row_by_id and row_by_id[a].incident_id)
        incident = Incident.objects.filter(pk=incident_id).first()
        if incident is None:
            continue
        if incident.actions.exists() or incident.merged_into_id:
            target = successors.most_common(1)[0][0] if successors else None
            if target and target != incident.pk and incident.merged_into_id != target:
                incident.merged_into_id = target
                incident.save(update_fields=["merged_into", "updated_at"])
        else:
            Incident.objects.filter(pk=incident_id).delete()


def correlation_rebuild(*, since: datetime) -> dict[str, int]:
    """Batch correlation of everything since `since`, key by key, through the same run as the
    incremental path, so both give the same incidents for the same alerts."""
    keys = sorted(set(Alert.objects.filter(starts_at__gte=since).values_list("correlation_key", flat=True)))
    touched = 0
    for key in keys:
        touched += len(correlation_run(key=key, since=since))
    return {"keys": len(keys), "incidents": touched}
