"""Pausing Python's cyclic garbage collector around work that builds many objects and few cycles."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block; what it leaves is collected after it, as usual.

    The ingestion drain's parsed alerts (50,000 in a batch of 100-alert bodies) and a correlation
    run's engine objects hold few cycles and are freed by reference counting, but every collection
    walked them again, and in the correlation worker every state it keeps: a quarter of the
    ingestion worker's CPU per alert, a fifth of a storm correlation run's
    (`bench/correlate/storm_cluster.py --gc on|paused`: 452-456 against 357-373 µs an alert)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
