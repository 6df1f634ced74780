"""Correlation runs: stored alerts in, the pure engine in the middle, incidents out.

Work is serialised per correlation key (the cluster): a PostgreSQL advisory lock, or a locked
row on SQLite, so several workers can run without duplicating incidents. A run takes the key's
alerts not yet correlated and either feeds them to the engine state this process kept from its
last run of the key (`state.py` says when that is safe) or recomputes the key's recent window
from stored alerts and human decisions. Either way it writes only what changed, so a run is safe
to repeat and the same alerts give the same incidents whatever order they came in.
"""

from __future__ import annotations

import logging
import time
import uuid
import zlib
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import F, Min, Q, QuerySet

from correlate.catalog import Catalog
from correlate.engine import Correlator
from correlate.events import Alert as EngineAlert
from correlate.events import change_labels
from correlate.results import Decision as EngineDecision
from correlate.results import Exclude, FalsePositive, Merge, Split
from incidents.catalog import catalog
from incidents.flow import (
    correlation_enqueue_later,
    correlation_enqueue_now,
    evidence_enqueue_for_changes,
    note_run_finished,
    pending_flag,
)
from incidents.models import Alert, CorrelationLock, Decision, Incident
from incidents.services.correlation.keys import lookback
from incidents.services.correlation.state import KEPT, KeyState
from incidents.services.correlation.sync import SyncScope, incidents_sync
from incidents.services.tallies import CORRELATION_ERRORS, CORRELATION_RUN, tally_timed
from incidents.sql import advisory_xact_lock, count_ids, swap_run_token
from rootline.gc_pause import freeze_run_survivors, full_collection_due, gc_paused

logger = logging.getLogger(__name__)


def correlation_run(*, key: str, since: datetime | None = None, keep_state: bool = False) -> list[int]:
    """Correlate one key's new alerts and persist the result; returns the ids of incidents it touched.
    With `since`, recompute everything of the key from then on (the batch path). With
    `keep_state` (the correlation worker's task), keep the key's engine state for the next run in
    this process; other callers (people's actions in a web process, `recorrelate`) leave none.

    A worker's run takes at most `settings.CORRELATION_SLICE` new alerts, oldest first; when more
    wait, the worker queues the key again behind the other keys of its shard (so one cluster's
    storm cannot hold the others back), and an eager run (no broker) simply goes on. Timed, and
    counted when it raises, for /metrics."""
    with tally_timed(CORRELATION_RUN, errors=CORRELATION_ERRORS):
        cache.delete(pending_flag(key))
        started = time.perf_counter()
        touched: list[int] = []
        while True:
            done, more = correlation_slice(key=key, since=since, keep_state=keep_state)
            touched.extend(pk for pk in done if pk not in touched)
            if not more:
                if keep_state:
                    note_run_finished(
                        key, time.perf_counter() - started
                    )  # a worker's run paces the key's next one
                return touched
            if not settings.CELERY_TASK_ALWAYS_EAGER:
                transaction.on_commit(lambda: correlation_enqueue_now([key], paced=False), robust=True)
                return touched


def correlation_slice(*, key: str, since: datetime | None, keep_state: bool) -> tuple[list[int], bool]:
    """One run in one transaction: (ids of the incidents it touched, whether alerts still wait)."""
    started = time.perf_counter()
    current = catalog()
    kept = KEPT.take(key)
    took_state = kept is not None
    more = False
    try:
        # The collector stays off until a worker's run has frozen its survivors: switched on before, it
        # collected the run's objects at once (their count far past its threshold), and the freeze's
        # own collection walked them again (a storm's correlation paid for both walks).
        with gc_paused():
            with transaction.atomic():
                previous_token, token = lock_key(key)
                reason = "a batch run" if since is not None else stale_reason(kept, previous_token, current)
                touched: list[int] | None = None
                state: KeyState | None = None
                limit = settings.CORRELATION_SLICE if keep_state and since is None else None
                if reason is None and kept is not None:
                    touched, state, reason, more = delta_run(key, kept, current, limit)
                if state is None or touched is None:
                    touched, state, more = window_run(key, since, current, limit)
                evidence_enqueue_for_changes(
                    touched
                )  # an incident that opened, grew or resolved needs its metrics again
            path = f"window ({reason})" if reason else "kept state"
            logger.info(
                "correlated %s from the %s: %d incidents written, %d alerts held, %.1f ms%s",
                key,
                path,
                len(touched),
                len(state.rows) if state else 0,
                (time.perf_counter() - started) * 1000,
                ", more waiting" if more else "",
            )
            if keep_state:
                evicted = 0
                if state is not None:
                    # Kept at once, even inside a caller's transaction: should that roll back, the key's
                    # stored token goes back with it and the next run rebuilds instead of using this state.
                    state.token = token
                    evicted = KEPT.keep(key, state)
                    wait = state.next_ranking_in()
                    if wait is not None and not more:
                        transaction.on_commit(lambda: correlation_enqueue_later(key, wait), robust=True)
                dropped = evicted > 0 or (kept is not None and kept is not state)
                del kept  # a dropped state must be unreachable before the collection
                freeze_run_survivors(state_dropped=dropped)
    except BaseException:
        if took_state:
            full_collection_due()  # the state it took is lost: frozen, and now unreachable
        raise
    return touched, more  # only a worker's run (keep_state) takes a limited slice


def defers_ranking() -> bool:
    """Whether a worker's kept state ranks big incidents only every few seconds (`KeyState.rank_now`):
    only with a broker, which runs the key again when a held-back ranking is due."""
    return not settings.CELERY_TASK_ALWAYS_EAGER


def stale_reason(state: KeyState | None, previous_token: str, current: Catalog) -> str | None:
    """Why the kept state cannot be used, or None when it can."""
    if state is None:
        return "no state kept"
    if state.token != previous_token:
        return "the key ran elsewhere since"
    if state.catalog is not current:
        return "the catalog changed"
    return None


CORRELATION_LOCK_SPACE = 4242  # advisory locks are (space, id); evidence collection uses another space


def key_lock(key: str) -> None:
    """Wait for the correlation key's lock, as a run of the key takes it (`lock_key`), until the
    transaction ends, leaving the key's run token alone, so a worker's kept state stays valid:
    people's actions take it before their incident's row (`incidents/services/incidents.py`).

    A run loads the key's incidents and then writes what it recomputed from them (severity,
    status): an action committed in between was lost. And a grouping action re-runs correlation,
    which takes the key: taken after the incident's row, it deadlocked with a worker that holds
    the key and writes that row (`tests/incidents/test_actions_audit.py`)."""
    if advisory_xact_lock(CORRELATION_LOCK_SPACE, zlib.crc32(key.encode()) - 2**31):
        return
    CorrelationLock.objects.get_or_create(key=key)
    # SQLite has no row locks: a write takes the database's write lock for the transaction.
    CorrelationLock.objects.filter(key=key).update(run_token=F("run_token"))


def lock_key(key: str) -> tuple[str, str]:
    """Serialise runs of `key` until the transaction ends (`key_lock`); returns the run token the
    previous run left and the one this run leaves."""
    token = uuid.uuid4().hex
    if connection.vendor == "postgresql":
        key_lock(key)
        return swap_run_token(CorrelationLock, key, token), token
    CorrelationLock.objects.get_or_create(key=key)
    previous = CorrelationLock.objects.select_for_update().get(key=key).run_token
    CorrelationLock.objects.filter(key=key).update(run_token=token)
    return previous, token


def delta_run(
    key: str, state: KeyState, current: Catalog, limit: int | None
) -> tuple[list[int] | None, KeyState | None, str | None, bool]:
    """Feed the kept state the key's oldest `limit` uncorrelated alerts (all without a limit):
    (touched, state, None, whether more wait), or (None, None, why, False) when the state must be
    rebuilt instead."""
    if decision_ids(key) != state.decisions:
        return None, None, "a human decision", False
    fresh, more = oldest_first(Alert.objects.filter(correlation_key=key, correlated=False), limit)
    fresh.sort(key=lambda row: (row.starts_at, row.id))
    if not fresh and not state.ranking_due():
        return [], state, None, False
    if fresh and not state.can_take(fresh[0].starts_at, lookback(current)):
        return None, None, "new alerts outside the state's window", False
    if state.relabelled(fresh):
        return None, None, "a known alert's labels changed", False
    changed = state.add(fresh, [engine_alert(row) for row in fresh], hold_big_rankings=defers_ranking())
    result, scope = state.affected(changed, fresh)
    if not still_stored(scope.previous):
        return None, None, "alerts or incidents deleted", False
    touched = incidents_sync(key=key, scope=scope, result=result)
    state.note_moves(scope.moves)
    return touched, state, None, more


def still_stored(previous: Mapping[int, set[str]]) -> bool:
    """The stored incidents a delta run is about to read and write are all still in the
    database, each with as many alerts as the kept state holds in it: alerts or incidents
    deleted by hand (the admin, a shell) make the kept state stale. The other rows it writes are
    the new alerts, just read. Counted per incident rather than by alert id: a storm's incident
    holds thousands of alerts, and sending all their ids on every run cost as much as the rest of
    the check."""
    incident_ids = sorted(previous)
    if not incident_ids:
        return True
    held = sum(len(keys) for keys in previous.values())
    return (
        count_ids(Incident, "id", incident_ids) == len(incident_ids)
        and count_ids(Alert, "incident_id", incident_ids) == held
    )


def oldest_first(pending: QuerySet[Alert], limit: int | None) -> tuple[list[Alert], bool]:
    """The first `limit` of `pending` in arrival order, and whether more wait."""
    if limit is None:
        return list(pending), False
    taken = list(pending.order_by("id")[: limit + 1])
    return taken[:limit], len(taken) > limit


def window_run(
    key: str, since: datetime | None, current: Catalog, limit: int | None
) -> tuple[list[int], KeyState | None, bool]:
    """Recompute the key's window from the database (with `limit`, around only the oldest `limit`
    uncorrelated alerts); the engine state it builds is kept. Returns whether more wait."""
    since, rows, more = window_alerts(key, since=since, span=lookback(current), limit=limit)
    if not rows or since is None:
        return [], None, False
    decisions = list(Decision.objects.filter(correlation_key=key))
    correlator = Correlator(current, [engine_decision(d) for d in decisions])
    result = correlator.add_many([engine_alert(row) for row in rows])
    scope = SyncScope.of_rows(rows)
    touched = incidents_sync(key=key, scope=scope, result=result)
    state = KeyState.from_window(
        correlator, current, since, tuple(d.pk for d in decisions), rows, scope.written
    )
    state.note_ranked(incident.id for incident in result)
    return touched, state, more


def decision_ids(key: str) -> tuple[int, ...]:
    return tuple(Decision.objects.filter(correlation_key=key).values_list("pk", flat=True))


def window_alerts(
    key: str, *, since: datetime | None, span: timedelta, limit: int | None = None
) -> tuple[datetime | None, list[Alert], bool]:
    """The alerts a window run must see, where the window starts, and whether uncorrelated alerts
    were left for a later run: everything new (not yet correlated; with `limit`, only the oldest
    `limit` of it) and what it can join, that is alerts starting within `span` before the earliest
    new one, and every alert of an incident any of those belongs to (so an incident is never
    seen in part)."""
    alerts = Alert.objects.filter(correlation_key=key)
    in_span, more = alerts, False
    if since is None:
        pending = alerts.filter(correlated=False)
        if limit is None:
            earliest_new = pending.aggregate(first=Min("starts_at"))["first"]
        else:
            taken, more = oldest_first(pending.only("id", "starts_at"), limit)
            earliest_new = min((row.starts_at for row in taken), default=None)
            if more:
                in_span = alerts.filter(Q(correlated=True) | Q(pk__in=[row.pk for row in taken]))
        # Incidents whose ranking a kept state held back are ranked as if their alerts were new:
        # the state was stale or lost with its process, and a rebuild must not leave them behind.
        held_since = alerts.filter(incident__ranking_held=True).aggregate(first=Min("starts_at"))["first"]
        earliest_new = min((t for t in (earliest_new, held_since) if t is not None), default=None)
        if earliest_new is None:
            return None, [], False
        since = earliest_new - span
    rows = {row.pk: row for row in in_span.filter(starts_at__gte=since)}
    incident_ids = {row.incident_id for row in rows.values() if row.incident_id}
    if incident_ids:
        for row in alerts.filter(incident_id__in=incident_ids).exclude(pk__in=list(rows)):
            rows[row.pk] = row
    return since, sorted(rows.values(), key=lambda row: (row.starts_at, row.pk)), more


def engine_alert(row: Alert) -> EngineAlert:
    """The engine's view of a stored alert; it shares the row's label and annotation dicts (the
    engine only reads them, and a kept state holds both for every alert of its window)."""
    labels = row.labels
    if row.kind == Alert.Kind.CHANGE:
        labels = change_labels(labels)
    return EngineAlert(
        fingerprint=row.fingerprint,
        starts_at=row.starts_at,
        labels=labels,
        annotations=row.annotations,
        ends_at=row.ends_at,
        status=row.status,
        generator_url=row.generator_url,
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


def correlation_rebuild(*, since: datetime) -> dict[str, int]:
    """Batch correlation of everything since `since`, key by key, through the same run as the
    incremental path, so both give the same incidents for the same alerts."""
    keys = sorted(set(Alert.objects.filter(starts_at__gte=since).values_list("correlation_key", flat=True)))
    touched = 0
    for key in keys:
        touched += len(correlation_run(key=key, since=since))
    return {"keys": len(keys), "incidents": touched}
