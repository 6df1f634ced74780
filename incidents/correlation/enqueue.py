"""Queueing correlation runs: at most one pending run per key, and runs of a key paced."""
from __future__ import annotations

import time
import zlib
from collections.abc import Iterable

from django.conf import settings
from django.core.cache import cache
from django.db import transaction


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
    from incidents.tasks import correlate_key

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
    was 5% of the ingestion worker's time). A flag seen here and gone a moment later is no loss:
    the run deletes it before it reads the key's alerts, which include these by then."""
    present = cache.get_many([pending_flag(key) for key in keys])
    return [key for key in keys if pending_flag(key) not in present and cache.add(pending_flag(key), 1, timeout=60)]


def correlation_requeue_waiting() -> list[str]:
    """Queue a run of every key with alerts no run has taken (a run each, as the debounce allows),
    returns those keys. A key's run is queued after its alerts commit; should the broker or the
    cache fail just then (the enqueue is best effort, the alerts are stored), a quiet cluster's
    alerts would wait for its next delivery, however long that takes. Beat calls this every minute
    (`incidents.requeue_uncorrelated`); a key whose run is already queued costs one cache read."""
    from incidents.models import Alert

    keys = sorted(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True).distinct())
    if keys:
        correlation_enqueue_now(keys)
    return keys


def correlation_enqueue_later(key: str, seconds: float) -> None:
    """A run of `key` in `seconds`, for the rankings its last run held back, unless one is queued
    for that already: it asks again if it still leaves some held back. It has a flag of its own.
    Sharing the new alerts' pending flag, it kept every delivery of those seconds from queueing a
    run, and a busy cluster's new alerts waited for it, up to a held ranking's 5 s (storm at
    2,000 alerts/s: p99 delivery -> incident 1.1 s, 4.6 s with more incidents held)."""
    from incidents.tasks import correlate_key

    if cache.add(ranking_flag(key), 1, timeout=60 + int(seconds)):
        correlate_key.apply_async((key,), {"held_ranking": True}, queue=correlation_queue(key),
                                  countdown=max(round(seconds, 3), 0.01))


# After a run, its key's next run waits up to this many times the run's length (at most one pace):
# a trickle's runs then take at most a third of a core, and cheap runs barely wait.
RUN_SPACING = 2.0


def pace_delays(keys: list[str]) -> dict[str, float]:
    """Seconds each key's next run should wait, as its last run asked (`note_run_finished`).

    A trickle of deliveries (an alert or a few a time) otherwise starts one run per delivery,
    and each run's fixed cost (lock, queries, writes, an incident re-ranked) then costs more CPU
    than the alerts: in bench/ingest's bodies of 1, correlation took 0.9 ms of CPU per alert, as
    much as storing it. Paced, the alerts arriving meanwhile share one run. The first alert after
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
        cache.set(next_run_flag(key), time.time() + min(pace, RUN_SPACING * seconds), timeout=max(1, int(pace) + 1))


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
