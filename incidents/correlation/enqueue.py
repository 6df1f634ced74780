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
            correlate_key.delay(key)


def pending_flag(key: str) -> str:
    return f"rootline:correlate-pending:{zlib.crc32(key.encode())}:{key[:100]}"
