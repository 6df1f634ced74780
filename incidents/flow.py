"""What runs when: the follow-up work each step enqueues (a delivery read, its clusters
correlated, the incidents that changed collected as evidence), with the pending flags, pacing and
postponements that keep a storm to a few tasks. Every enqueue of the app is here, and tasks are
sent by name (`task`), so no domain module imports `incidents.tasks` (which imports them)."""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, cast

from celery import current_app
from celery.contrib.django.task import DjangoTask
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from incidents.models import Alert, Incident

logger = logging.getLogger(__name__)

PROCESS_DELIVERY = "incidents.process_delivery"
PROCESS_PENDING_DELIVERIES = "incidents.process_pending_deliveries"
CORRELATE_KEY = "incidents.correlate_key"
COLLECT_EVIDENCE = "incidents.collect_evidence"
COLLECT_EVIDENCE_EACH = "incidents.collect_evidence_each"
DRAFT_POSTMORTEMS = "incidents.draft_postmortems"
REMEDIATION_WEBHOOK = "incidents.remediation_webhook"
PRUNE = "incidents.prune"  # beat's, daily (docs/retention.md)


def task(name: str) -> DjangoTask[Any, Any]:
    """The registered task of that name (`incidents.tasks`, imported by the app's `ready()`); under
    Django, Celery makes every task a DjangoTask (`delay_on_commit`)."""
    return cast(DjangoTask[Any, Any], current_app.tasks[name])


# Deliveries ------------------------------------------------------------------------------

DRAIN_FLAG = "rootline:drain-pending"
DRAIN_FLAG_TTL = 30


def delivery_enqueue(delivery_id: int) -> None:
    """After the commit, get the delivery processed. With a shared cache (Redis) and a real
    broker, a storm of deliveries shares a few drain tasks (`deliveries_drain`) instead of one
    task per delivery, signalled by `DRAIN_SIGNALS` (no round trip in the request); otherwise
    (eager Celery, the demo) one `process_delivery` per delivery."""
    if settings.ROOTLINE_INGEST_DRAIN and not settings.CELERY_TASK_ALWAYS_EAGER:
        transaction.on_commit(DRAIN_SIGNALS.owe)
    else:
        task(PROCESS_DELIVERY).delay_on_commit(delivery_id)


def drain_signal() -> None:
    """Enqueue a drain task unless one is queued and not yet started: the flag is set here and
    cleared by the task as it starts, before it looks for pending deliveries, so a delivery
    committed before this call is either seen by that task or signals a new one. A lost
    message or a dead cache delays nothing beyond the flag's TTL and beat's requeue."""
    try:
        first = cache.add(DRAIN_FLAG, 1, timeout=DRAIN_FLAG_TTL)
    except Exception:  # noqa: BLE001 - no cache: enqueue anyway, a spare drain costs one query
        logger.warning("drain flag unavailable; enqueueing a drain", exc_info=True)
        first = True
    if first:
        task(PROCESS_PENDING_DELIVERIES).delay()


class DrainSignals:
    """`drain_signal` for a web process, at most once per `interval`, off the request threads.

    A webhook only notes, after its commit, that a signal is owed (a lock, no I/O); one
    background thread per process sends it, at once if the last one is `interval` old, else
    when it is. Every signal is sent after the commits that owed it, so each stored delivery is
    seen by a drain that starts after its commit (`drain_signal`). A signal that fails (Redis
    down) stays owed and is sent again every `retry_interval` until it goes through. A process
    that dies with a signal owed leaves its deliveries to beat's `requeue_stale_deliveries`
    (ROOTLINE_REQUEUE_AFTER_SECONDS), as a lost broker message would; a normal exit sends it (atexit)."""

    def __init__(
        self, interval: float = 0.1, send: Callable[[], None] | None = None, retry_interval: float = 1.0
    ) -> None:
        self.interval = interval
        self.retry_interval = retry_interval
        self.failing = False
        self.send = send or drain_signal
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.owed = False
        self.next_at = 0.0
        self.pid: int | None = None

    def owe(self) -> None:
        with self.lock:
            if self.owed:
                return
            self.owed = True
            if self.pid != os.getpid():  # first use in this process (gunicorn forks its workers)
                self.pid = os.getpid()
                self.wake = threading.Event()
                threading.Thread(target=self.run, name="rootline-drain-signal", daemon=True).start()
                atexit.register(self.flush)
        self.wake.set()

    def run(self) -> None:
        while True:
            self.wake.wait()
            delay = self.next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.flush()

    def flush(self) -> None:
        with self.lock:
            if not self.owed:
                return
            self.owed = False
            self.wake.clear()
            self.next_at = time.monotonic() + self.interval
        try:
            self.send()
        except Exception:  # noqa: BLE001 - the deliveries stay pending and the signal stays owed
            self.owe_again()
        else:
            if self.failing:
                logger.warning("drain signalled again: the broker is back")
            self.failing = False

    def owe_again(self) -> None:
        """The broker or the cache is down: the deliveries are stored; the signal is tried again
        every `retry_interval`, so what was stored meanwhile (by any process: a drain takes every
        pending delivery) is drained as soon as they are back, not at beat's next sweep."""
        if not self.failing:
            logger.warning(
                "could not signal a drain; retrying every %g s", self.retry_interval, exc_info=True
            )
        self.failing = True
        with self.lock:
            self.owed = True
            self.next_at = time.monotonic() + self.retry_interval
        self.wake.set()


DRAIN_SIGNALS = DrainSignals()


# Correlation -----------------------------------------------------------------------------


def correlation_enqueue(keys: Iterable[str]) -> None:
    """One pending run per key is enough: a run takes every alert of the key not yet correlated,
    so a storm of deliveries collapses into a few runs instead of one per delivery.

    The flag is taken only once the caller's transaction has committed. Taken before, a run
    already queued for the key could start, clear the flag and read its window while these
    alerts were still uncommitted, and no run would follow for them (nor, for a transaction
    that rolled back, for anything else of the key until the flag expired)."""
    keys = sorted(set(keys))
    if keys:
        transaction.on_commit(lambda: correlation_enqueue_now(keys), robust=True)


def correlation_enqueue_now(keys: list[str], *, paced: bool = True) -> None:
    """Queue a run of each key that has none pending. `paced`: a key that ran a moment ago runs
    when its last run said (see `pace_delays`), not at once; a run that left alerts waiting
    re-queues its key unpaced."""
    correlate_key = task(CORRELATE_KEY)
    wanted = keys if settings.CELERY_TASK_ALWAYS_EAGER else without_pending_run(keys)
    delays = pace_delays(wanted) if paced else {}
    for key in wanted:
        delay = delays.get(key)
        if delay:
            correlate_key.apply_async((key,), queue=correlation_queue(key), countdown=delay)
        else:
            correlate_key.apply_async((key,), queue=correlation_queue(key))


def without_pending_run(keys: list[str]) -> list[str]:
    """The keys whose pending flag this call took: one read for all of them first, since in a
    storm nearly every key of an ingestion batch has its run queued already (a flag set per key
    cost the ingestion worker a round trip each). A flag seen here and gone a moment later is no loss:
    the run deletes it before it reads the key's alerts, which include these by then."""
    present = cache.get_many([pending_flag(key) for key in keys])
    return [
        key
        for key in keys
        if pending_flag(key) not in present and cache.add(pending_flag(key), 1, timeout=60)
    ]


def correlation_requeue_waiting() -> list[str]:
    """Queue a run of every key with alerts no run has taken (a run each, as the debounce allows),
    returns those keys. A key's run is queued after its alerts commit; should the broker or the
    cache fail just then (the enqueue is best effort, the alerts are stored), a quiet cluster's
    alerts would wait for its next delivery, however long that takes. Beat calls this every minute
    (`incidents.requeue_uncorrelated`); a key whose run is already queued costs one cache read."""
    keys = sorted(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True).distinct())
    if keys:
        correlation_enqueue_now(keys)
    return keys


def correlation_enqueue_later(key: str, seconds: float) -> None:
    """A run of `key` in `seconds`, for the rankings its last run held back, unless one is queued
    for that already: it asks again if it still leaves some held back. It has a flag of its own.
    Sharing the new alerts' pending flag, it kept every delivery of those seconds from queueing a
    run, and a busy cluster's new alerts waited for it, up to a held ranking's 5 s: in a storm,
    the more incidents were held, the longer delivery -> incident took."""
    if cache.add(ranking_flag(key), 1, timeout=60 + int(seconds)):
        task(CORRELATE_KEY).apply_async(
            (key,),
            {"held_ranking": True},
            queue=correlation_queue(key),
            countdown=max(round(seconds, 3), 0.01),
        )


# After a run, its key's next run waits up to this many times the run's length (at most one pace):
# a trickle's runs then take at most a third of a core, and cheap runs barely wait.
RUN_SPACING = 2.0


def pace_delays(keys: list[str]) -> dict[str, float]:
    """Seconds each key's next run should wait, as its last run asked (`note_run_finished`).

    A trickle of deliveries (an alert or a few a time) otherwise starts one run per delivery,
    and each run's fixed cost (lock, queries, writes, an incident re-ranked) then costs more CPU
    than the alerts: with bench/ingest's bodies of 1, correlating an alert cost as much CPU as
    storing it. Paced, the alerts arriving meanwhile share one run. The first alert after
    a quiet spell is correlated at once; later ones wait at most one pace. Eager runs (no broker)
    are never paced: nothing would run them later."""
    if settings.CORRELATION_PACE_SECONDS <= 0 or settings.CELERY_TASK_ALWAYS_EAGER or not keys:
        return {}
    next_at = cache.get_many([next_run_flag(key) for key in keys])
    now = time.time()
    delays = {}
    for key in keys:
        wait = next_at.get(next_run_flag(key), now) - now
        if wait > 0.005:
            delays[key] = round(wait, 3)
    return delays


def pace_wait(key: str) -> float:
    """Seconds a run of `key` that is about to start should still wait (0: none). A run queued
    while the key's last one was still running could not know its pace when it was queued."""
    return pace_delays([key]).get(key, 0.0)


def note_run_finished(key: str, seconds: float) -> None:
    """For `pace_delays`: the key's next run may start `RUN_SPACING` x this run's length from now,
    at most one pace."""
    pace = settings.CORRELATION_PACE_SECONDS
    if pace > 0:
        cache.set(
            next_run_flag(key), time.time() + min(pace, RUN_SPACING * seconds), timeout=max(1, int(pace) + 1)
        )


def correlation_queue(key: str) -> str:
    """The queue of the key's shard: a key always goes to the same one, whose single process
    keeps the key's engine state between runs."""
    shards = settings.CORRELATION_SHARDS
    if shards == 1:
        return settings.CELERY_CORRELATION_QUEUE
    return f"{settings.CELERY_CORRELATION_QUEUE}-{zlib.crc32(key.encode()) % shards}"


def pending_flag(key: str) -> str:
    """Set while a run of the key for its new alerts is queued."""
    return key_flag("pending", key)


def ranking_flag(key: str) -> str:
    """Set while a run of the key for its held-back rankings is queued."""
    return key_flag("ranking", key)


def next_run_flag(key: str) -> str:
    """When the key's next run may start (`note_run_finished`)."""
    return key_flag("next", key)


def key_flag(kind: str, key: str) -> str:
    return f"rootline:correlate-{kind}:{zlib.crc32(key.encode())}:{key[:100]}"


# Evidence --------------------------------------------------------------------------------


def evidence_enqueue(incident_ids: Iterable[int], *, asked: bool = False) -> None:
    """Ask for a collection of each incident once its caller's transaction commits; one
    pending collection per incident is enough, since a run reads the incident as it is then
    (the flag is taken after commit for the reason `correlation_enqueue` gives). With a broker
    it starts `SETTLE_SECONDS` later, so a burst of changes costs one collection. `asked`: a
    person pressed "Refresh evidence" (Prometheus is back, say): in `ASKED_SECONDS`, whenever
    the last collection was."""
    ids = sorted({int(pk) for pk in incident_ids if pk})
    if ids:
        transaction.on_commit(lambda: evidence_enqueue_now(ids, asked=asked), robust=True)


def evidence_enqueue_for_changes(incident_ids: Iterable[int]) -> None:
    """After correlation changed these incidents. Without a broker (the demo) collection would
    run inside every webhook request, so there it waits for an explicit refresh, an import or
    the demo loader instead."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        evidence_enqueue(incident_ids)


# A collection starts this long after the first change that asks for it, and no sooner than this
# long after the incident's previous collection started; the changes in between ride on it: during
# an alert storm correlation changes the same incidents every second, and each collection is
# dozens of Prometheus range queries.
SETTLE_SECONDS = 10
MIN_INTERVAL_SECONDS = 60
ASKED_SECONDS = 1


def evidence_enqueue_now(incident_ids: list[int], *, asked: bool = False) -> None:
    collect_evidence, collect_evidence_each = task(COLLECT_EVIDENCE), task(COLLECT_EVIDENCE_EACH)
    if settings.CELERY_TASK_ALWAYS_EAGER:
        for incident_id in incident_ids:
            collect_evidence.delay_on_commit(incident_id)
        return
    now = time.time()
    # One read for the lot: during a storm nearly every incident a correlation run touches has a
    # collection pending already, and two cache round trips per incident per run were a real share
    # of the correlation worker's time (bench/correlate/end_to_end.py --profile, steady case). A
    # flag seen here and gone a moment later is no loss: the collection deletes it before it
    # reads the incident, which has this change by then.
    known = cache.get_many(
        [evidence_pending_flag(pk) for pk in incident_ids] + [evidence_started_key(pk) for pk in incident_ids]
    )
    due: dict[int, list[int]] = defaultdict(list)  # whole seconds from now -> incidents
    for incident_id in incident_ids:
        if evidence_pending_flag(incident_id) in known:
            continue
        last = known.get(evidence_started_key(incident_id))
        if asked:
            countdown = ASKED_SECONDS
        else:
            countdown = math.ceil(max(SETTLE_SECONDS, (last + MIN_INTERVAL_SECONDS - now) if last else 0))
        if cache.add(evidence_pending_flag(incident_id), 1, timeout=countdown + 60):
            due[countdown].append(incident_id)
    # One message per moment: a storm's run opens hundreds of incidents at once, and a task sent
    # for each was work the correlation worker paid for; the evidence worker, on its idle CPU,
    # queues their collections (`collect_evidence_each`).
    for countdown, ids in due.items():
        if len(ids) == 1:
            collect_evidence.apply_async((ids[0],), countdown=countdown)
        else:
            collect_evidence_each.apply_async((ids,), countdown=countdown)


# Correlation comes first. An incident whose cluster has alerts stored and not yet correlated is
# about to change (and to ask for its collection again), and in a storm the evidence worker's
# range queries and upserts took CPU and database time the correlation workers were short of,
# idle priority or not (bench/correlate/end_to_end.py's storm: delivery -> incident was slower
# with collections running). Such a collection is put off WAIT_FOR_CORRELATION_SECONDS
# at a time, at most WAIT_FOR_CORRELATION_AT_MOST_SECONDS in all, so a cluster that never stops
# alerting still gets its evidence; Prometheus keeps the series for days, a wait loses nothing.
WAIT_FOR_CORRELATION_SECONDS = 10
WAIT_FOR_CORRELATION_AT_MOST_SECONDS = 120


def evidence_collect_now(incident_ids: list[int], *, waited: int = 0) -> list[int]:
    """The incidents whose collection runs now. The others' clusters still have alerts waiting
    for correlation: their collection is queued again for later, in one message, and keeps its
    pending flag, so the changes until then still ride on it."""
    if settings.CELERY_TASK_ALWAYS_EAGER or waited >= WAIT_FOR_CORRELATION_AT_MOST_SECONDS:
        return incident_ids
    later = incidents_awaiting_correlation(incident_ids)
    if not later:
        return incident_ids
    collect_evidence, collect_evidence_each = task(COLLECT_EVIDENCE), task(COLLECT_EVIDENCE_EACH)
    wait = WAIT_FOR_CORRELATION_SECONDS
    cache.set_many({evidence_pending_flag(pk): 1 for pk in later}, timeout=wait + 60)
    if len(later) == 1:
        collect_evidence.apply_async((later[0],), {"waited": waited + wait}, countdown=wait)
    else:
        collect_evidence_each.apply_async((later,), {"waited": waited + wait}, countdown=wait)
    postponed = set(later)
    return [pk for pk in incident_ids if pk not in postponed]


def incidents_awaiting_correlation(incident_ids: list[int]) -> list[int]:
    """Those of the incidents whose correlation key has alerts stored and not yet correlated
    (one probe of the uncorrelated alerts' partial index per key)."""
    keys = dict(Incident.objects.filter(pk__in=incident_ids).values_list("pk", "correlation_key"))
    behind = {
        key
        for key in sorted(set(keys.values()))
        if Alert.objects.filter(correlation_key=key, correlated=False).exists()
    }
    return [pk for pk in incident_ids if keys.get(pk) in behind]


# The sweep looks back this far: an older incident's evidence is refreshed from its page.
EVIDENCE_SWEEP_HORIZON = timedelta(days=1)
EVIDENCE_SWEEP_BATCH = 500


def evidence_requeue_owed() -> list[int]:
    """Queue a collection of each incident changed since its last finished collection, at least
    ROOTLINE_REQUEUE_AFTER_SECONDS ago, with none pending; returns their ids. A collection's
    message is lost with a worker killed while holding it (back from the broker only after its
    visibility timeout, an hour), and its pending flag expires: beat calls this every
    ROOTLINE_SWEEP_SECONDS (`incidents.requeue_evidence`). Those with a collection pending or
    postponed keep their flag and are left alone (`evidence_enqueue_now`)."""
    cutoff = timezone.now() - timedelta(seconds=settings.REQUEUE_AFTER_SECONDS)
    ids = list(
        Incident.objects.filter(
            merged_into__isnull=True, updated_at__lt=cutoff, updated_at__gte=cutoff - EVIDENCE_SWEEP_HORIZON
        )
        .filter(Q(evidence_collected_at__isnull=True) | Q(evidence_collected_at__lt=F("updated_at")))
        .order_by("id")
        .values_list("pk", flat=True)[:EVIDENCE_SWEEP_BATCH]
    )
    if ids and not settings.CELERY_TASK_ALWAYS_EAGER:
        evidence_enqueue_now(ids)
    return ids


def evidence_pending_flag(incident_id: int) -> str:
    return f"rootline:evidence-pending:{incident_id}"


def evidence_started_key(incident_id: int) -> str:
    return f"rootline:evidence-started:{incident_id}"


# Postmortems -------------------------------------------------------------------------------


def postmortem_enqueue(incident_ids: Iterable[int]) -> None:
    """Incidents whose evidence was collected after they resolved: those the policy asks a
    postmortem of get their draft, after the commit."""
    ids = sorted(set(incident_ids))
    if ids and settings.POSTMORTEM_AUTO_DRAFT:
        task(DRAFT_POSTMORTEMS).delay_on_commit(ids)


def postmortem_after_resolve(incident_id: int) -> None:
    """A person resolved an incident: its evidence is collected once more and its postmortem drafted
    from it (`collect_evidence` drafts when done). Without a broker (the demo) evidence waits for an
    explicit refresh, so the draft is made at once from what is there."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        postmortem_enqueue([incident_id])
    else:
        evidence_enqueue([incident_id])


# Remediation --------------------------------------------------------------------------------


def remediation_webhook_enqueue(item_id: int, event: str) -> None:
    """Tell the issue tracker's webhook (ROOTLINE_REMEDIATION_WEBHOOK_URL) of an item created or
    changed, after the commit; the task retries with backoff."""
    if settings.REMEDIATION_WEBHOOK_URL:
        task(REMEDIATION_WEBHOOK).delay_on_commit(item_id, event)
