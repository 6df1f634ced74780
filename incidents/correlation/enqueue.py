"""Queueing correlation runs: at most one pending run per key."""
from __future__ import annotations

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


def correlation_enqueue_now(keys: list[str]) -> None:
    from incidents.tasks import correlate_key

    for key in keys:
        if settings.CELERY_TASK_ALWAYS_EAGER or cache.add(pending_flag(key), 1, timeout=60):
            correlate_key.apply_async((key,), queue=correlation_queue(key))


def correlation_queue(key: str) -> str:
    """The queue of the key's shard: a key always goes to the same one, whose single process
    keeps the key's engine state between runs."""
    shards = settings.CORRELATION_SHARDS
    if shards == 1:
        return settings.CELERY_CORRELATION_QUEUE
    return f"{settings.CELERY_CORRELATION_QUEUE}-{zlib.crc32(key.encode()) % shards}"


def pending_flag(key: str) -> str:
    return f"rootline:correlate-pending:{zlib.crc32(key.encode())}:{key[:100]}"
