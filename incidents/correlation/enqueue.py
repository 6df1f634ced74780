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
    """Queue a run of each key that has none pending. `paced`: a key whose last run started
    less than `ROOTLINE_CORRELATION_PACE_MS` ago runs when that time is up, not at once (see
    `pace_delays`); a run that left alerts waiting re-queues its key unpaced."""
    from incidents.tasks import correlate_key

    wanted = [key for key in keys if settings.CELERY_TASK_ALWAYS_EAGER or cache.add(pending_flag(key), 1, timeout=60)]
    delays = pace_delays(wanted) if paced and not settings.CELERY_TASK_ALWAYS_EAGER else {}
    for key in wanted:
        delay = delays.get(key)
        if delay:
            correlate_key.apply_async((key,), queue=correlation_queue(key), countdown=delay)
        else:
            correlate_key.apply_async((key,), queue=correlation_queue(key))


def pace_delays(keys: list[str]) -> dict[str, float]:
    """Seconds each key's next run should wait so that its runs start at most once a pace.

    A trickle of deliveries (an alert or a few a time) otherwise starts one run per delivery,
    and each run's fixed cost (lock, queries, writes) then costs more CPU than the alerts: in
    bench/ingest's bodies of 1, correlation took 0.9 ms of CPU per alert, as much as storing it.
    Paced, the alerts of a pace share one run. The first alert after a quiet spell (no run
    within a pace) is correlated at once; later ones wait at most one pace."""
    pace = settings.CORRELATION_PACE_SECONDS
    if pace <= 0 or not keys:
        return {}
    started = cache.get_many([last_run_flag(key) for key in keys])
    now = time.time()
    delays = {}
    for key in keys:
        last = started.get(last_run_flag(key))
        if last is not None and now - last < pace:
            delays[key] = round(last + pace - now, 3)
    return delays


def note_run_started(key: str) -> None:
    """For `pace_delays`: when this key's last run started."""
    pace = settings.CORRELATION_PACE_SECONDS
    if pace > 0:
        cache.set(last_run_flag(key), time.time(), timeout=max(1, int(pace * 4) + 1))


def correlation_queue(key: str) -> str:
    """The queue of the key's shard: a key always goes to the same one, whose single process
    keeps the key's engine state between runs."""
    shards = settings.CORRELATION_SHARDS
    if shards == 1:
        return settings.CELERY_CORRELATION_QUEUE
    return f"{settings.CELERY_CORRELATION_QUEUE}-{zlib.crc32(key.encode()) % shards}"


def pending_flag(key: str) -> str:
    return f"rootline:correlate-pending:{zlib.crc32(key.encode())}:{key[:100]}"


def last_run_flag(key: str) -> str:
    return f"rootline:correlate-started:{zlib.crc32(key.encode())}:{key[:100]}"
